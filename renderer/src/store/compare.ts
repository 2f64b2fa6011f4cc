// The runs of the Compare view: their details and metric series, followed live.
import type { ArborApi, EngineEvent, RunDetail, Series } from '../api/types';
import { patchSlice, type Get, type Set } from './state';
import { appendPoint, MAX_POINTS } from './run';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends CompareSlice {}
}

export interface CompareState {
  runs: RunDetail[];
  /** Each compared run's series, by run id. */
  series: Record<string, Record<string, Series>>;
}

export interface CompareSlice {
  compare: CompareState;
  compareActions: {
    load(ids: string[]): Promise<void>;
    applyEvent(e: EngineEvent): void;
  };
}

export function createCompareSlice(api: ArborApi, set: Set, get: Get): CompareSlice {
  const patch = (p: Partial<CompareState>) => patchSlice(set, 'compare', p);
  return {
    compare: { runs: [], series: {} },
    compareActions: {
      async load(ids) {
        try {
          const runs = await Promise.all(ids.map((id) => api.getRun(id)));
          const series = Object.fromEntries(await Promise.all(ids.map(async (id) => [id, await api.metricSeries(id, undefined, MAX_POINTS)] as const)));
          patch({ runs, series });
        } catch (err) {
          get().connectionActions.reportError('Loading runs to compare', err);
        }
      },
      applyEvent(e) {
        const s = get().compare;
        if (e.type !== 'metrics' || !s.series[e.runId]) return;
        const runSeries = { ...s.series[e.runId] };
        for (const [k, v] of Object.entries(e.values)) runSeries[k] = appendPoint(runSeries[k], e.step, v);
        patch({ series: { ...s.series, [e.runId]: runSeries } });
      },
    },
  };
}
