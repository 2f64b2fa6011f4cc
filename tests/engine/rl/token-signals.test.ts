// What training applied per token (engine/rl/token-signals.ts): ratio, clip side, loss weight by
// hand; then a real `arbor train` (GRPO, two mini-batches so the second sees moved weights, process
// rewards on) storing them per turn with the advantage's outcome and process parts and the group's statistics.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tokenLossWeights, tokenSignals } from '../../../engine/rl/token-signals';
import { validateConfig } from '../../../engine/config/experiment';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';

const cfg = (algorithm: Record<string, unknown>) => validateConfig({ model: { init: 'tiny' }, algorithm, rollout: { max_total_length: 100 } });

describe('tokenSignals', () => {
  it('PPO: the ratio per token, the upper bound for A > 0, the lower for A < 0, the dual clip, nothing off the mask', () => {
    const c = cfg({ clip_ratio_low: 0.2, clip_ratio_high: 0.28, dual_clip: 3 });
    const lr = (r: number) => Math.log(r);
    const [s] = tokenSignals(
      [
        {
          mask: [0, 1, 1, 1, 1, 1],
          advantages: [0, 1, 1, -1, -1, -1],
          oldLogprobs: [0, 0, 0, 0, 0, 0],
          logprobs: [lr(5), lr(1.1), lr(1.5), lr(0.7), lr(0.9), lr(4)],
        },
      ],
      c,
    );
    expect(Array.from(s!.ratio).map((x) => +x.toFixed(4))).toEqual([0, 1.1, 1.5, 0.7, 0.9, 4]);
    expect(Array.from(s!.clipped)).toEqual([0, 0, 1, -1, 0, 2]);
  });

  it('fresh weights: every ratio is 1 and nothing is clipped', () => {
    const [s] = tokenSignals([{ mask: [1, 1], advantages: [2, -2], oldLogprobs: [-1, -2], logprobs: null }], cfg({}));
    expect(Array.from(s!.ratio)).toEqual([1, 1]);
    expect(Array.from(s!.clipped)).toEqual([0, 0]);
  });

  it("GSPO: every token carries its sequence's ratio, clipped by GSPO's own range", () => {
    const c = cfg({ policy_loss: 'gspo' });
    const [s] = tokenSignals([{ mask: [1, 1, 0], advantages: [1, 1, 0], oldLogprobs: [0, 0, 0], logprobs: [0.001, 0.003, 9] }], c);
    const seq = Math.exp(0.002);
    expect(s!.ratio[0]).toBeCloseTo(seq, 6);
    expect(s!.ratio[1]).toBeCloseTo(seq, 6);
    expect(s!.ratio[2]).toBe(0);
    expect(Array.from(s!.clipped)).toEqual([1, 1, 0]); // 1.002 > 1 + 4e-4
  });

  it('loss weights follow the aggregation mode over the mini-batch', () => {
    const masks = [
      [1, 1, 0],
      [1, 0, 0],
      [0, 0, 0],
    ];
    const w = (mode: Parameters<typeof tokenLossWeights>[1]) => tokenLossWeights(masks, mode, 10).map((a) => Array.from(a).map((x) => +x.toFixed(6)));
    expect(w('token-mean')).toEqual([[1 / 3, 1 / 3, 0].map((x) => +x.toFixed(6)), [+(1 / 3).toFixed(6), 0, 0], [0, 0, 0]]);
    expect(w('seq-mean-token-mean')).toEqual([
      [0.25, 0.25, 0],
      [0.5, 0, 0],
      [0, 0, 0],
    ]);
    expect(w('seq-mean-token-sum')).toEqual([
      [0.5, 0.5, 0],
      [0.5, 0, 0],
      [0, 0, 0],
    ]);
    expect(w('seq-mean-token-sum-norm')).toEqual([
      [0.05, 0.05, 0],
      [0.05, 0, 0],
      [0, 0, 0],
    ]);
  });
});

describe('arbor train stores the training signal per token', () => {
  it('ratio, clip side, loss weight, advantage parts adding up to the advantage, the group statistics', () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-signal-'));
    const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
    const file = join(home, 'c.yaml');
    writeFileSync(
      file,
      [
        'name: signal',
        'model: { init: tiny }',
        'steps: 2',
        'rollout: { prompts_per_step: 2, n: 4, max_turns: 3, max_new_tokens: 8 }',
        'algorithm: { mini_batches: 2, process_rewards: true, loss_agg_mode: seq-mean-token-mean, entropy_coef: 0.05 }',
        'optim: { lr: 0.001 }',
        'eval: { every: 0, n_questions: 2 }',
        'checkpoint: { every: 2, keep: 1 }',
        'logging: { full_trajectories_every: 1 }',
      ].join('\n'),
    );
    const r = spawnSync(process.execPath, [bin, 'train', file, '--steps', '2', '--json'], {
      encoding: 'utf8',
      env: { ...process.env, ARBOR_HOME: home },
      timeout: 240_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const { run } = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string };
    const store = new Store(openDatabase(join(home, 'arbor.db')));
    const all = store.searchTrajectories({ runId: run });
    expect(all).toHaveLength(2 * 2 * 4);
    let moved = 0;
    for (const s of all) {
      const t = store.getTrajectory(s.id);
      const rewards = all.filter((o) => o.step === t.step && o.group === t.group).map((o) => o.reward);
      const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
      expect(t.signal?.group?.n).toBe(4);
      expect(t.signal?.group?.mean).toBeCloseTo(mean, 5);
      expect(t.signal).toMatchObject({ estimator: 'grpo', policyLoss: 'ppo', lossAggMode: 'seq-mean-token-mean', clipLow: 0.2, clipHigh: 0.28 });
      let modelTokens = 0;
      for (const u of t.turnsData) modelTokens += (u.lossMask ?? []).filter((m) => m === 1).length;
      for (const u of t.turnsData) {
        const n = u.tokenIds.length;
        for (const a of [u.ratio, u.clipped, u.lossWeight, u.advOutcome, u.advProcess]) expect(a).toHaveLength(n);
        for (let i = 0; i < n; i++) {
          expect(u.advOutcome![i]! + u.advProcess![i]!).toBeCloseTo(u.advantage![i]!, 4);
          if (u.lossMask![i] === 1) {
            // seq-mean-token-mean over the mini-batch of 4 sequences: 1 / (tokens of this sequence × 4).
            expect(u.lossWeight![i]!).toBeCloseTo(1 / (modelTokens * 4), 6);
            expect(u.ratio![i]!).toBeGreaterThan(0);
            if (Math.abs(u.ratio![i]! - 1) > 1e-6) moved++;
            expect([0, 1, -1]).toContain(u.clipped![i]);
          } else expect(u.lossWeight![i]).toBe(0);
        }
      }
    }
    // The second mini-batch of each step ran on weights the first had moved: some ratios differ from 1.
    expect(moved).toBeGreaterThan(0);
  }, 300_000);
});
