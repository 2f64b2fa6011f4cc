/** ONNX export + ONNX Runtime execution agree with the float64 reference evaluator. */
import { afterAll, describe, expect, it } from 'vitest';
import { withGradients } from '../../../engine/tensor/autodiff';
import { traceGraph } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import { OrtRunner, OrtWorker, ortInfo, resolveProviders } from '../../../engine/tensor/ort';
import { f32, i32, type HostTensor } from '../../../engine/tensor/host';

const runners: OrtRunner[] = [];
afterAll(async () => {
  for (const r of runners) await r.dispose();
});

function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-12);
}

function seq(n: number, f: (i: number) => number): number[] {
  return Array.from({ length: n }, (_, i) => f(i));
}

// A small attention-like program with symbolic batch/seq dims touching most ops.
const program = traceGraph(
  [
    { name: 'emb', dtype: 'float32', shape: [7, 4] },
    { name: 'w', dtype: 'float32', shape: [4, 4] },
    { name: 'ids', dtype: 'int32', shape: ['batch', 'seq'] },
    { name: 'targets', dtype: 'int32', shape: ['batch', 'seq'] },
  ],
  (o, x) => {
    const h = o.gather(x.emb, x.ids); // [b, s, 4]
    const q = o.matmul(h, x.w);
    const scores = o.matmul(q, o.transpose(h, [0, 2, 1])); // [b, s, s]
    const att = o.softmax(o.div(scores, o.scalar(2)), -1);
    const mixed = o.add(o.matmul(att, h), o.tanh(h));
    const flat = o.reshape(mixed, [-1, 4]);
    const logits = o.reshape(o.matmul(flat, o.transpose(x.emb, [1, 0])), ['batch', 'seq', 7]);
    const lp = o.logSoftmax(logits, -1);
    const tok = o.squeeze(o.gatherElements(lp, o.unsqueeze(x.targets, [2]), 2), [2]);
    const rot = o.concat([o.slice(h, [2], [4], [2]), o.neg(o.slice(h, [0], [2], [2]))], 2);
    const extra = o.mean(o.mul(rot, rot), [0, 1, 2]);
    const pos = o.cast(o.range('seq'), 'float32');
    const wpos = o.sum(o.mul(tok, o.sigmoid(pos)), [0, 1]);
    return { loss: o.add(o.neg(wpos), extra), logits };
  },
);
const feeds: Record<string, HostTensor> = {
  emb: f32(
    [7, 4],
    seq(28, (i) => Math.sin(i * 0.7)),
  ),
  w: f32(
    [4, 4],
    seq(16, (i) => Math.cos(i * 0.3) * 0.5),
  ),
  ids: i32([2, 3], [1, 6, 6, 0, 6, 2]),
  targets: i32([2, 3], [6, 2, 1, 1, 0, 6]),
};

