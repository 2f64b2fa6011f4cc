/**
 * The runs of the open workspace: runs.list / runs.get / projects.list; start, stop, pause, resume,
 * fork and delete through the run manager (runs.ts); notes, tags, logs and config diffs; the run
 * templates the launch form offers; a run's checkpoints.
 */
import type { EngineHost } from './host';
import { runSummary } from './runs';

export function registerRuns(engine: EngineHost): void {
  const S = () => engine.store!;
  const R = () => engine.runs!;
  engine.on('templates.list', () => R().listTemplates());
  engine.on('runs.list', (p) => S().listRuns(p).map(runSummary));
  engine.on('projects.list', () => S().projects());
  engine.on('runs.get', (p) => {
    const r = S().getRun(p.id);
    return {
      ...runSummary(r),
      config: r.config,
      seed: r.seed,
      notes: r.notes,
      checkpoints: S().checkpoints(r.id),
      trajectorySteps: S().trajectorySteps(r.id),
    };
  });
  engine.on('runs.start', (p) => ({ id: R().start(p) }));
  engine.on('runs.stop', async (p) => {
    await R().stop(p.id);
    return null;
  });
  engine.on('runs.pause', (p) => {
    R().pause(p.id);
    return null;
  });
  engine.on('runs.resume', (p) => {
    R().resume(p.id);
    return null;
  });
  engine.on('runs.fork', (p) => ({ id: R().fork(p.id, p) }));
  engine.on('runs.delete', async (p) => {
    if (R().queueState().running === p.id) await R().stop(p.id);
    S().deleteRun(p.id);
    return null;
  });
  engine.on('runs.setNotes', (p) => {
    S().setNotes(p.id, p.notes);
    R().announce(p.id);
    return null;
  });
  engine.on('runs.setTags', (p) => {
    S().setTags(p.id, p.tags);
    R().announce(p.id);
    return null;
  });
  engine.on('runs.log', (p) => S().logs(p.runId, p.afterSeq ?? 0));
  engine.on('runs.diff', (p) => S().configDiff(p.ids));
  engine.on('checkpoints.list', (p) => S().checkpoints(p.runId));
}
