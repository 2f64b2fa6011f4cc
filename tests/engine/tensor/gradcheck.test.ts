/**
 * Finite-difference check (float64, via the reference evaluator) of every gradient rule in
 * the autodiff table, including broadcasting and multi-axis reductions. A rule added to the
 * table without a case here fails the coverage test.
 */
import { describe, expect, it } from 'vitest';
import { gradientRules, withGradients } from '../../../engine/tensor/autodiff';
import { traceGraph, type GNode, type GraphOps, type InputSpec } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import type { HostTensor } from '../../../engine/tensor/host';
import type { Ops } from '../../../engine/tensor/ops';

type Case = {
  name: string;
  rule: string;
  inputs: InputSpec[];
  ints?: Record<string, number[]>;
  positive?: boolean;
  f: (o: Ops<GNode>, x: Record<string, GNode>) => GNode;
  ref?: (o: Ops<GNode>, x: Record<string, GNode>) => GNode;
  /** Float inputs that get no gradient (frozen: a quantized weight's scales). */
  frozen?: string[];
};

const F = (name: string, shape: number[]): InputSpec => ({ name, dtype: 'float64', shape });
const I = (name: string, shape: number[]): InputSpec => ({ name, dtype: 'int32', shape });

const cases: Case[] = [
  { name: 'add broadcast', rule: 'add', inputs: [F('a', [2, 3]), F('b', [3])], f: (o, x) => o.add(x.a, x.b) },
  { name: 'sub broadcast col', rule: 'sub', inputs: [F('a', [2, 3]), F('b', [2, 1])], f: (o, x) => o.sub(x.a, x.b) },
  { name: 'mul broadcast', rule: 'mul', inputs: [F('a', [2, 1, 3]), F('b', [4, 1])], f: (o, x) => o.mul(x.a, x.b) },
  { name: 'div', rule: 'div', inputs: [F('a', [2, 3]), F('b', [1, 3])], positive: true, f: (o, x) => o.div(x.a, x.b) },
  { name: 'pow', rule: 'pow', inputs: [F('a', [3]), F('b', [3])], positive: true, f: (o, x) => o.pow(x.a, x.b) },
  { name: 'maximum', rule: 'maximum', inputs: [F('a', [4]), F('b', [4])], f: (o, x) => o.maximum(x.a, x.b) },
  { name: 'minimum', rule: 'minimum', inputs: [F('a', [2, 2]), F('b', [2])], f: (o, x) => o.minimum(x.a, x.b) },
  { name: 'neg', rule: 'neg', inputs: [F('a', [3])], f: (o, x) => o.neg(x.a) },
  { name: 'exp', rule: 'exp', inputs: [F('a', [3])], f: (o, x) => o.exp(x.a) },
  { name: 'log', rule: 'log', inputs: [F('a', [3])], positive: true, f: (o, x) => o.log(x.a) },
  { name: 'sqrt', rule: 'sqrt', inputs: [F('a', [3])], positive: true, f: (o, x) => o.sqrt(x.a) },
  { name: 'abs', rule: 'abs', inputs: [F('a', [4])], f: (o, x) => o.abs(x.a) },
  { name: 'tanh', rule: 'tanh', inputs: [F('a', [3])], f: (o, x) => o.tanh(x.a) },
  { name: 'sigmoid', rule: 'sigmoid', inputs: [F('a', [3])], f: (o, x) => o.sigmoid(x.a) },
  { name: 'sin', rule: 'sin', inputs: [F('a', [3])], f: (o, x) => o.sin(x.a) },
  { name: 'cos', rule: 'cos', inputs: [F('a', [3])], f: (o, x) => o.cos(x.a) },
  { name: 'cast f64->f32->f64', rule: 'cast', inputs: [F('a', [3])], f: (o, x) => o.cast(o.mul(o.cast(x.a, 'float32'), o.scalar(1, 'float32')), 'float64') },
  // x + stopGradient(x²) must differentiate like x alone: checked against the finite difference of `ref`.
  { name: 'stopGradient', rule: 'stopGradient', inputs: [F('a', [3])], f: (o, x) => o.add(x.a, o.stopGradient(o.mul(x.a, x.a))), ref: (_o, x) => x.a },
  { name: 'where', rule: 'where', inputs: [F('a', [2, 3]), F('b', [3])], f: (o, x) => o.where(o.greater(x.a, o.scalar(0, 'float64')), x.a, x.b) },
  { name: 'matmul batched+broadcast', rule: 'matmul', inputs: [F('a', [2, 3, 4]), F('b', [4, 2])], f: (o, x) => o.matmul(x.a, x.b) },
  { name: 'sum multi-axis', rule: 'sum', inputs: [F('a', [2, 3, 4])], f: (o, x) => o.sum(x.a, [0, 2]) },
  { name: 'mean keepDims', rule: 'mean', inputs: [F('a', [2, 3, 4])], f: (o, x) => o.mean(x.a, [1, -1], true) },
  { name: 'max', rule: 'max', inputs: [F('a', [3, 4])], f: (o, x) => o.max(x.a, [1]) },
  { name: 'softmax', rule: 'softmax', inputs: [F('a', [2, 5])], f: (o, x) => o.softmax(x.a, -1) },
  { name: 'logSoftmax axis0', rule: 'logSoftmax', inputs: [F('a', [3, 2])], f: (o, x) => o.logSoftmax(x.a, 0) },
  // Token logprobs: picking entries of a log-softmax along its axis folds the scatter into the
  // log-softmax rule (autodiff.ts); the same tensor also used elsewhere takes the general rule.
  {
    name: 'logSoftmax picked (folded scatter)',
    rule: 'logSoftmax',
    inputs: [F('a', [2, 3, 4]), I('i', [2, 3, 1])],
    ints: { i: [0, 3, 3, 1, 1, 2] },
    f: (o, x) => o.gatherElements(o.logSoftmax(x.a, -1), x.i, 2),
  },
  {
    name: 'logSoftmax picked and reused',
    rule: 'logSoftmax',
    inputs: [F('a', [2, 4]), I('i', [2, 1])],
    ints: { i: [2, 0] },
    f: (o, x) => {
      const lp = o.logSoftmax(x.a, 1);
      return o.add(o.gatherElements(lp, x.i, 1), o.sum(o.mul(o.exp(lp), lp), [1], true));
    },
  },
  { name: 'reshape with -1', rule: 'reshape', inputs: [F('a', [2, 6])], f: (o, x) => o.mul(o.reshape(x.a, [3, -1]), o.reshape(x.a, [3, 4])) },
  { name: 'reshapeLike (via squeeze grad)', rule: 'reshapeLike', inputs: [F('a', [3, 1])], f: (o, x) => o.exp(o.squeeze(x.a, [1])) },
  { name: 'transpose', rule: 'transpose', inputs: [F('a', [2, 3, 4])], f: (o, x) => o.transpose(x.a, [2, 0, 1]) },
  { name: 'concat', rule: 'concat', inputs: [F('a', [2, 3]), F('b', [2, 2])], f: (o, x) => o.concat([x.a, x.b, x.a], 1) },
  { name: 'slice negative', rule: 'slice', inputs: [F('a', [4, 5])], f: (o, x) => o.slice(x.a, [1, -3], [3, 1e9], [0, 1]) },
  { name: 'unsqueeze', rule: 'unsqueeze', inputs: [F('a', [3])], f: (o, x) => o.mul(o.unsqueeze(x.a, [0]), o.unsqueeze(x.a, [1])) },
  { name: 'squeeze', rule: 'squeeze', inputs: [F('a', [1, 3])], f: (o, x) => o.sin(o.squeeze(x.a, [0])) },
  { name: 'expandAs', rule: 'expandAs', inputs: [F('a', [3, 1]), F('b', [2, 3, 4])], f: (o, x) => o.mul(o.expandAs(x.a, x.b), x.b) },
  { name: 'gather repeated', rule: 'gather', inputs: [F('a', [5, 3]), I('i', [2, 3])], ints: { i: [0, 4, 4, 1, 4, 0] }, f: (o, x) => o.gather(x.a, x.i) },
  {
    name: 'gatherElements',
    rule: 'gatherElements',
    inputs: [F('a', [2, 4]), I('i', [2, 3])],
    ints: { i: [0, 3, 3, 1, 1, 2] },
    f: (o, x) => o.gatherElements(x.a, x.i, 1),
  },
  // 7 rows in 5 parts of ceil(7/5) = 2: the fourth has 1 row, the fifth none.
  {
    name: 'chunk (uneven, empty last part)',
    rule: 'chunk',
    inputs: [F('a', [7, 3])],
    f: (o, x) =>
      o.concat(
        [0, 1, 2, 3, 4].map((i) => o.mul(o.chunk!(x.a, 0, i, 5), o.scalar(i + 1, 'float64'))),
        0,
      ),
  },
  { name: 'after (value and gradient of x only)', rule: 'after', inputs: [F('a', [2, 3]), F('b', [4])], f: (o, x) => o.exp(o.after!(x.a, o.mul(x.b, x.b))) },
  // x · Wᵀ with W block-quantized (model.quantize_base): dx = g · W, W dequantized in the backward pass.
  // int4, K = 40 (two blocks of 32, the second padded), N = 3; the codes (uint8) and scales are frozen inputs.
  {
    name: 'qmatmul (MatMulNBits, 4-bit codes)',
    rule: 'qmatmul',
    inputs: [F('x', [2, 40]), { name: 'codes', dtype: 'uint8', shape: [3, 2, 16] }, { name: 'scales', dtype: 'float64', shape: [6] }],
    ints: { codes: Array.from({ length: 96 }, (_, i) => (i * 37 + 11) % 256) },
    frozen: ['scales'],
    f: (o, x) => {
      const g = o as GraphOps;
      const w = g.record('dequantNBits', [x.codes, x.scales], { N: 3, K: 40, bits: 4, blockSize: 32 }, 'float64', [3, 40]);
      return g.record('qmatmul', [x.x, w.inputs[0]!, w.inputs[1]!], { N: 3, K: 40, bits: 4, blockSize: 32, accuracyLevel: 0 }, 'float64', [2, 3]);
    },
  },
  // Picked log-softmax of a matmul in three recompute groups (as the chunked LM head): the
  // backward reads clones of each group, entered after the previous group's gradient.
  {
    name: 'recompute groups (chunked picked log-softmax)',
    rule: 'recomputeEntry',
    inputs: [F('a', [5, 3]), F('w', [3, 4]), I('i', [5, 1])],
    ints: { i: [0, 3, 3, 1, 2] },
    f: (o, x) => {
      let prev: GNode | undefined;
      const parts = [0, 1, 2].map((k) => {
        let h = o.chunk!(x.a, 0, k, 3);
        if (prev) h = o.after!(h, prev);
        const r = o.recompute!([h], ([hc]) => {
          const lsm = o.logSoftmax(o.matmul(hc, x.w), -1);
          return o.add(o.gatherElements(lsm, o.chunk!(x.i, 0, k, 3), 1), o.sum(o.mul(o.exp(lsm), lsm), [1], true));
        });
        prev = r;
        return r;
      });
      return o.concat(parts, 0);
    },
  },
];

