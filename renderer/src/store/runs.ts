import type { ArborApi, EngineEvent, RunSummary, Template } from '../api/types';
import { patchSlice, type Get, type Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends RunListSlice {}
}

export type SortKey = 'createdAt' | 'name' | 'status' | `metric:${string}`;

export interface RunListState {
  runs: RunSummary[];
  templates: Template[];
  filter: string;
  sort: { key: SortKey; desc: boolean };
  /** run ids ticked for Compare */
  compareIds: string[];
}

/** The workspace's runs (the Runs view), the templates they start from, and starting / stopping / forking them. */
export interface RunListSlice {
  runList: RunListState;
  runListActions: {
    refresh(): Promise<void>;
    loadTemplates(): Promise<void>;
    setFilter(f: string): void;
    setSort(key: SortKey): void;
    toggleCompare(id: string): void;
    start(template: string, config: Record<string, unknown>, name?: string, tags?: string[], project?: string): Promise<string | null>;
    stop(id: string): Promise<void>;
    pause(id: string): Promise<void>;
    resume(id: string): Promise<void>;
    fork(id: string, opts: { checkpoint?: string; config?: Record<string, unknown>; name?: string }): Promise<string | null>;
    applyEvent(e: EngineEvent): void;
  };
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

export function createRunListSlice(api: ArborApi, set: Set, get: Get): RunListSlice {
  const patch = (p: Partial<RunListState>) => patchSlice(set, 'runList', p);
  const report = (context: string, err: unknown) => get().connectionActions.reportError(context, err);
  const actions: RunListSlice['runListActions'] = {
    async refresh() {
      try {
        patch({ runs: await api.listRuns() });
      } catch (err) {
        report('Loading runs', err);
      }
    },
    async loadTemplates() {
      try {
        patch({ templates: await api.listTemplates() });
      } catch (err) {
        report('Loading run templates', err);
      }
    },
    setFilter: (filter) => patch({ filter }),
    setSort(key) {
      const cur = get().runList.sort;
      patch({ sort: cur.key === key ? { key, desc: !cur.desc } : { key, desc: key === 'createdAt' || key.startsWith('metric:') } });
    },
    toggleCompare(id) {
      const ids = get().runList.compareIds;
      patch({ compareIds: ids.includes(id) ? ids.filter((x) => x !== id) : [...ids, id] });
    },
    async start(template, config, name, tags, project) {
      try {
        const { id } = await api.startRun({ template, config, name, tags, project });
        await actions.refresh();
        return id;
      } catch (err) {
        report(`Starting a run from template "${template}"`, err);
        return null;
      }
    },
    async stop(id) {
      try {
        await api.stopRun(id);
        await actions.refresh();
      } catch (err) {
        report(`Stopping run ${id}`, err);
      }
    },
    async pause(id) {
      try {
        await api.pauseRun(id);
        await actions.refresh();
      } catch (err) {
        report(`Pausing run ${id}`, err);
      }
    },
    async resume(id) {
      try {
        await api.resumeRun(id);
        await actions.refresh();
      } catch (err) {
        report(`Resuming run ${id}`, err);
      }
    },
    async fork(id, opts) {
      try {
        const r = await api.forkRun(id, opts);
        await actions.refresh();
        return r.id;
      } catch (err) {
        report(`Forking run ${id}`, err);
        return null;
      }
    },
    applyEvent(e) {
      const runs = get().runList.runs;
      if (e.type === 'run') {
        const i = runs.findIndex((r) => r.id === e.run.id);
        patch({ runs: i < 0 ? [e.run, ...runs] : runs.map((r, j) => (j === i ? { ...r, ...e.run } : r)) });
      } else if (e.type === 'metrics') {
        patch({ runs: runs.map((r) => (r.id === e.runId ? { ...r, step: e.step, metrics: { ...r.metrics, ...e.values } } : r)) });
      }
    },
  };
  return {
    runList: { runs: [], templates: [], filter: '', sort: { key: 'createdAt', desc: true }, compareIds: [] },
    runListActions: actions,
  };
}
