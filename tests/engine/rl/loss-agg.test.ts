// Loss aggregation modes on a 3×4 batch with masks (one sequence without model tokens),
// against hand-computed values, and the PPO-clip loss program using them.
import { describe, expect, it } from 'vitest';
import { traceGraph } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import { aggregateLoss, aggregationUnits } from '../../../engine/rl/policy-losses';
import { ppoClipLoss } from '../../../engine/rl/loss/ppo';
import { validateConfig } from '../../../engine/config/experiment';
import type { ExperimentConfig } from '../../../engine/config/experiment';

const v = [1, 2, 3, 4, /**/ 10, 20, 30, 40, /**/ 5, 5, 5, 5];
const mask = [1, 1, 0, 0, /**/ 0, 1, 1, 1, /**/ 0, 0, 0, 0];
const f64 = (data: number[], shape: number[]) => ({ dtype: 'float32' as const, shape, data: Float32Array.from(data) });

function agg(mode: ExperimentConfig['algorithm']['loss_agg_mode'], maxLength = 8): number {
  const g = traceGraph(
    [
      { name: 'v', dtype: 'float32', shape: ['b', 's'] },
      { name: 'mask', dtype: 'float32', shape: ['b', 's'] },
    ],
    (o, x) => ({ y: aggregateLoss(o, x.v!, x.mask!, mode, maxLength) }),
  );
  return Number(evaluate(g, { v: f64(v, [3, 4]), mask: f64(mask, [3, 4]) }).y!.data[0]);
}

describe('loss aggregation', () => {
  it('token-mean: every model token weighs the same', () => {
    expect(agg('token-mean')).toBeCloseTo((1 + 2 + 20 + 30 + 40) / 5, 5);
  });
  it('seq-mean-token-mean: per-sequence means, averaged over sequences that have model tokens', () => {
    expect(agg('seq-mean-token-mean')).toBeCloseTo((1.5 + 30) / 2, 5);
  });
  it('seq-mean-token-sum: per-sequence sums, averaged over sequences', () => {
    expect(agg('seq-mean-token-sum')).toBeCloseTo((3 + 90) / 2, 5);
  });
  it('seq-mean-token-sum-norm: token sum over (max length × sequences), Dr.GRPO', () => {
    expect(agg('seq-mean-token-sum-norm', 8)).toBeCloseTo((3 + 90) / (8 * 2), 5);
  });
  it('micro-batches are weighted by tokens (token-mean) or by sequences with model tokens', () => {
    const masks = [Float32Array.from(mask.slice(0, 4)), Float32Array.from(mask.slice(4, 8)), Float32Array.from(mask.slice(8))];
    expect(aggregationUnits(masks, 'token-mean')).toBe(5);
    expect(aggregationUnits(masks, 'seq-mean-token-mean')).toBe(2);
    expect(aggregationUnits(masks, 'seq-mean-token-sum-norm')).toBe(2);
  });

  it('PPO-clip loss at ratio 1 is −(aggregated advantage), per mode', () => {
    const adv = [1, 1, 0, 0, /**/ 0, -2, -2, -2, /**/ 3, 3, 3, 3];
    for (const mode of ['token-mean', 'seq-mean-token-mean'] as const) {
      const cfg = validateConfig({ model: { init: 'tiny' }, algorithm: { loss_agg_mode: mode } });
      const spec = ppoClipLoss(cfg);
      const g = traceGraph(
        [
          { name: 'logprobs', dtype: 'float32', shape: ['b', 's'] },
          { name: 'entropy', dtype: 'float32', shape: ['b', 's'] },
          { name: 'mask', dtype: 'float32', shape: ['b', 's'] },
          { name: 'advantages', dtype: 'float32', shape: ['b', 's'] },
          { name: 'old_logprobs', dtype: 'float32', shape: ['b', 's'] },
        ],
        (o, x) => spec.program(o, x as never),
      );
      const lp = v.map((x) => -x / 10);
      const out = evaluate(g, {
        logprobs: f64(lp, [3, 4]),
        entropy: f64(v, [3, 4]),
        mask: f64(mask, [3, 4]),
        advantages: f64(adv, [3, 4]),
        old_logprobs: f64(lp, [3, 4]),
      });
      const expected = mode === 'token-mean' ? -(1 + 1 - 6) / 5 : -((1 + -2) / 2);
      expect(Number(out.loss!.data[0])).toBeCloseTo(expected, 5);
      expect(Number(out.clip_fraction!.data[0])).toBe(0);
    }
  });
});

