// Seed-sweep statistics (engine/stats/stats.ts) against hand-computed values, and a group's
// report over the store (engine/store/groups.ts, engine/stats/group-report.ts): per cell,
// partial groups, two groups compared.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bandSeries, diffOfMeans, quantile, sd, summarize, tInterval } from '../../../engine/stats/stats';
import { buildRunGroupReport, compareRunGroups, reportMetrics } from '../../../engine/stats/group-report';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import { createRunGroup, getRunGroup, runGroupMembers, listRunGroups } from '../../../engine/store/groups';
import { gridCells, parseSeeds, setPath } from '../../../engine/cli/commands/sweep';

describe('stats', () => {
  it('mean, sample sd, min/max as computed by hand', () => {
    const s = summarize([0.2, 0.4, 0.6, 0.8]);
    expect(s.mean).toBeCloseTo(0.5, 12);
    // Σ(x−0.5)² = 0.09+0.01+0.01+0.09 = 0.2; /3 → sd = √0.0667 = 0.258199
    expect(s.sd).toBeCloseTo(0.2581989, 6);
    expect([s.min, s.max, s.n]).toEqual([0.2, 0.8, 4]);
    expect(sd([5])).toBe(0);
  });
  it('the bootstrap interval of the mean lies inside [min, max], around the mean, and is seeded', () => {
    const xs = [62.5, 52, 2.5, 2];
    const s = summarize(xs);
    expect(s.lo).toBeGreaterThanOrEqual(2);
    expect(s.hi).toBeLessThanOrEqual(62.5);
    expect(s.lo).toBeLessThan(s.mean);
    expect(s.hi).toBeGreaterThan(s.mean);
    expect(summarize(xs)).toEqual(s);
    // A constant sample has a zero-width interval; one value is its own interval.
    expect(summarize([3, 3, 3])).toMatchObject({ lo: 3, hi: 3, sd: 0 });
    expect(summarize([7])).toMatchObject({ mean: 7, lo: 7, hi: 7 });
    // NaN values are left out; none left gives NaN.
    expect(summarize([1, NaN, 3]).n).toBe(2);
    expect(summarize([]).mean).toBeNaN();
  });
  it('quantiles interpolate between order statistics (numpy default)', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([1, 2, 3, 4], 0.025)).toBeCloseTo(1.075, 12);
  });
  it('t-interval by hand: [1,2,3,4] → 2.5 ± 3.182·1.29099/2', () => {
    const t = tInterval([1, 2, 3, 4]);
    expect(t.mean).toBe(2.5);
    expect(t.hi - t.mean).toBeCloseTo((3.182 * 1.2909944) / 2, 4);
  });
  it('difference of means with its interval: a clear shift excludes 0, equal groups include it', () => {
    const d = diffOfMeans([1, 2, 3, 2], [11, 12, 13, 12]);
    expect(d.diff).toBe(10);
    expect(d.lo).toBeGreaterThan(8);
    expect(d.hi).toBeLessThan(12);
    const same = diffOfMeans([1, 2, 3], [1, 2, 3]);
    expect(same.lo).toBeLessThan(0);
    expect(same.hi).toBeGreaterThan(0);
  });
  it('bands: per step over the runs that logged it', () => {
    const b = bandSeries([
      { step: [1, 2, 3], value: [1, 2, 3] },
      { step: [1, 2], value: [3, null] },
    ]);
    expect(b.step).toEqual([1, 2, 3]);
    expect(b.mean).toEqual([2, 2, 3]);
    expect(b.n).toEqual([2, 1, 1]);
    expect(b.lo[0]).toBeLessThan(2);
    expect(b.lo[1]).toBe(2);
  });
});

describe('sweep flags', () => {
  it('seeds: lists and ranges; bad ones named', () => {
    expect(parseSeeds('0,1,2,3', '--seeds')).toEqual([0, 1, 2, 3]);
    expect(parseSeeds('0-3,7', '--seeds')).toEqual([0, 1, 2, 3, 7]);
    expect(() => parseSeeds('a', '--seeds')).toThrow(/--seeds: "a" is not a seed/);
  });
  it('grid: the cartesian product with labels; list values stay whole', () => {
    const cells = gridCells(['optim.lr=0.001,0.0005', 'task.hops=[1,2],[2]']);
    expect(cells.map((c) => c.cell)).toEqual([
      'optim.lr=0.001 task.hops=[1,2]',
      'optim.lr=0.001 task.hops=[2]',
      'optim.lr=0.0005 task.hops=[1,2]',
      'optim.lr=0.0005 task.hops=[2]',
    ]);
    const raw: Record<string, unknown> = { optim: { lr: 1 } };
    setPath(raw, 'optim.lr', '0.001');
    setPath(raw, 'task.hops', '[1,2]');
    expect(raw).toEqual({ optim: { lr: 0.001 }, task: { hops: [1, 2] } });
    expect(gridCells([])).toEqual([{ cell: 'base', overrides: {} }]);
  });
});

