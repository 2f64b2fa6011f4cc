// Loss aggregation modes on a 3×4 batch with masks (one sequence without model tokens),
// against hand-computed values, and the PPO-clip loss program using them.
import { describe, expect, it } from 'vitest';
import { traceGraph } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import { aggregateLoss, aggregationUnits, ppoClipLoss } from '../../../engine/train/model-port';
import { validateConfig } from '../../../engine/train/config';
import type { ExperimentConfig } from '../../../engine/train/config';

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
      const out = evaluate(g, { logprobs: f64(lp, [3, 4]), entropy: f64(v, [3, 4]), mask: f64(mask, [3, 4]), advantages: f64(adv, [3, 4]), old_logprobs: f64(lp, [3, 4]) });
      const expected = mode === 'token-mean' ? -(1 + 1 - 6) / 5 : -((1 + -2) / 2);
      expect(Number(out.loss!.data[0])).toBeCloseTo(expected, 5);
      expect(Number(out.clip_fraction!.data[0])).toBe(0);
    }
  });
});
