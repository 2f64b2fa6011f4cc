/**
 * Run groups (a seed sweep, an ablation: engine/store/groups.ts): groups.list, groups.report (the
 * statistics of each cell, engine/stats/group-report.ts), groups.compare (two groups' reports) and
 * groups.series (each cell's curves as mean and band over its runs).
 */
import { getRunGroup, runGroupMembers, listRunGroups } from '../store/groups';
import { buildRunGroupReport, compareRunGroups } from '../stats/group-report';
import { bandSeries } from '../stats/stats';
import type { EngineHost } from './host';

export function registerRunGroups(engine: EngineHost): void {
  const S = () => engine.store!;
  engine.on('groups.list', () => listRunGroups(S()).map(({ plan, runs, ...g }) => ({ ...g, planned: plan.length, runs })));
  const report = (id: string, metrics?: string[]) => {
    engine.runs!.writer.flush();
    const g = getRunGroup(S(), id);
    return buildRunGroupReport(g, runGroupMembers(S(), g.id), { metrics });
  };
  engine.on('groups.report', (p) => report(p.id, p.metrics));
  engine.on('groups.compare', (p) => compareRunGroups(report(p.a, p.metrics), report(p.b, p.metrics)));
  engine.on('groups.series', (p) => {
    engine.runs!.writer.flush();
    const g = getRunGroup(S(), p.id);
    const runs = runGroupMembers(S(), g.id);
    const out: Record<string, Record<string, ReturnType<typeof bandSeries>>> = {};
    for (const cell of [...new Set(runs.map((r) => r.cell))]) {
      const mine = runs.filter((r) => r.cell === cell);
      const keys = p.keys ?? [...new Set(mine.flatMap((r) => S().metricKeys(r.id)))];
      out[cell] = Object.fromEntries(keys.map((k) => [k, bandSeries(mine.map((r) => S().metricSeries(r.id, k, p.maxPoints ?? 1500)))]));
    }
    return out;
  });
}
