/** The tfjs interpreter runs the same programs as the graph recorder and agrees with it. */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { withGradients } from '../../../engine/tensor/autodiff';
import { traceGraph, type GNode } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import { initTfjs, runTfjs, tfjsInfo, type TfProgram } from '../../../engine/tensor/tfjs';
import { f32, i32, type HostTensor } from '../../../engine/tensor/host';
import type { Ops } from '../../../engine/tensor/ops';

function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-12);
}

// One program, written once over Ops<T>, interpreted by both.
function program<T>(o: Ops<T>, x: Record<string, T>): Record<string, T> {
  const h = o.gather(x.emb, x.ids);
  const q = o.matmul(h, x.w);
  const att = o.softmax(o.matmul(q, o.transpose(h, [0, 2, 1])), -1);
  const mixed = o.add(o.matmul(att, h), o.sigmoid(h));
  const logits = o.matmul(mixed, o.transpose(x.emb, [1, 0]));
  const lp = o.logSoftmax(logits, -1);
  const tok = o.squeeze(o.gatherElements(lp, o.unsqueeze(x.targets, [2]), 2), [2]);
  const rot = o.concat([o.slice(h, [2], [4], [2]), o.neg(o.slice(h, [0], [2], [2]))], 2);
  const m = o.max(o.mul(rot, rot), [2]);
  const keep = o.where(o.greater(tok, o.scalar(-2)), tok, o.mul(tok, o.scalar(0.5)));
  return { loss: o.add(o.neg(o.mean(keep, [0, 1])), o.mean(m, [0, 1])), logits };
}

const feeds: Record<string, HostTensor> = {
  emb: f32(
    [7, 4],
    Array.from({ length: 28 }, (_, i) => Math.sin(i * 0.7)),
  ),
  w: f32(
    [4, 4],
    Array.from({ length: 16 }, (_, i) => Math.cos(i * 0.3) * 0.5),
  ),
  ids: i32([2, 3], [1, 6, 6, 0, 6, 2]),
  targets: i32([2, 3], [6, 2, 1, 1, 0, 6]),
};
const specs = [
  { name: 'emb', dtype: 'float32' as const, shape: [7, 4] },
  { name: 'w', dtype: 'float32' as const, shape: [4, 4] },
  { name: 'ids', dtype: 'int32' as const, shape: ['batch', 'seq'] },
  { name: 'targets', dtype: 'int32' as const, shape: ['batch', 'seq'] },
];

describe('tfjs interpreter', () => {
  for (const backend of ['cpu', 'wasm']) {
    it(`agrees with the graph recorder on outputs and gradients (${backend}, incl. embedding gradient)`, async () => {
      expect(await initTfjs(backend)).toBe(backend);
      const g = withGradients(
        traceGraph(specs, (o, x) => program<GNode>(o, x)),
        'loss',
        ['emb', 'w'],
      );
      const ref = evaluate(g, feeds);
      const got = runTfjs(program as TfProgram, feeds, { loss: 'loss', wrt: ['emb', 'w'] });
      for (const k of ['loss', 'logits', 'grad.emb', 'grad.w']) {
        expect(got[k].shape, k).toEqual(ref[k].shape);
        expect(relErr(got[k].data as Float32Array, ref[k].data as Float32Array), `${backend} ${k}`).toBeLessThan(1e-4);
      }
    });
  }

  it('reports backends and the chosen one', async () => {
    const info = await tfjsInfo();
    expect(info.backends.map((b) => b.name)).toEqual(['tensorflow-gpu', 'tensorflow', 'wasm', 'cpu']);
    expect(info.backends.find((b) => b.name === 'cpu')?.available).toBe(true);
    expect(info.backends.find((b) => b.name === info.chosen)?.available).toBe(true);
    expect(tf.getBackend()).toBe(info.chosen === 'tensorflow-gpu' ? 'tensorflow' : info.chosen);
  });
});
