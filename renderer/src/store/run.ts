import type { ArborApi, EngineEvent, ExportedFile, LogLine, RunDetail, RunSummary, Series, TrajSummary, Learning } from '../api/types';
import type { Get, Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends RunSlice {}
}

export const MAX_POINTS = 1500;

export interface RunSlice {
  runId: string | null;
  run: RunDetail | null;
  series: Record<string, Series>;
  log: LogLine[];
  smoothing: number;
  compare: { runs: RunDetail[]; series: Record<string, Record<string, Series>> };
  openRun(id: string): Promise<void>;
  /** A run's detail without opening it (e.g. to prefill a fork); null after reporting an error. */
  fetchRun(id: string): Promise<RunDetail | null>;
  /** Some series of a run without opening it (a parent's curve in the run summary); null after reporting an error. */
  fetchSeries(id: string, keys: string[]): Promise<Record<string, Series> | null>;
  reloadRun(): Promise<void>;
  setSmoothing(v: number): void;
  loadCompare(ids: string[]): Promise<void>;
  /** Save the open run's notes / tags in the workspace (false after reporting an error). */
  saveNotes(notes: string): Promise<boolean>;
  saveTags(tags: string[]): Promise<boolean>;
  /** Export the open run (metrics CSV + trajectories JSONL into the workspace's exports/); what was written, or null after reporting an error. */
  exportRun(): Promise<ExportedFile[] | null>;
  applyRunDetailEvent(e: EngineEvent): void;
  /** Every stored trajectory summary of one step (the Run view's "why didn't it learn" links). */
  fetchTrajectorySummaries(runId: string, step: number): Promise<TrajSummary[]>;
  /** The run's "why didn't it learn" flags and warnings (null after reporting an error). */
  fetchLearning(runId: string): Promise<Learning | null>;
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
  let pendingRun: RunSummary | null = null;
  return {
    runId: null,
    run: null,
    series: {},
    log: [],
    smoothing: 0.6,
    compare: { runs: [], series: {} },
    async openRun(id) {
      set({ runId: id, run: null, series: {}, log: [], view: 'run' });
      await get().reloadRun();
    },
    async fetchRun(id) {
      try {
        return await api.getRun(id);
      } catch (err) {
        get().reportError(`Loading run ${id}`, err);
        return null;
      }
    },
    async fetchSeries(id, keys) {
      try {
        return await api.metricSeries(id, keys, MAX_POINTS);
      } catch (err) {
        get().reportError(`Loading the metrics of run ${id}`, err);
        return null;
      }
    },
    async reloadRun() {
      const id = get().runId;
      if (!id) return;
      try {
        const [run, series, log] = await Promise.all([api.getRun(id), api.metricSeries(id, undefined, MAX_POINTS), api.runLog(id)]);
        if (get().runId !== id) return;
        // Live events that arrived while loading are newer than the snapshot: keep them.
        const s = get();
        const lastSeq = log.length ? log[log.length - 1].seq : 0;
        const pending = pendingRun?.id === id && (pendingRun.step ?? -1) >= (run.step ?? -1) ? pendingRun : null;
        pendingRun = null;
        set({ run: pending ? { ...run, ...pending } : run, series: mergeSeries(series, s.series), log: [...log, ...s.log.filter((l) => l.seq > lastSeq)] });
      } catch (err) {
        get().reportError(`Loading run ${id}`, err);
      }
    },
    setSmoothing: (smoothing) => set({ smoothing }),
    async loadCompare(ids) {
      try {
        const runs = await Promise.all(ids.map((id) => api.getRun(id)));
        const series = Object.fromEntries(await Promise.all(ids.map(async (id) => [id, await api.metricSeries(id, undefined, MAX_POINTS)] as const)));
        set({ compare: { runs, series } });
      } catch (err) {
        get().reportError('Loading runs to compare', err);
      }
    },
    async saveNotes(notes) {
      const run = get().run;
      if (!run) return false;
      try {
        await api.setNotes(run.id, notes);
        const now = get().run;
        if (now?.id === run.id) set({ run: { ...now, notes } });
        return true;
      } catch (err) {
        get().reportError(`Saving the notes of ${run.id}`, err);
        return false;
      }
    },
    async saveTags(tags) {
      const run = get().run;
      if (!run) return false;
      try {
        await api.setTags(run.id, tags);
        return true; // the engine announces the run with its new tags
      } catch (err) {
        get().reportError(`Saving the tags of ${run.id}`, err);
        return false;
      }
    },
    async exportRun() {
      const run = get().run;
      if (!run) return null;
      try {
        return await api.exportRun(run.id);
      } catch (err) {
        get().reportError(`Exporting ${run.id}`, err);
        return null;
      }
    },
    fetchTrajectorySummaries: (runId, step) => api.listTrajectories({ runId, step }),
    async fetchLearning(runId) {
      try {
        return await api.runLearning(runId);
      } catch (err) {
        get().reportError(`Loading the learning diagnostics of ${runId}`, err);
        return null;
      }
    },
    applyRunDetailEvent(e) {
      const s = get();
      if (e.type === 'metrics') {
        if (e.runId === s.runId) {
          const series = { ...s.series };
          for (const [k, v] of Object.entries(e.values)) series[k] = appendPoint(series[k], e.step, v);
          set({ series });
        }
        if (s.compare.series[e.runId]) {
          const runSeries = { ...s.compare.series[e.runId] };
          for (const [k, v] of Object.entries(e.values)) runSeries[k] = appendPoint(runSeries[k], e.step, v);
          set({ compare: { ...s.compare, series: { ...s.compare.series, [e.runId]: runSeries } } });
        }
      } else if (e.type === 'log' && e.runId === s.runId) {
        set({ log: [...s.log, e.line].slice(-5000) });
      } else if (e.type === 'run' && e.run.id === s.runId) {
        if (s.run) set({ run: { ...s.run, ...e.run } });
        else pendingRun = e.run; // still loading: merged when the snapshot arrives
      } else if (e.type === 'checkpoint' && e.runId === s.runId && s.run) {
        set({ run: { ...s.run, checkpoints: [...s.run.checkpoints.filter((c) => c.id !== e.checkpoint.id), e.checkpoint] } });
      }
    },
  };
}
