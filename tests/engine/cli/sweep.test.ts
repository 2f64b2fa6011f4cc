// `arbor train <config> --seeds …` and `arbor sweep <config> --grid … --seeds …`: one group of
// normal runs, each tagged with its group and cell; `arbor report` summarises it and compares two.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');

describe('seed sweeps', () => {
  it('train --seeds runs the set as one group; sweep --grid --parallel 2 makes a cell per value; report prints and compares them', () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-home-'));
    const env = { ...process.env, ARBOR_HOME: home };
    const arbor = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env, timeout: 300_000 });
    const dir = mkdtempSync(join(tmpdir(), 'arbor-sweep-'));
    const cfg = join(dir, 'c.yaml');
    writeFileSync(
      cfg,
      [
        'name: sweep-test',
        'model: { init: tiny }',
        'steps: 1',
        'rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 12 }',
        'eval: { every: 0, n_questions: 4 }',
        'checkpoint: { every: 1, keep: 1 }',
      ].join('\n'),
    );
    // Refusals name the flag.
    expect(arbor('train', cfg, '--seeds', '0,x').stderr).toMatch(/--seeds: "x" is not a seed/);
    expect(arbor('train', cfg, '--seeds', '0', '--no-store').stderr).toMatch(/--no-store/);
    expect(arbor('sweep', cfg, '--grid', 'optim.nope=1').stderr).toMatch(/optim/);
    // `arbor demo --seed N` (the demo over seeds) takes a seed and refuses anything else.
    expect(arbor('demo', '--seed', '-1').stderr).toMatch(/--seed: "-1" is not a non-negative integer/);

    const r = arbor('train', cfg, '--seeds', '0,1', '--json');
    expect(r.status, r.stderr).toBe(0);
    const rep = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
      group: { id: string; planned: number };
      partial: boolean;
      cells: { cell: string; runs: { seed: number; status: string }[]; metrics: Record<string, { n: number }> }[];
    };
    expect(rep.partial).toBe(false);
    expect(rep.group.planned).toBe(2);
    expect(rep.cells[0]!.runs.map((x) => [x.seed, x.status])).toEqual([
      [0, 'completed'],
      [1, 'completed'],
    ]);
    expect(rep.cells[0]!.metrics['eval/exact_match']!.n).toBe(2);
    // Each run is a normal run (listed by `arbor runs`) with its own seed.
    const runs = JSON.parse(arbor('runs', '--json').stdout) as { id: string }[];
    expect(runs.length).toBe(2);

    const s = arbor('sweep', cfg, '--grid', 'rollout.temperature=0.7,1', '--seeds', '0', '--parallel', '2', '--json');
    expect(s.status, s.stderr).toBe(0);
    const grid = JSON.parse(s.stdout.trim().split('\n').pop()!) as { group: { id: string; kind: string }; cells: { cell: string; runs: unknown[] }[] };
    expect(grid.group.kind).toBe('grid');
    expect(grid.cells.map((c) => [c.cell, c.runs.length])).toEqual([
      ['rollout.temperature=0.7', 1],
      ['rollout.temperature=1', 1],
    ]);

    const text = arbor('report', rep.group.id, '--metrics', 'reward/mean,eval/exact_match');
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/95% CI of the mean/);
    expect(text.stdout).toMatch(/reward\/mean\s+2\s/);
    const list = arbor('report', '--list');
    expect(list.stdout).toContain(rep.group.id);
    expect(list.stdout).toContain(grid.group.id);
    // Two groups: the difference of means, cell by cell (here the seed group's one cell has no
    // same-named cell in the grid, so it says so).
    const cmp = arbor('report', rep.group.id, grid.group.id);
    expect(cmp.status, cmp.stderr).toBe(0);
    expect(cmp.stdout).toMatch(/no configuration of .* matches/);
  }, 400_000);
});