const NO_GRADIENT = [
  'const',
  'input',
  'range',
  'greater',
  'less',
  'equal',
  'zerosLike',
  'dimProduct',
  'dequantNBits',
  'quantWeightT',
  'gatherNBits',
  'gatedSlice',
];

function rng(seed: number) {
  let s = seed;
  return () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
}

function feedsFor(c: Case, seed: number): Record<string, HostTensor> {
  const r = rng(seed);
  const feeds: Record<string, HostTensor> = {};
  for (const s of c.inputs) {
    const shape = s.shape as number[];
    const n = shape.reduce((a, b) => a * b, 1);
    if (s.dtype === 'int32') feeds[s.name] = { dtype: 'int32', shape, data: Int32Array.from(c.ints![s.name]) };
    else if (s.dtype === 'uint8') feeds[s.name] = { dtype: 'uint8', shape, data: Uint8Array.from(c.ints![s.name]) };
    else feeds[s.name] = { dtype: 'float64', shape, data: Float64Array.from({ length: n }, () => (c.positive ? 0.5 + r() : r() * 2 - 1)) };
  }
  return feeds;
}

describe('gradient rules: finite differences in float64', () => {
  it('every rule in the table has a case (or is declared non-differentiable)', () => {
    const covered = new Set(cases.map((c) => c.rule));
    const missing = Object.keys(gradientRules).filter((op) => !covered.has(op) && !NO_GRADIENT.includes(op));
    expect(missing).toEqual([]);
  });

  for (const c of cases) {
    it(c.name, () => {
      // loss = sum(f(x) * w) with fixed random w, so every output element matters.
      const floatInputs = c.inputs.filter((s) => s.dtype === 'float64' && !c.frozen?.includes(s.name)).map((s) => s.name);
      let outShape: number[] = [];
      const build = (fn: Case['f']) =>
        traceGraph(c.inputs, (o, x) => {
          const y = fn(o, x);
          outShape = y.shape as number[];
          const n = outShape.reduce((a, b) => a * b, 1);
          const w = o.constant(
            Array.from({ length: n }, (_, i) => Math.cos(1.3 * i + 0.4)),
            outShape,
            'float64',
          );
          return {
            loss: o.sum(
              o.mul(y, w),
              outShape.map((_, i) => i),
            ),
          };
        });
      const g = build(c.f);
      const fdGraph = c.ref ? build(c.ref) : g;
      const gg = withGradients(g, 'loss', floatInputs);
      const feeds = feedsFor(c, 7);
      const analytic = evaluate(gg, feeds);
      const eps = 1e-6;
      for (const name of floatInputs) {
        const base = feeds[name].data as Float64Array;
        const grad = analytic[`grad.${name}`].data as Float64Array;
        expect(grad.length).toBe(base.length);
        for (let i = 0; i < base.length; i++) {
          const plus = Float64Array.from(base);
          plus[i] += eps;
          const minus = Float64Array.from(base);
          minus[i] -= eps;
          const lp = evaluate(fdGraph, { ...feeds, [name]: { ...feeds[name], data: plus } }).loss.data[0] as number;
          const lm = evaluate(fdGraph, { ...feeds, [name]: { ...feeds[name], data: minus } }).loss.data[0] as number;
          const fd = (lp - lm) / (2 * eps);
          expect(Math.abs(grad[i] - fd), `${c.name}: d loss/d ${name}[${i}] analytic ${grad[i]} vs fd ${fd}`).toBeLessThan(1e-6 * Math.max(1, Math.abs(fd)));
        }
      }
    });
  }
});