describe('ONNX Runtime execution', () => {
  it('forward and gradients match the float64 reference (threads=2, repeated embedding ids)', async () => {
    const g = withGradients(program, 'loss', ['emb', 'w']);
    const ref = evaluate(g, feeds);
    const r = await OrtRunner.create(g, { threads: 2 });
    runners.push(r);
    const out = await r.run(feeds);
    for (const k of ['loss', 'logits', 'grad.emb', 'grad.w']) {
      expect(out[k].shape, k).toEqual(ref[k].shape);
      expect(relErr(out[k].data as Float32Array, ref[k].data as Float32Array), k).toBeLessThan(1e-5);
    }
  });

  it('serves other batch and sequence sizes from the same session', async () => {
    const r = await OrtRunner.create(program, { threads: 1, inWorker: false });
    runners.push(r);
    const f2 = { ...feeds, ids: i32([1, 5], [1, 2, 3, 4, 5]), targets: i32([1, 5], [0, 0, 1, 1, 2]) };
    const out = await r.run(f2);
    expect(out.logits.shape).toEqual([1, 5, 7]);
    expect(relErr(out.logits.data as Float32Array, evaluate(program, f2).logits.data as Float32Array)).toBeLessThan(1e-5);
  });

  it('persistent feeds updated while runs are queued: each run sees the values set before it', async () => {
    // Weights travel to the worker through shared memory and are copied into its buffers; an
    // update sent while an earlier run is still queued must not change what that run reads.
    const r = await OrtRunner.create(program, { threads: 1 });
    runners.push(r);
    const { emb, w, ...batch } = feeds;
    const w2 = f32(
      [4, 4],
      seq(16, (i) => Math.sin(i * 0.9)),
    );
    const w3 = f32(
      [4, 4],
      seq(16, (i) => 0.1 * i - 0.7),
    );
    r.setPersistentFeeds({ emb, w });
    const a = r.run(batch);
    r.setPersistentFeeds({ w: w2 });
    const b = r.run(batch);
    r.setPersistentFeeds({ w: w3 });
    const c = r.run(batch);
    const [ra, rb, rc] = await Promise.all([a, b, c]);
    for (const [out, wv] of [
      [ra, w],
      [rb, w2],
      [rc, w3],
    ] as const) {
      const ref = evaluate(program, { ...feeds, w: wv });
      expect(relErr(out.logits.data as Float32Array, ref.logits.data as Float32Array)).toBeLessThan(1e-5);
    }
  });

  it('sessions in one OrtWorker share its persistent feeds; moved feeds leave this thread', async () => {
    const host = OrtWorker.create();
    const r1 = await OrtRunner.create(program, { threads: 1, worker: host });
    const r2 = await OrtRunner.create(program, { threads: 1, worker: host });
    const { emb, w, ...batch } = feeds;
    const wMoved = f32([4, 4], Array.from(w.data as Float32Array));
    r1.setPersistentFeeds({ emb, w: wMoved }, { move: new Set(['w']) });
    expect(wMoved.data.length).toBe(0); // transferred, not copied
    const ref = evaluate(program, feeds).logits.data as Float32Array;
    // r2 never got feeds of its own: it reads the worker's.
    for (const r of [r1, r2]) expect(relErr((await r.run(batch)).logits.data as Float32Array, ref)).toBeLessThan(1e-5);
    await r1.dispose(); // releases its session only
    expect(relErr((await r2.run(batch)).logits.data as Float32Array, ref)).toBeLessThan(1e-5);
    await r2.dispose();
    await host.dispose();
  });

  it('a missing feed names the input', async () => {
    const r = await OrtRunner.create(program, { threads: 1 });
    runners.push(r);
    await expect(r.run({ emb: feeds.emb })).rejects.toThrow(/missing feed 'w'/);
  });

  it('ortInfo reports the CPU provider as loadable', async () => {
    const info = await ortInfo();
    expect(info.version).toMatch(/^\d+\.\d+/);
    expect(info.providers.find((p) => p.name === 'cpu')?.loads).toBe(true);
  });
});

describe('shape inference', () => {
  it('names the op and both shapes on a mismatch', () => {
    expect(() =>
      traceGraph(
        [
          { name: 'a', dtype: 'float32', shape: ['batch', 'seq', 128] },
          { name: 'b', dtype: 'float32', shape: [64, 256] },
        ],
        (o, x) => ({ y: o.matmul(x.a, x.b) }),
      ),
    ).toThrow('matmul: inner dims differ: [batch,seq,128] x [64,256]');
    expect(() =>
      traceGraph(
        [
          { name: 'a', dtype: 'float32', shape: [2, 3] },
          { name: 'b', dtype: 'float32', shape: [4] },
        ],
        (o, x) => ({ y: o.add(x.a, x.b) }),
      ),
    ).toThrow('add: shapes cannot broadcast: [2,3] vs [4]');
  });
  it('infers symbolic shapes through reshape with -1', () => {
    const g = traceGraph([{ name: 'a', dtype: 'float32', shape: ['batch', 'seq', 8] }], (o, x) => ({
      y: o.reshape(x.a, [-1, 8]),
      z: o.reshape(x.a, ['batch', 'seq', 2, 4]),
    }));
    expect(g.outputs.y.shape).toEqual(['batch*seq', 8]);
    expect(g.outputs.z.shape).toEqual(['batch', 'seq', 2, 4]);
  });
});

describe('device selection', () => {
  it('resolves auto to an accelerator only when its provider loads, and names the fix for one that does not', async () => {
    const info = await ortInfo();
    expect(await resolveProviders('cpu')).toEqual(['cpu']);
    const acc = info.providers.find((p) => p.name !== 'cpu' && p.loads);
    expect(await resolveProviders('auto')).toEqual(acc ? [acc.name, 'cpu'] : ['cpu']);
    const cuda = info.providers.find((p) => p.name === 'cuda');
    if (cuda && !cuda.loads) await expect(resolveProviders('cuda')).rejects.toThrow(/device: "cuda" is not available .*npm run setup:gpu/);
    if (cuda?.loads) expect(await resolveProviders('cuda')).toEqual(['cuda', 'cpu']);
  });
});
