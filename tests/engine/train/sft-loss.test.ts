import { describe, expect, it } from 'vitest';
import { withGradients } from '../../../engine/tensor/autodiff';
import { traceGraph } from '../../../engine/tensor/graph';
import { i32 } from '../../../engine/tensor/host';
import { evaluate } from '../../../engine/tensor/refeval';
import { maskedNllLoss, tokenLogprobs } from '../../../engine/train/sft-loss';

describe('SFT loss program', () => {
  const V = 3;
  const logits = [0.5, -1, 2, 0, 0, 0, 1, 1, -3, 0.2, 0.1, 0];
  const targets = [2, 0, 1, 2];
  const mask = [0, 1, 1, 0];
  const graph = withGradients(
    traceGraph(
      [
        { name: 'logits', dtype: 'float64', shape: ['b', 's', V] },
        { name: 'targets', dtype: 'int32', shape: ['b', 's'] },
        { name: 'mask', dtype: 'float64', shape: ['b', 's'] },
      ],
      (o, x) => maskedNllLoss(o, tokenLogprobs(o, x.logits!, x.targets!), x.mask!),
    ),
    'loss',
    ['logits'],
  );
  const run = (l: number[]) =>
    evaluate(graph, {
      logits: { dtype: 'float64', shape: [2, 2, V], data: Float64Array.from(l) },
      targets: i32([2, 2], targets),
      mask: { dtype: 'float64', shape: [2, 2], data: Float64Array.from(mask) },
    });

  it('averages −log p over model tokens only (hand-computed)', () => {
    const lse = (r: number[]) => Math.log(r.reduce((a, x) => a + Math.exp(x), 0));
    const lp1 = 0 - lse([0, 0, 0]); // row 1 (b0,s1), target 0
    const lp2 = 1 - lse([1, 1, -3]); // row 2 (b1,s0), target 1
    const out = run(logits);
    expect(out.loss!.data[0]).toBeCloseTo(-(lp1 + lp2) / 2, 10);
    expect(out.tokens!.data[0]).toBe(2);
  });

  it('has zero gradient on masked positions and matches finite differences elsewhere', () => {
    const g = run(logits)['grad.logits']!.data;
    // exactly zero (either sign: −softmax·0 is −0)
    for (const k of [0, 1, 2, 9, 10, 11]) expect(Math.abs(Number(g[k]))).toBe(0);
    const h = 1e-6;
    for (const k of [3, 4, 6, 8]) {
      const up = logits.slice();
      up[k]! += h;
      const dn = logits.slice();
      dn[k]! -= h;
      const fd = ((run(up).loss!.data[0] as number) - (run(dn).loss!.data[0] as number)) / (2 * h);
      expect(g[k]).toBeCloseTo(fd, 6);
    }
  });
});
