// The evaluation harness (engine/recipes/eval-harness.ts): pass@k against hand-computed cases,
// SQuAD's answer normalisation and token F1, scoring by hop / meta field, reward-scored tasks; and
// `arbor eval <checkpoint> --task multihop --k 8 --json`, `arbor eval <run> --k` storing with the run.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { passAtK, scoreHarness, squadExactMatch, squadF1, squadNormalize, harnessMetricKeys } from '../../../engine/recipes/eval-harness';
import type { Trajectory } from '../../../engine/rollout/types';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';

const C = (n: number, k: number): number => (k < 0 || k > n ? 0 : k === 0 ? 1 : (C(n - 1, k - 1) * n) / k);

describe('pass@k (unbiased estimator, 1 − C(n−c,k)/C(n,k))', () => {
  it('matches hand-computed cases', () => {
    expect(passAtK(5, 2, 1)).toBeCloseTo(0.4, 12); // c/n
    expect(passAtK(5, 2, 2)).toBeCloseTo(1 - 3 / 10, 12); // C(3,2)=3, C(5,2)=10
    expect(passAtK(4, 1, 2)).toBeCloseTo(0.5, 12); // 1 − 3/6
    expect(passAtK(10, 3, 5)).toBeCloseTo(1 - 21 / 252, 12); // C(7,5)=21, C(10,5)=252
    expect(passAtK(5, 2, 4)).toBe(1); // n − c < k: every k-subset holds a correct sample
    expect(passAtK(8, 0, 8)).toBe(0);
    expect(passAtK(8, 8, 1)).toBe(1);
  });
  it('agrees with the binomial formula everywhere on a grid', () => {
    for (let n = 1; n <= 12; n++) for (let c = 0; c <= n; c++) for (let k = 1; k <= n; k++) expect(passAtK(n, c, k)).toBeCloseTo(1 - C(n - c, k) / C(n, k), 10);
  });
  it('refuses k > n, naming the numbers', () => {
    expect(() => passAtK(4, 1, 8)).toThrow(/n=4, c=1, k=8/);
  });
});

describe("SQuAD's normalisation and F1", () => {
  it('normalize_answer: lower case, punctuation deleted, articles removed, whitespace collapsed', () => {
    expect(squadNormalize('The Eiffel  Tower!')).toBe('eiffel tower');
    expect(squadNormalize("don't")).toBe('dont'); // deleted, not a space
    expect(squadNormalize('Jean-Paul Sartre')).toBe('jeanpaul sartre');
    expect(squadNormalize('an apple a day')).toBe('apple day');
    expect(squadExactMatch('jeanpaul sartre', ['Jean-Paul Sartre'])).toBe(1);
  });
  it('token F1 by hand, best over the golds', () => {
    // pred [cat, sat, on, mat], gold [cat, on, mat]: P = 3/4, R = 1 → 6/7
    expect(squadF1('the cat sat on a mat', ['cat on mat'])).toBeCloseTo(6 / 7, 12);
    expect(squadF1('x', ['x y'])).toBeCloseTo(2 / 3, 12);
    expect(squadF1('x', ['q', 'x'])).toBe(1);
    expect(squadF1('cat cat', ['cat'])).toBeCloseTo(2 / 3, 12); // repeated tokens count once per gold token
    expect(squadF1('', ['cat'])).toBe(0);
  });
});

function traj(taskId: string, answer: string | undefined, golds: string[], meta: Record<string, unknown>, extra: Partial<Trajectory> = {}): Trajectory {
  return {
    taskId,
    group: 0,
    sample: 0,
    promptIds: [],
    promptText: '',
    turns: [],
    outcome: { reward: answer !== undefined && golds.includes(answer) ? 1 : 0, components: {}, answer, golds, formatOk: answer !== undefined },
    truncated: false,
    seed: 0,
    timings: { totalMs: 0, modelMs: 0, envMs: 0, prefillTokens: 0, generatedTokens: 0 },
    meta,
    ...extra,
  };
}

