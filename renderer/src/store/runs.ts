import type { ArborApi, EngineEvent, RunSummary, Template } from '../api/types';
import type { Get, Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends RunsSlice {}
}

export type SortKey = 'createdAt' | 'name' | 'status' | `metric:${string}`;

export interface RunsSlice {
  runs: RunSummary[];
  templates: Template[];
  runFilter: string;
  runSort: { key: SortKey; desc: boolean };
  /** run ids ticked for Compare */
  compareIds: string[];
  refreshRuns(): Promise<void>;
  loadTemplates(): Promise<void>;
  setRunFilter(f: string): void;
  setRunSort(key: SortKey): void;
  toggleCompare(id: string): void;
  startRun(template: string, config: Record<string, unknown>, name?: string, tags?: string[], project?: string): Promise<string | null>;
  stopRun(id: string): Promise<void>;
  pauseRun(id: string): Promise<void>;
  resumeRun(id: string): Promise<void>;
  forkRun(id: string, opts: { checkpoint?: string; config?: Record<string, unknown>; name?: string }): Promise<string | null>;
  applyRunEvent(e: EngineEvent): void;
}

/** Filter: free words match name, id, status, template or tags; `key>value` / `key<value` filter metrics. */
export function filterRuns(runs: RunSummary[], filter: string): RunSummary[] {
  const terms = filter.trim().split(/\s+/).filter(Boolean);
  return runs.filter((r) =>
    terms.every((t) => {
      const m = /^([\w./-]+)(>=|<=|>|<|=)(-?[\d.e+-]+)$/.exec(t);
      if (m) {
        const v = r.metrics[m[1]];
        if (v === undefined) return false;
        const x = Number(m[3]);
        return m[2] === '>' ? v > x : m[2] === '<' ? v < x : m[2] === '>=' ? v >= x : m[2] === '<=' ? v <= x : v === x;
      }
      const hay = [r.name, r.id, r.status, r.template ?? '', r.project ?? '', ...r.tags].join(' ').toLowerCase();
      return hay.includes(t.toLowerCase());
    }),
  );
}

export function sortRuns(runs: RunSummary[], sort: { key: SortKey; desc: boolean }): RunSummary[] {
  const val = (r: RunSummary): number | string => {
    if (sort.key.startsWith('metric:')) return r.metrics[sort.key.slice(7)] ?? Number.NEGATIVE_INFINITY;
    return (r as unknown as Record<string, number | string>)[sort.key] ?? '';
  };
  const out = [...runs].sort((a, b) => {
    const x = val(a);
    const y = val(b);
    return x < y ? -1 : x > y ? 1 : 0;
  });
  return sort.desc ? out.reverse() : out;
}

export function createRunsSlice(api: ArborApi, set: Set, get: Get): RunsSlice {
  return {
    runs: [],
    templates: [],
    runFilter: '',
    runSort: { key: 'createdAt', desc: true },
    compareIds: [],
    async refreshRuns() {
      try {
        set({ runs: await api.listRuns() });
      } catch (err) {
        get().reportError('Loading runs', err);
      }
    },
    async loadTemplates() {
      try {
        set({ templates: await api.listTemplates() });
      } catch (err) {
        get().reportError('Loading run templates', err);
      }
    },
    setRunFilter: (runFilter) => set({ runFilter }),
    setRunSort(key) {
      const cur = get().runSort;
      set({ runSort: cur.key === key ? { key, desc: !cur.desc } : { key, desc: key === 'createdAt' || key.startsWith('metric:') } });
    },
    toggleCompare(id) {
      const ids = get().compareIds;
      set({ compareIds: ids.includes(id) ? ids.filter((x) => x !== id) : [...ids, id] });
    },
    async startRun(template, config, name, tags, project) {
      try {
        const { id } = await api.startRun({ template, config, name, tags, project });
        await get().refreshRuns();
        return id;
      } catch (err) {
        get().reportError(`Starting a run from template "${template}"`, err);
        return null;
      }
    },
    async stopRun(id) {
      try {
        await api.stopRun(id);
        await get().refreshRuns();
      } catch (err) {
        get().reportError(`Stopping run ${id}`, err);
      }
    },
    async pauseRun(id) {
      try {
        await api.pauseRun(id);
        await get().refreshRuns();
      } catch (err) {
        get().reportError(`Pausing run ${id}`, err);
      }
    },
    async resumeRun(id) {
      try {
        await api.resumeRun(id);
        await get().refreshRuns();
      } catch (err) {
        get().reportError(`Resuming run ${id}`, err);
      }
    },
    async forkRun(id, opts) {
      try {
        const r = await api.forkRun(id, opts);
        await get().refreshRuns();
        return r.id;
      } catch (err) {
        get().reportError(`Forking run ${id}`, err);
        return null;
      }
    },
    applyRunEvent(e) {
      if (e.type === 'run') {
        const runs = get().runs;
        const i = runs.findIndex((r) => r.id === e.run.id);
        set({ runs: i < 0 ? [e.run, ...runs] : runs.map((r, j) => (j === i ? { ...r, ...e.run } : r)) });
      } else if (e.type === 'metrics') {
        set({
          runs: get().runs.map((r) => (r.id === e.runId ? { ...r, step: e.step, metrics: { ...r.metrics, ...e.values } } : r)),
        });
      }
    },
  };
}
