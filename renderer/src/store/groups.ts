// Run groups (seed sweeps, grids) for the Compare view: the workspace's groups, and the ones
// added to the comparison with their report (per-metric statistics, runs) and per-step bands.
import type { ArborApi, GroupComparison, GroupReport, GroupSeries, GroupSummary } from '../api/types';
import type { Get, Set } from './state';
import { MAX_POINTS } from './run';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends GroupsSlice {}
}

export interface GroupsSlice {
  groups: GroupSummary[];
  compareGroups: { reports: GroupReport[]; series: Record<string, GroupSeries>; diff: GroupComparison | null };
  refreshGroups(): Promise<void>;
  addCompareGroup(id: string): Promise<void>;
  removeCompareGroup(id: string): Promise<void>;
}

export function createGroupsSlice(api: ArborApi, set: Set, get: Get): GroupsSlice {
  /** With exactly two groups, their difference of means (second − first). */
  const diffOf = async (reports: GroupReport[]) => (reports.length === 2 ? api.compareGroups(reports[0]!.group.id, reports[1]!.group.id) : null);
  return {
    groups: [],
    compareGroups: { reports: [], series: {}, diff: null },
    async refreshGroups() {
      try {
        set({ groups: await api.listGroups() });
      } catch (err) {
        get().reportError('Loading run groups', err);
      }
    },
    async addCompareGroup(id) {
      const cur = get().compareGroups;
      if (cur.reports.some((r) => r.group.id === id)) return;
      try {
        const [report, series] = await Promise.all([api.groupReport(id), api.groupSeries(id, MAX_POINTS)]);
        const reports = [...get().compareGroups.reports, report];
        set({ compareGroups: { reports, series: { ...get().compareGroups.series, [id]: series }, diff: await diffOf(reports) } });
      } catch (err) {
        get().reportError(`Loading group ${id}`, err);
      }
    },
    async removeCompareGroup(id) {
      const cur = get().compareGroups;
      const reports = cur.reports.filter((r) => r.group.id !== id);
      const series = { ...cur.series };
      delete series[id];
      try {
        set({ compareGroups: { reports, series, diff: await diffOf(reports) } });
      } catch (err) {
        set({ compareGroups: { reports, series, diff: null } });
        get().reportError('Comparing groups', err);
      }
    },
  };
}
