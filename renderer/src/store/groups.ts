// Run groups (seed sweeps, grids) for the Compare view: the workspace's groups, and the ones
// added to the comparison with their report (per-metric statistics, runs) and per-step bands.
import type { ArborApi, RunGroupComparison, RunGroupReport, RunGroupSeries, RunGroupSummary } from '../api/types';
import { patchSlice, type Get, type Set } from './state';
import { MAX_POINTS } from './run';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends RunGroupsSlice {}
}

export interface RunGroupsState {
  /** The workspace's groups. */
  items: RunGroupSummary[];
  /** The groups added to the comparison. */
  reports: RunGroupReport[];
  series: Record<string, RunGroupSeries>;
  /** With exactly two groups compared, their difference of means (second − first). */
  diff: RunGroupComparison | null;
}

export interface RunGroupsSlice {
  groups: RunGroupsState;
  groupActions: {
    refresh(): Promise<void>;
    addToCompare(id: string): Promise<void>;
    removeFromCompare(id: string): Promise<void>;
  };
}

export function createRunGroupsSlice(api: ArborApi, set: Set, get: Get): RunGroupsSlice {
  const patch = (p: Partial<RunGroupsState>) => patchSlice(set, 'groups', p);
  const report = (context: string, err: unknown) => get().connectionActions.reportError(context, err);
  const diffOf = async (reports: RunGroupReport[]) => (reports.length === 2 ? api.compareRunGroups(reports[0]!.group.id, reports[1]!.group.id) : null);
  return {
    groups: { items: [], reports: [], series: {}, diff: null },
    groupActions: {
      async refresh() {
        try {
          patch({ items: await api.listRunGroups() });
        } catch (err) {
          report('Loading run groups', err);
        }
      },
      async addToCompare(id) {
        if (get().groups.reports.some((r) => r.group.id === id)) return;
        try {
          const [added, series] = await Promise.all([api.runGroupReport(id), api.runGroupSeries(id, MAX_POINTS)]);
          const reports = [...get().groups.reports, added];
          patch({ reports, series: { ...get().groups.series, [id]: series }, diff: await diffOf(reports) });
        } catch (err) {
          report(`Loading group ${id}`, err);
        }
      },
      async removeFromCompare(id) {
        const cur = get().groups;
        const reports = cur.reports.filter((r) => r.group.id !== id);
        const series = { ...cur.series };
        delete series[id];
        try {
          patch({ reports, series, diff: await diffOf(reports) });
        } catch (err) {
          patch({ reports, series, diff: null });
          report('Comparing groups', err);
        }
      },
    },
  };
}
