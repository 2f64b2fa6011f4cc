/**
 * A run's story from its stored series: the held-out results before RL (the SFT model alone,
 * `sft/eval/*`), at the best evaluation (the checkpoint.keep_best rule: the first step whose
 * eval/<best_metric> beats every earlier one) and at the end (the last evaluation), metric by metric
 * with the slices the task reports (exact_match/hops_N, …); and the wall time by phase. Pure (no
 * Node imports): runs.learning serves it to the Run view and `arbor show` prints the same numbers.
 */

type Series = { step: number[]; value: (number | null)[] };
type SeriesMap = Record<string, Series | undefined>;

export interface HeldOutColumn {
  label: 'before RL' | 'best' | 'end';
  /** The step it was measured at (the SFT step for "before RL"). */
  step: number;
  values: Record<string, number>;
}

export interface HeldOut {
  /** Held-out metric names (without eval/ or sft/eval/), headline first. */
  metrics: string[];
  columns: HeldOutColumn[];
  bestMetric: string;
}

const ORDER = ['exact_match', 'format_rate', 'tool_calls_per_episode', 'tool_errors_per_episode'];
const rank = (m: string) => {
  const i = ORDER.findIndex((o) => m === o || m.startsWith(`${o}/`));
  return i < 0 ? ORDER.length : i;
};

/** The held-out table from the series of every eval/* and sft/eval/* key (pass all the run's keys; others are ignored). */
export function heldOutTable(series: SeriesMap, bestMetric = 'exact_match'): HeldOut | null {
  const evalKeys = Object.keys(series).filter((k) => k.startsWith('eval/') && series[k]?.step.length);
  const sftKeys = Object.keys(series).filter((k) => k.startsWith('sft/eval/') && series[k]?.step.length);
  if (!evalKeys.length && !sftKeys.length) return null;
  const at = (key: string, step: number): number | undefined => {
    const s = series[key];
    if (!s) return undefined;
    const i = s.step.lastIndexOf(step);
    const v = i < 0 ? null : s.value[i];
    return v == null || !Number.isFinite(v) ? undefined : v;
  };
  const column = (label: HeldOutColumn['label'], prefix: string, keys: string[], step: number): HeldOutColumn => ({
    label,
    step,
    values: Object.fromEntries(keys.map((k) => [k.slice(prefix.length), at(k, step)] as const).filter((e): e is [string, number] => e[1] !== undefined)),
  });
  const columns: HeldOutColumn[] = [];
  if (sftKeys.length) {
    const steps = sftKeys.flatMap((k) => series[k]!.step);
    columns.push(column('before RL', 'sft/eval/', sftKeys, Math.max(...steps)));
  }
  if (evalKeys.length) {
    const steps = [...new Set(evalKeys.flatMap((k) => series[k]!.step))].sort((a, b) => a - b);
    const head = series[`eval/${bestMetric}`];
    // The best evaluation as checkpoint.keep_best picks it: strictly better than every earlier one.
    let best: { step: number; value: number } | undefined;
    if (head)
      head.step.forEach((step, i) => {
        const v = head.value[i];
        if (v != null && Number.isFinite(v) && (best === undefined || v > best.value)) best = { step, value: v };
      });
    if (best) columns.push(column('best', 'eval/', evalKeys, best.step));
    columns.push(column('end', 'eval/', evalKeys, steps[steps.length - 1]!));
  }
  const metrics = [...new Set(columns.flatMap((c) => Object.keys(c.values)))].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  return { metrics, columns, bestMetric };
}

/** The series phaseTimes reads. */
export const STORY_KEYS = ['sft/time_s', 'time/rollout_s', 'time/score_s', 'time/update_s'];

/** Seconds spent per phase, summed over the steps: the SFT warm start's updates and RL's rollout, scoring and update. */
export function phaseTimes(series: SeriesMap): Record<string, number> {
  const sum = (k: string) => (series[k]?.value ?? []).reduce<number>((a, v) => a + (v != null && Number.isFinite(v) ? v : 0), 0);
  const out: Record<string, number> = {};
  for (const [phase, key] of [
    ['sft', 'sft/time_s'],
    ['rollout', 'time/rollout_s'],
    ['score', 'time/score_s'],
    ['update', 'time/update_s'],
  ] as const)
    if (series[key]?.step.length) out[phase] = sum(key);
  return out;
}
