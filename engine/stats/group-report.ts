/**
 * The report of a run group (`arbor report`, `groups.report`): per configuration (cell) and per
 * metric, the mean, sd, min/max and bootstrap 95% interval of the mean over the cell's completed
 * runs; which planned runs are missing or did not complete (a partial group says so); and two
 * groups compared cell by cell with the difference of means and its interval.
 *
 * A run's value of a metric is its last logged value. Reported by default: held-out metrics after
 * RL (`eval/*`), after SFT alone (`sft/eval/*`) and their difference per run (`lift/*` = eval − sft/eval).
 */
import type { RunGroupRow, RunGroupMemberRow } from '../store/groups';
import { diffOfMeans, summarize, type Summary } from './stats';

export interface CellReport {
  cell: string;
  overrides: Record<string, string>;
  runs: { id: string; seed: number | null; status: string; metrics: Record<string, number> }[];
  /** Planned seeds with no run (the sweep was stopped before them, or is still working). */
  missingSeeds: number[];
  /** Per metric, over the completed runs. */
  metrics: Record<string, Summary & { values: number[] }>;
}

export interface RunGroupReport {
  group: { id: string; name: string; kind: string; status: string; configFile: string | null; planned: number };
  cells: CellReport[];
  partial: boolean;
  /** Why the group is partial, one line per reason (empty when every planned run completed). */
  notes: string[];
}

const DEFAULT_METRIC = /^(eval\/|sft\/eval\/|lift\/)/;

/** The run's metrics as the report sees them: its latest values plus `lift/<k>` = eval/<k> − sft/eval/<k>. */
export function reportMetrics(latest: Record<string, number>): Record<string, number> {
  const out = { ...latest };
  for (const [k, v] of Object.entries(latest)) {
    if (!k.startsWith('eval/')) continue;
    const base = latest[`sft/${k}`];
    if (base !== undefined && Number.isFinite(base) && Number.isFinite(v)) out[`lift/${k.slice(5)}`] = v - base;
  }
  return out;
}

export function buildRunGroupReport(group: RunGroupRow, runs: RunGroupMemberRow[], opts: { metrics?: string[] } = {}): RunGroupReport {
  const wanted = (k: string) =>
    opts.metrics?.length ? opts.metrics.some((m) => k === m || k.startsWith(m.endsWith('/') ? m : `${m}/`)) : DEFAULT_METRIC.test(k);
  const cellNames = [...new Set([...group.plan.map((p) => p.cell), ...runs.map((r) => r.cell)])];
  const notes: string[] = [];
  const cells: CellReport[] = cellNames.map((cell) => {
    const planned = group.plan.filter((p) => p.cell === cell);
    const mine = runs.filter((r) => r.cell === cell);
    const seeds = new Set(mine.map((r) => r.seed));
    const missingSeeds = planned.filter((p) => !seeds.has(p.seed)).map((p) => p.seed);
    const rows = mine.map((r) => ({ id: r.id, seed: r.seed, status: r.status, metrics: reportMetrics(r.metrics) }));
    const done = rows.filter((r) => r.status === 'completed');
    const keys = [...new Set(done.flatMap((r) => Object.keys(r.metrics)))].filter(wanted).sort();
    const metrics: CellReport['metrics'] = {};
    for (const k of keys) {
      const values = done.map((r) => r.metrics[k]).filter((v): v is number => v !== undefined && Number.isFinite(v));
      metrics[k] = { ...summarize(values), values };
    }
    for (const r of rows.filter((x) => x.status !== 'completed'))
      notes.push(`${cell === 'base' ? '' : `${cell}: `}run ${r.id} (seed ${r.seed ?? '?'}) is ${r.status}: left out of the statistics`);
    if (missingSeeds.length) notes.push(`${cell === 'base' ? '' : `${cell}: `}no run for seed${missingSeeds.length > 1 ? 's' : ''} ${missingSeeds.join(', ')}`);
    return { cell, overrides: planned[0]?.overrides ?? {}, runs: rows, missingSeeds, metrics };
  });
  return {
    group: { id: group.id, name: group.name, kind: group.kind, status: group.status, configFile: group.configFile, planned: group.plan.length },
    cells,
    partial: notes.length > 0,
    notes,
  };
}

export interface RunGroupComparison {
  a: string;
  b: string;
  /** Cell pairs compared: the same label in both groups, or the only cell of each. */
  cells: {
    cellA: string;
    cellB: string;
    metrics: Record<string, { meanA: number; meanB: number; diff: number; lo: number; hi: number; na: number; nb: number }>;
  }[];
}

/** B − A per metric, for the cells the two groups share (or their single cells). */
export function compareRunGroups(a: RunGroupReport, b: RunGroupReport): RunGroupComparison {
  const pairs: [CellReport, CellReport][] = [];
  if (a.cells.length === 1 && b.cells.length === 1) pairs.push([a.cells[0]!, b.cells[0]!]);
  else for (const ca of a.cells) for (const cb of b.cells) if (ca.cell === cb.cell) pairs.push([ca, cb]);
  return {
    a: a.group.id,
    b: b.group.id,
    cells: pairs.map(([ca, cb]) => {
      const metrics: RunGroupComparison['cells'][number]['metrics'] = {};
      for (const k of Object.keys(ca.metrics).filter((x) => cb.metrics[x])) {
        const d = diffOfMeans(ca.metrics[k]!.values, cb.metrics[k]!.values);
        metrics[k] = { meanA: ca.metrics[k]!.mean, meanB: cb.metrics[k]!.mean, diff: d.diff, lo: d.lo, hi: d.hi, na: d.na, nb: d.nb };
      }
      return { cellA: ca.cell, cellB: cb.cell, metrics };
    }),
  };
}