describe('PPO-clip policy loss terms (hand-computed, one sequence of 4 model tokens)', () => {
  // log-ratios chosen to hit each branch: inside the clip range, above 1+ε_high, below 1−ε_low.
  const logRatio = [Math.log(1.1), Math.log(1.5), Math.log(0.5), Math.log(1.5)];
  const adv = [1, 1, -1, -1];
  const old = [-1, -2, -0.5, -1.5];
  const lp = old.map((o, i) => o + logRatio[i]!);
  const ref = [-1.2, -1.8, -0.7, -1.0];
  const ent = [0.5, 1.0, 1.5, 2.0];
  const mask = [1, 1, 1, 1];
  const f = (d: number[]) => ({ dtype: 'float32' as const, shape: [1, 4], data: Float32Array.from(d) });

  function run(algorithm: Record<string, unknown>) {
    const cfg = validateConfig({ model: { init: 'tiny' }, algorithm });
    const spec = ppoClipLoss(cfg);
    const names = ['logprobs', 'entropy', 'mask', ...spec.inputs.map((i) => i.name)];
    const g = traceGraph(
      names.map((name) => ({ name, dtype: 'float32' as const, shape: ['b', 's'] })),
      (o, x) => spec.program(o, x as never),
    );
    const feeds: Record<string, ReturnType<typeof f>> = { logprobs: f(lp), entropy: f(ent), mask: f(mask), advantages: f(adv), old_logprobs: f(old) };
    if (names.includes('ref_logprobs')) feeds.ref_logprobs = f(ref);
    const out = evaluate(g, feeds);
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Number(v.data[0])]));
  }

  // Per token: max(−A·r, −A·clip(r, 1−0.2, 1+0.28)).
  // t0: r 1.1, A 1  → max(−1.1, −1.1) = −1.1
  // t1: r 1.5, A 1  → max(−1.5, −1.28) = −1.28 (clipped)
  // t2: r 0.5, A −1 → max(0.5, 0.8) = 0.8 (clipped)
  // t3: r 1.5, A −1 → max(1.5, 1.28) = 1.5
  const base = [-1.1, -1.28, 0.8, 1.5];

  it('clip-higher (ε_low 0.2, ε_high 0.28) and the clip fraction', () => {
    const r = run({ clip_ratio_low: 0.2, clip_ratio_high: 0.28 });
    expect(r.loss).toBeCloseTo(base.reduce((a, b) => a + b) / 4, 5);
    expect(r.clip_fraction).toBeCloseTo(2 / 4, 5);
  });

  it('dual clip caps the loss of negative-advantage tokens at −c·A', () => {
    const r = run({ clip_ratio_low: 0.2, clip_ratio_high: 0.28, dual_clip: 1.3 });
    // t2: min(0.8, 1.3) = 0.8; t3: min(1.5, 1.3) = 1.3
    expect(r.loss).toBeCloseTo((-1.1 - 1.28 + 0.8 + 1.3) / 4, 5);
  });

  it('KL to the reference in the loss, k1 and k3, and the entropy bonus', () => {
    const d = ref.map((x, i) => x - lp[i]!); // log(π_ref/π)
    const k1 = d.map((x) => -x).reduce((a, b) => a + b) / 4;
    const k3 = d.map((x) => Math.exp(x) - x - 1).reduce((a, b) => a + b) / 4;
    const pg = base.reduce((a, b) => a + b) / 4;
    const r1 = run({ clip_ratio_low: 0.2, clip_ratio_high: 0.28, kl_coef: 0.5, kl_type: 'k1', kl_in: 'loss' });
    expect(r1.kl).toBeCloseTo(k1, 5);
    expect(r1.loss).toBeCloseTo(pg + 0.5 * k1, 5);
    const r3 = run({ clip_ratio_low: 0.2, clip_ratio_high: 0.28, kl_coef: 0.5, kl_type: 'k3', kl_in: 'loss', entropy_coef: 0.01 });
    expect(r3.kl).toBeCloseTo(k3, 5);
    expect(r3.loss).toBeCloseTo(pg + 0.5 * k3 - 0.01 * (5 / 4), 5);
    expect(r3.entropy).toBeCloseTo(5 / 4, 5);
  });
});
