// The open run (the Run view): its detail, metric series and log, followed live, and what the view
// does with it (notes, tags, export, the "why didn't it learn" diagnostics).
import type { ArborApi, Checkpoint, EngineEvent, ExportedFile, LogLine, RunDetail, RunSummary, Series, TrajectorySummary, Learning } from '../api/types';
import { patchSlice, type Get, type Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends RunSlice {}
}

/** The most points of one series loaded at once (the engine thins longer ones). */
export const MAX_POINTS = 1500;

export interface RunState {
  id: string | null;
  detail: RunDetail | null;
  series: Record<string, Series>;
  log: LogLine[];
  smoothing: number;
}

export interface RunSlice {
  run: RunState;
  runActions: {
    open(id: string): Promise<void>;
    /** A run's detail without opening it (e.g. to prefill a fork); null after reporting an error. */
    fetch(id: string): Promise<RunDetail | null>;
    /** Some series of a run without opening it (a parent's curve in the run summary); null after reporting an error. */
    fetchSeries(id: string, keys: string[]): Promise<Record<string, Series> | null>;
    reload(): Promise<void>;
    setSmoothing(v: number): void;
    /** Save the open run's notes / tags in the workspace (false after reporting an error). */
    saveNotes(notes: string): Promise<boolean>;
    saveTags(tags: string[]): Promise<boolean>;
    /** Export the open run (metrics CSV + trajectories JSONL into the workspace's exports/); what was written, or null after reporting an error. */
    export(): Promise<ExportedFile[] | null>;
    applyEvent(e: EngineEvent): void;
    /** Every stored trajectory summary of one step (the Run view's "why didn't it learn" links). */
    fetchTrajectorySummaries(runId: string, step: number): Promise<TrajectorySummary[]>;
    /** The run's "why didn't it learn" flags and warnings (null after reporting an error). */
    fetchLearning(runId: string): Promise<Learning | null>;
  };
}

/** Append one live point to a series (replacing a point at the same step). */
export function appendPoint(s: Series | undefined, step: number, value: number): Series {
  if (!s) return { step: [step], value: [value] };
  const n = s.step.length;
  if (n > 0 && s.step[n - 1] === step) return { step: s.step, value: [...s.value.slice(0, n - 1), value] };
  if (n > 0 && s.step[n - 1] > step) return s;
  return { step: [...s.step, step], value: [...s.value, value] };
}

/** The loaded series with the live points that came after its last step. */
export function mergeSeries(loaded: Record<string, Series>, live: Record<string, Series>): Record<string, Series> {
  const out = { ...loaded };
  for (const [k, l] of Object.entries(live)) {
    let s = out[k];
    for (let i = 0; i < l.step.length; i++) if (l.value[i] != null) s = appendPoint(s, l.step[i], l.value[i] as number);
    if (s) out[k] = s;
  }
  return out;
}

export function createRunSlice(api: ArborApi, set: Set, get: Get): RunSlice {
  const patch = (p: Partial<RunState>) => patchSlice(set, 'run', p);
  const report = (context: string, err: unknown) => get().connectionActions.reportError(context, err);
  let pendingRun: RunSummary | null = null;
  // Checkpoints announced while the open run was loading: merged into the snapshot when it arrives.
  let pendingCheckpoints: { runId: string; checkpoint: Checkpoint }[] = [];
  const withCheckpoint = (list: Checkpoint[], c: Checkpoint) => [...list.filter((x) => x.id !== c.id), c].sort((a, b) => a.step - b.step);
  const actions: RunSlice['runActions'] = {
    async open(id) {
      set({ run: { ...get().run, id, detail: null, series: {}, log: [] }, nav: { view: 'run' } });
      await actions.reload();
    },
    async fetch(id) {
      try {
        return await api.getRun(id);
      } catch (err) {
        report(`Loading run ${id}`, err);
        return null;
      }
    },
    async fetchSeries(id, keys) {
      try {
        return await api.metricSeries(id, keys, MAX_POINTS);
      } catch (err) {
        report(`Loading the metrics of run ${id}`, err);
        return null;
      }
    },
    async reload() {
      const id = get().run.id;
      if (!id) return;
      try {
        const [detail, series, log] = await Promise.all([api.getRun(id), api.metricSeries(id, undefined, MAX_POINTS), api.runLog(id)]);
        if (get().run.id !== id) return;
        // Live events that arrived while loading are newer than the snapshot: keep them.
        const s = get().run;
        const lastSeq = log.length ? log[log.length - 1].seq : 0;
        const pending = pendingRun?.id === id && (pendingRun.step ?? -1) >= (detail.step ?? -1) ? pendingRun : null;
        pendingRun = null;
        const checkpoints = pendingCheckpoints.filter((p) => p.runId === id).reduce((list, p) => withCheckpoint(list, p.checkpoint), detail.checkpoints);
        pendingCheckpoints = [];
        patch({
          detail: { ...detail, ...(pending ?? {}), checkpoints },
          series: mergeSeries(series, s.series),
          log: [...log, ...s.log.filter((l) => l.seq > lastSeq)],
        });
      } catch (err) {
        report(`Loading run ${id}`, err);
      }
    },
    setSmoothing: (smoothing) => patch({ smoothing }),
    async saveNotes(notes) {
      const run = get().run.detail;
      if (!run) return false;
      try {
        await api.setNotes(run.id, notes);
        const now = get().run.detail;
        if (now?.id === run.id) patch({ detail: { ...now, notes } });
        return true;
      } catch (err) {
        report(`Saving the notes of ${run.id}`, err);
        return false;
      }
    },
    async saveTags(tags) {
      const run = get().run.detail;
      if (!run) return false;
      try {
        await api.setTags(run.id, tags);
        return true; // the engine announces the run with its new tags
      } catch (err) {
        report(`Saving the tags of ${run.id}`, err);
        return false;
      }
    },
    async export() {
      const run = get().run.detail;
      if (!run) return null;
      try {
        return await api.exportRun(run.id);
      } catch (err) {
        report(`Exporting ${run.id}`, err);
        return null;
      }
    },
    fetchTrajectorySummaries: (runId, step) => api.listTrajectories({ runId, step }),
    async fetchLearning(runId) {
      try {
        return await api.runLearning(runId);
      } catch (err) {
        report(`Loading the learning diagnostics of ${runId}`, err);
        return null;
      }
    },
    applyEvent(e) {
      const s = get().run;
      if (e.type === 'metrics' && e.runId === s.id) {
        const series = { ...s.series };
        for (const [k, v] of Object.entries(e.values)) series[k] = appendPoint(series[k], e.step, v);
        patch({ series });
      } else if (e.type === 'log' && e.runId === s.id) {
        patch({ log: [...s.log, e.line].slice(-5000) });
      } else if (e.type === 'run' && e.run.id === s.id) {
        if (s.detail) patch({ detail: { ...s.detail, ...e.run } });
        else pendingRun = e.run; // still loading: merged when the snapshot arrives
      } else if (e.type === 'checkpoint' && e.runId === s.id) {
        if (s.detail) patch({ detail: { ...s.detail, checkpoints: withCheckpoint(s.detail.checkpoints, e.checkpoint) } });
        else pendingCheckpoints.push({ runId: e.runId, checkpoint: e.checkpoint }); // still loading
      }
    },
  };
  return {
    run: { id: null, detail: null, series: {}, log: [], smoothing: 0.6 },
    runActions: actions,
  };
}