describe('group report over the store', () => {
  const open = () => new Store(openDatabase(join(mkdtempSync(join(tmpdir(), 'arbor-groups-')), 'arbor.db')));
  const addRun = (s: Store, group: string, cell: string, seed: number, status: string, m: Record<string, number>) => {
    const id = s.createRun({ name: `r${seed}`, seed, status });
    s.db.prepare('UPDATE runs SET group_id = ?, group_cell = ? WHERE id = ?').run(group, cell, id);
    s.writeMetrics(id, 1, m);
    return id;
  };

  it('mean/sd/min/interval of eval, sft/eval and the lift per run; a failed run and a missing seed make the group partial', () => {
    const s = open();
    const plan = [0, 1, 2, 3].map((seed) => ({ cell: 'base', overrides: {}, seed }));
    const g = createRunGroup(s, { name: 'tools', kind: 'seeds', plan });
    addRun(s, g, 'base', 0, 'completed', { 'eval/exact_match': 0.77, 'sft/eval/exact_match': 0.625, 'reward/mean': 1 });
    addRun(s, g, 'base', 1, 'completed', { 'eval/exact_match': 0.56, 'sft/eval/exact_match': 0.52 });
    addRun(s, g, 'base', 2, 'failed', { 'eval/exact_match': 0.01 });
    const r = buildRunGroupReport(getRunGroup(s, g), runGroupMembers(s, g));
    const cell = r.cells[0]!;
    expect(Object.keys(cell.metrics)).toEqual(['eval/exact_match', 'lift/exact_match', 'sft/eval/exact_match']);
    expect(cell.metrics['eval/exact_match']!.n).toBe(2);
    expect(cell.metrics['eval/exact_match']!.mean).toBeCloseTo(0.665, 12);
    expect(cell.metrics['lift/exact_match']!.values.map((v) => +v.toFixed(4))).toEqual([0.145, 0.04]);
    expect(cell.metrics['lift/exact_match']!.min).toBeCloseTo(0.04, 12);
    expect(r.partial).toBe(true);
    expect(r.notes.join('\n')).toMatch(/seed 2\) is failed/);
    expect(r.notes.join('\n')).toMatch(/no run for seed 3/);
    expect(cell.missingSeeds).toEqual([3]);
    // By name too; listed with its run count.
    expect(getRunGroup(s, 'tools').id).toBe(g);
    expect(listRunGroups(s)[0]).toMatchObject({ id: g, runs: 3 });
    // --metrics picks other keys.
    expect(Object.keys(buildRunGroupReport(getRunGroup(s, g), runGroupMembers(s, g), { metrics: ['reward'] }).cells[0]!.metrics)).toEqual(['reward/mean']);
  });

  it('a complete group is not partial; two groups compare cell by cell (b − a)', () => {
    const s = open();
    const mk = (name: string, base: number) => {
      const g = createRunGroup(s, { name, kind: 'seeds', plan: [0, 1, 2].map((seed) => ({ cell: 'base', overrides: {}, seed })) });
      [0, 1, 2].forEach((seed) => addRun(s, g, 'base', seed, 'completed', { 'eval/exact_match': base + seed * 0.01 }));
      return buildRunGroupReport(getRunGroup(s, g), runGroupMembers(s, g));
    };
    const a = mk('a', 0.5);
    const b = mk('b', 0.6);
    expect(a.partial).toBe(false);
    expect(a.notes).toEqual([]);
    const c = compareRunGroups(a, b);
    const m = c.cells[0]!.metrics['eval/exact_match']!;
    expect(m.diff).toBeCloseTo(0.1, 12);
    expect(m.lo).toBeGreaterThan(0.07);
    expect(m.hi).toBeLessThan(0.13);
  });

  it('lift needs both ends', () => {
    expect(reportMetrics({ 'eval/exact_match': 0.5 })).toEqual({ 'eval/exact_match': 0.5 });
  });
});