describe('scoreHarness', () => {
  it('pass@k, mean@k from the samples; EM and F1 from the greedy episodes; by hops', () => {
    const sampled = [
      ...['paris', 'london', 'Paris.', 'rome'].map((a) => traj('A', a, ['Paris'], { hops: 1 })),
      ...['x', 'z', undefined, 'q'].map((a) => traj('B', a, ['x y'], { hops: 2 })),
    ];
    const greedy = [traj('A', 'Paris.', ['Paris'], { hops: 1 }), traj('B', 'x', ['x y'], { hops: 2 })];
    const r = scoreHarness(sampled, greedy, { k: 4 });
    expect(r.overall['pass@1']).toBeCloseTo(0.25, 12); // A: 2/4, B: 0
    expect(r.overall['pass@2']).toBeCloseTo((1 - 1 / 6) / 2, 12); // A: 1 − C(2,2)/C(4,2)
    expect(r.overall['pass@4']).toBeCloseTo(0.5, 12);
    expect(r.overall['mean@4']).toBeCloseTo(0.25, 12);
    expect(r.overall.exact_match).toBeCloseTo(0.5, 12);
    expect(r.overall.f1).toBeCloseTo((1 + 2 / 3) / 2, 12);
    expect(r.overall.format_rate).toBeCloseTo(7 / 8, 12);
    expect(r.by?.field).toBe('hops');
    expect(Object.keys(r.by!.groups)).toEqual(['1', '2']);
    expect(r.by!.groups['1']!['pass@4']).toBe(1);
    expect(r.by!.groups['2']!.f1).toBeCloseTo(2 / 3, 12);
    expect(harnessMetricKeys(r)['harness/hops=2/f1']).toBeCloseTo(2 / 3, 12);
  });
  it('--by any meta field; a field no task has is refused', () => {
    const s = [traj('A', 'a', ['a'], { kind: 'age' }), traj('B', 'b', ['c'], { kind: 'sum' })];
    expect(Object.keys(scoreHarness(s, [], { k: 1, by: 'kind' }).by!.groups)).toEqual(['age', 'sum']);
    expect(() => scoreHarness(s, [], { k: 1, by: 'nope' })).toThrow(/--by nope: no task has meta.nope/);
  });
  it('a task without gold answers is scored by its reward', () => {
    const s = [0, 1, 0.5, 1].map((rw, i) => traj('T', `a${i}`, [], {}, { outcome: { reward: rw, components: {}, answer: `a${i}`, golds: [] } }));
    const r = scoreHarness(s, [], { k: 4, passReward: 1 });
    expect(r.scoredBy).toMatch(/reward ≥ 1/);
    expect(r.overall['pass@1']).toBeCloseTo(0.5, 12);
    expect(r.overall.exact_match).toBeUndefined();
    expect(r.overall.reward_mean).toBeCloseTo(0.625, 12);
  });
});

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
const fixture = join(__dirname, '..', 'model', 'fixtures', 'multihop-tiny-sft');

describe('arbor eval --k', () => {
  it('arbor eval <checkpoint> --task multihop --k 8 --json: pass@1, pass@8, mean@8, EM and F1 by hop; a run is evaluated and stored with it', () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-home-'));
    const env = { ...process.env, ARBOR_HOME: home };
    const arbor = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env, timeout: 300_000 });
    const r = arbor('eval', fixture, '--task', 'multihop', '--k', '8', '--n', '12', '--json');
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
      k: number;
      overall: Record<string, number>;
      by: { field: string; groups: Record<string, Record<string, number>> };
    };
    expect(out.k).toBe(8);
    expect(out.by.field).toBe('hops');
    expect(Object.keys(out.by.groups)).toEqual(['1', '2']);
    for (const g of Object.values(out.by.groups))
      for (const key of ['pass@1', 'pass@8', 'mean@8', 'exact_match', 'f1']) {
        expect(g[key]).toBeGreaterThanOrEqual(0);
        expect(g[key]).toBeLessThanOrEqual(1);
      }
    // pass@8 ≥ pass@1 always (how often the SFT fixture answers is what it learned: not asserted).
    expect(out.overall['pass@8']).toBeGreaterThanOrEqual(out.overall['pass@1']!);
    for (const g of Object.values(out.by.groups)) expect(g['pass@8']).toBeGreaterThanOrEqual(g['pass@1']!);
    expect(out.overall.questions).toBe(12);

    // Refusals name the flag.
    expect(arbor('eval', fixture, '--task', 'multihop', '--by', 'hops').stderr).toMatch(/give --k/);
    expect(arbor('eval', fixture, '--task', 'multihop', '--k', '0').stderr).toMatch(/--k: "0"/);

    // A run: its checkpoint (best, else last), its own task; stored as harness/* at the checkpoint's step.
    const dir = mkdtempSync(join(tmpdir(), 'arbor-evalrun-'));
    const cfg = join(dir, 'c.yaml');
    writeFileSync(
      cfg,
      [
        'name: eval-run',
        `model: { path: ${fixture} }`,
        'steps: 1',
        'rollout: { prompts_per_step: 2, n: 2, max_turns: 3, max_new_tokens: 24 }',
        'eval: { every: 0, n_questions: 4 }',
        'checkpoint: { every: 1, keep: 1 }',
      ].join('\n'),
    );
    const t = arbor('train', cfg, '--json');
    expect(t.status, t.stderr).toBe(0);
    const { run } = JSON.parse(t.stdout.trim().split('\n').pop()!) as { run: string };
    const e = arbor('eval', run, '--k', '2', '--json');
    expect(e.status, e.stderr).toBe(0);
    const er = JSON.parse(e.stdout.trim().split('\n').pop()!) as { run: string; step: number; stored: string; overall: Record<string, number> };
    expect(er.run).toBe(run);
    expect(er.step).toBe(1);
    expect(existsSync(er.stored)).toBe(true);
    const store = new Store(openDatabase(join(home, 'arbor.db')));
    expect(store.latest(run)['harness/pass@2']).toBeCloseTo(er.overall['pass@2']!, 6);
    expect(store.metricSeries(run, 'harness/hops=1/pass@1').step).toEqual([1]);
    store.db.close();
  }, 400_000);
});
