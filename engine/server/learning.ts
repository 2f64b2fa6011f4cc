/**
 * How a run learned: metrics.series (its stored curves, thinned) and runs.learning (the "why didn't
 * it learn" flags and warnings, degeneration, the held-out table, wall time by phase and the steps
 * dynamic sampling dropped groups at; engine/train/diagnostics.ts, degeneration.ts, run-story.ts).
 */
import type { Store } from '../store/store';
import { FLAG_KEYS, flaggedSteps, seriesWarnings } from '../train/diagnostics';
import { DEGENERATION_KEYS, degenerations } from '../train/degeneration';
import { heldOutTable, phaseTimes, STORY_KEYS } from '../train/run-story';
import { isSftWarmStart, SFT_WARM_START_TAG } from '../run/store-sink';
import type { EngineHost } from './host';
import type { Result } from './protocol';

export function registerLearning(engine: EngineHost): void {
  engine.on('metrics.series', (p) => {
    engine.runs!.writer.flush();
    const store = engine.store!;
    const keys = p.keys ?? store.metricKeys(p.runId);
    return Object.fromEntries(keys.map((k) => [k, store.metricSeries(p.runId, k, p.maxPoints ?? 1500)]));
  });
  engine.on('runs.learning', (p) => {
    engine.runs!.writer.flush();
    return runLearning(engine.store!, p.id);
  });
}

/** runs.learning's answer for one run, read from its stored series (and its SFT warm start's, when recorded as its own run). */
function runLearning(store: Store, id: string): Result<'runs.learning'> {
  const run = store.getRun(id);
  const storyKeys = store.metricKeys(id).filter((k) => k.startsWith('eval/') || k.startsWith('sft/eval/'));
  const series = Object.fromEntries(
    [...FLAG_KEYS, ...DEGENERATION_KEYS, ...STORY_KEYS, ...storyKeys, 'dynamic_sampling/dropped_groups'].map((k) => [k, store.metricSeries(id, k, 20000)]),
  );
  // An SFT warm start recorded as its own run (the parent): its time is this run's "sft" phase.
  const parent = run.parentId ? store.listRuns({ tag: SFT_WARM_START_TAG }).find((r) => r.id === run.parentId) : undefined;
  if (parent && isSftWarmStart(parent) && !series['sft/time_s']?.step.length) series['sft/time_s'] = store.metricSeries(parent.id, 'sft/time_s', 20000);
  const bestMetric = (run.config as { checkpoint?: { best_metric?: string } }).checkpoint?.best_metric;
  const dropped = series['dynamic_sampling/dropped_groups']!;
  const stored = new Set(store.trajectorySteps(id));
  return {
    steps: series['learn/zero_variance_groups']!.step.length,
    flagged: flaggedSteps(series),
    warnings: seriesWarnings(series),
    degeneration: degenerations(series),
    heldOut: heldOutTable(series, bestMetric),
    phaseTimes: phaseTimes(series),
    droppedSteps: dropped.step.map((step, i) => ({ step, dropped: dropped.value[i] ?? 0 })).filter((d) => d.dropped > 0 && stored.has(d.step)) as {
      step: number;
      dropped: number;
    }[],
  };
}
