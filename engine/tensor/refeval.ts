/**
 * A plain-JS evaluator of the graph IR in float64: the numerical reference for tests
 * (finite-difference gradient checks, ONNX Runtime agreement). Not fast; exact.
 */
import type { Dim, DType } from './ops';
import { reachable, toMonomial, type GNode, type Graph } from './graph';
import { allocData, numel, type HostTensor } from './host';

interface Arr {
  shape: number[];
  data: Float64Array;
}

function strides(shape: number[]): number[] {
  const s = new Array(shape.length).fill(1);
  for (let i = shape.length - 2; i >= 0; i--) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

function bshape(...shapes: number[][]): number[] {
  const r = Math.max(...shapes.map((s) => s.length));
  const out: number[] = [];
  for (let i = 0; i < r; i++) {
    let d = 1;
    for (const s of shapes) {
      const e = s[s.length - r + i] ?? 1;
      if (e !== 1) {
        if (d !== 1 && d !== e) throw new Error(`refeval: cannot broadcast ${shapes.map((x) => `[${x}]`).join(' vs ')}`);
        d = e;
      }
    }
    out.push(d);
  }
  return out;
}

/** For each flat index of `out`, the flat index into `src` under broadcasting. */
function bindex(src: number[], out: number[]): Int32Array {
  const n = numel(out);
  const idx = new Int32Array(n);
  const r = out.length;
  const ss = strides(src);
  const pad = r - src.length;
  const os = strides(out);
  for (let i = 0; i < n; i++) {
    let rem = i,
      j = 0;
    for (let k = 0; k < r; k++) {
      const c = Math.floor(rem / os[k]);
      rem -= c * os[k];
      const sk = k - pad;
      if (sk >= 0 && src[sk] !== 1) j += c * ss[sk];
    }
    idx[i] = j;
  }
  return idx;
}

function map(ins: Arr[], f: (...v: number[]) => number): Arr {
  const shape = bshape(...ins.map((a) => a.shape));
  const ix = ins.map((a) => bindex(a.shape, shape));
  const n = numel(shape);
  const data = new Float64Array(n);
  const v = new Array(ins.length);
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < ins.length; k++) v[k] = ins[k].data[ix[k][i]];
    data[i] = f(...v);
  }
  return { shape, data };
}

function reduce(a: Arr, axes: number[], keep: boolean, init: number, f: (acc: number, v: number) => number): Arr {
  const kshape = a.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const ks = strides(kshape);
  const as = strides(a.shape);
  const out = new Float64Array(numel(kshape)).fill(init);
  for (let i = 0; i < a.data.length; i++) {
    let rem = i,
      j = 0;
    for (let k = 0; k < a.shape.length; k++) {
      const c = Math.floor(rem / as[k]);
      rem -= c * as[k];
      if (!axes.includes(k)) j += c * ks[k];
    }
    out[j] = f(out[j], a.data[i]);
  }
  return { shape: keep ? kshape : a.shape.filter((_, i) => !axes.includes(i)), data: out };
}

function transpose(a: Arr, perm: number[]): Arr {
  const shape = perm.map((p) => a.shape[p]);
  const as = strides(a.shape);
  const os = strides(shape);
  const out = new Float64Array(a.data.length);
  for (let i = 0; i < out.length; i++) {
    let rem = i,
      j = 0;
    for (let k = 0; k < shape.length; k++) {
      const c = Math.floor(rem / os[k]);
      rem -= c * os[k];
      j += c * as[perm[k]];
    }
    out[i] = a.data[j];
  }
  return { shape, data: out };
}

function matmul(a: Arr, b: Arr): Arr {
  const m = a.shape[a.shape.length - 2],
    k = a.shape[a.shape.length - 1],
    n = b.shape[b.shape.length - 1];
  if (b.shape[b.shape.length - 2] !== k) throw new Error(`refeval: matmul inner dims differ [${a.shape}] x [${b.shape}]`);
  const batch = bshape(a.shape.slice(0, -2), b.shape.slice(0, -2));
  const nb = numel(batch);
  const ia = bindex(a.shape.slice(0, -2), batch),
    ib = bindex(b.shape.slice(0, -2), batch);
  const out = new Float64Array(nb * m * n);
  for (let t = 0; t < nb; t++) {
    const oa = ia[t] * m * k,
      ob = ib[t] * k * n,
      oo = t * m * n;
    for (let i = 0; i < m; i++) {
      for (let p = 0; p < k; p++) {
        const av = a.data[oa + i * k + p];
        if (av === 0) continue;
        for (let j = 0; j < n; j++) out[oo + i * n + j] += av * b.data[ob + p * n + j];
      }
    }
  }
  return { shape: [...batch, m, n], data: out };
}

/** Iterate over all index tuples of `shape` with a callback getting (flat, coords). */
function forEachIndex(shape: number[], f: (flat: number, c: number[]) => void): void {
  const n = numel(shape);
  const c = new Array(shape.length).fill(0);
  for (let i = 0; i < n; i++) {
    f(i, c);
    for (let k = shape.length - 1; k >= 0; k--) {
      if (++c[k] < shape[k]) break;
      c[k] = 0;
    }
  }
}

function flatOf(c: number[], st: number[]): number {
  let j = 0;
  for (let k = 0; k < c.length; k++) j += c[k] * st[k];
  return j;
}

function softmax(a: Arr, axis: number, log: boolean): Arr {
  const m = reduce(a, [axis], true, -Infinity, Math.max);
  const e = map([a, m], (x, y) => Math.exp(x - y));
  const s = reduce(e, [axis], true, 0, (p, q) => p + q);
  return log ? map([a, m, s], (x, y, z) => x - y - Math.log(z)) : map([e, s], (x, y) => x / y);
}

function normSlice(d: number, s: number, e: number): [number, number] {
  const cl = (v: number) => Math.max(0, Math.min(d, v < 0 ? v + d : v));
  return [cl(s), Math.max(cl(s), cl(e))];
}

/** The elementwise ops as functions of one element of each input (bool results as 1/0); `map` broadcasts them. */
const ELEMENTWISE: Record<string, (...v: number[]) => number> = {
  add: (p, q) => p + q,
  sub: (p, q) => p - q,
  mul: (p, q) => p * q,
  div: (p, q) => p / q,
  pow: (p, q) => Math.pow(p, q),
  maximum: Math.max,
  minimum: Math.min,
  neg: (p) => -p,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  abs: Math.abs,
  tanh: Math.tanh,
  sigmoid: (p) => 1 / (1 + Math.exp(-p)),
  sin: Math.sin,
  cos: Math.cos,
  greater: (p, q) => (p > q ? 1 : 0),
  less: (p, q) => (p < q ? 1 : 0),
  equal: (p, q) => (p === q ? 1 : 0),
  where: (c, p, q) => (c ? p : q),
};

export function evaluate(graph: Graph, feeds: Record<string, HostTensor>, wanted?: string[]): Record<string, HostTensor> {
  const env = new Map<string, number>();
  const vals = new Map<number, Arr>();
  const resolve = (d: Dim): number => {
    if (typeof d === 'number') return d;
    const v = env.get(d);
    if (v !== undefined) return v;
    const m = toMonomial(d)!;
    let p = m.coef;
    for (const s of m.syms) {
      const x = env.get(s);
      if (x === undefined) throw new Error(`refeval: unknown dim '${s}'`);
      p *= x;
    }
    return p;
  };
  const bind = (n: GNode, a: Arr) => {
    n.shape.forEach((d, i) => {
      if (typeof d === 'string' && !env.has(d)) env.set(d, a.shape[i]);
    });
  };
  const need = reachable(
    (wanted ?? Object.keys(graph.outputs)).map((k) => {
      const n = graph.outputs[k];
      if (!n) throw new Error(`refeval: no output '${k}'`);
      return n;
    }),
  );
  for (const n of graph.nodes) {
    if (!need.has(n.id)) continue;
    const x = n.inputs.map((i) => vals.get(i.id)!);
    const a = n.attrs as Record<string, any>;
    let r: Arr;
    const elementwise = Object.hasOwn(ELEMENTWISE, n.op) ? ELEMENTWISE[n.op] : undefined;
    if (elementwise) r = map(x, elementwise);
    else
      switch (n.op) {
        case 'input': {
          const f = feeds[a.name];
          if (!f) throw new Error(`refeval: missing feed '${a.name}'`);
          if (f.shape.length !== n.shape.length) throw new Error(`refeval: feed '${a.name}' has rank ${f.shape.length}, expected ${n.shape.length}`);
          n.shape.forEach((d, i) => {
            if (typeof d === 'number' && d !== f.shape[i]) throw new Error(`refeval: feed '${a.name}' dim ${i} is ${f.shape[i]}, expected ${d}`);
          });
          r = { shape: f.shape.slice(), data: Float64Array.from(f.data as ArrayLike<number>, Number) };
          break;
        }
        case 'const':
          r = { shape: (n.shape as number[]).slice(), data: Float64Array.from(a.values) };
          break;
        case 'range': {
          const len = x.length ? x[0].data[0] : resolve(a.n);
          r = { shape: [len], data: Float64Array.from({ length: len }, (_, i) => i) };
          break;
        }
        case 'cast':
          r = map(x, n.dtype === 'bool' ? (p) => (p !== 0 ? 1 : 0) : n.dtype.startsWith('int') ? Math.trunc : (p) => p);
          break;
        case 'stopGradient':
          r = x[0];
          break;
        case 'matmul':
          r = matmul(x[0], x[1]);
          break;
        case 'sum':
          r = reduce(x[0], a.axes, a.keepDims, 0, (p, q) => p + q);
          break;
        case 'mean': {
          const s = reduce(x[0], a.axes, a.keepDims, 0, (p, q) => p + q);
          const cnt = (a.axes as number[]).reduce((p, ax) => p * x[0].shape[ax], 1);
          r = { shape: s.shape, data: s.data.map((v) => v / cnt) };
          break;
        }
        case 'max':
          r = reduce(x[0], a.axes, a.keepDims, -Infinity, Math.max);
          break;
        case 'softmax':
          r = softmax(x[0], a.axis, false);
          break;
        case 'logSoftmax':
          r = softmax(x[0], a.axis, true);
          break;
        case 'reshape': {
          const tgt = (a.shape as Dim[]).map((d) => (d === -1 ? -1 : resolve(d)));
          const known = tgt.filter((d) => d !== -1).reduce((p, q) => p * q, 1);
          const shape = tgt.map((d) => (d === -1 ? x[0].data.length / known : d));
          if (numel(shape) !== x[0].data.length) throw new Error(`refeval: reshape [${x[0].shape}] to [${shape}]`);
          r = { shape, data: x[0].data };
          break;
        }
        case 'reshapeLike':
          r = { shape: x[1].shape.slice(), data: x[0].data };
          break;
        case 'transpose':
          r = transpose(x[0], a.perm);
          break;
        case 'concat': {
          const ax = a.axis as number;
          const shape = x[0].shape.slice();
          shape[ax] = x.reduce((p, t) => p + t.shape[ax], 0);
          const out = new Float64Array(numel(shape));
          const os = strides(shape);
          let off = 0;
          for (const t of x) {
            forEachIndex(t.shape, (flat, c) => {
              const cc = c.slice();
              cc[ax] += off;
              out[flatOf(cc, os)] = t.data[flat];
            });
            off += t.shape[ax];
          }
          r = { shape, data: out };
          break;
        }
        case 'concatGrad': {
          const ax = a.axis as number;
          const g = x[0];
          let off = 0;
          for (let i = 0; i < a.index; i++) off += x[1 + i].shape[ax];
          r = sliceArr(g, [off], [off + x[1 + a.index].shape[ax]], [ax]);
          break;
        }
        case 'slice':
        case 'gatedSlice':
          r = sliceArr(x[0], a.starts, a.ends, a.axes);
          break;
        case 'recomputeEntry':
        case 'after':
          r = x[0];
          break;
        case 'chunk': {
          const n0 = x[0].shape[a.axis],
            size = Math.ceil(n0 / a.count);
          r = sliceArr(x[0], [Math.min(n0, a.index * size)], [Math.min(n0, (a.index + 1) * size)], [a.axis]);
          break;
        }
        case 'chunkGrad': {
          const [src, g] = x;
          const size = Math.ceil(src.shape[a.axis] / a.count);
          const out = new Float64Array(src.data.length);
          const os = strides(src.shape);
          forEachIndex(g.shape, (flat, c) => {
            out[
              flatOf(
                c.map((v, k) => (k === a.axis ? v + a.index * size : v)),
                os,
              )
            ] = g.data[flat];
          });
          r = { shape: src.shape.slice(), data: out };
          break;
        }
        case 'sliceGrad': {
          const [src, g] = x;
          const out = new Float64Array(src.data.length);
          const os = strides(src.shape);
          const begin = src.shape.map(() => 0);
          (a.axes as number[]).forEach((ax, i) => {
            begin[ax] = normSlice(src.shape[ax], a.starts[i], a.ends[i])[0];
          });
          forEachIndex(g.shape, (flat, c) => {
            out[
              flatOf(
                c.map((v, k) => v + begin[k]),
                os,
              )
            ] = g.data[flat];
          });
          r = { shape: src.shape.slice(), data: out };
          break;
        }
        case 'unsqueeze':
        case 'squeeze': {
          const shape = n.op === 'unsqueeze' ? insertOnes(x[0].shape, a.axes) : x[0].shape.filter((_, i) => !a.axes.includes(i));
          r = { shape, data: x[0].data };
          break;
        }
        case 'expandAs':
          r = map([x[0], { shape: x[1].shape, data: new Float64Array(x[1].data.length) }], (p) => p);
          break;
        case 'zerosLike':
          r = { shape: x[0].shape.slice(), data: new Float64Array(x[0].data.length) };
          break;
        case 'dimProduct':
          r = { shape: [], data: Float64Array.of((a.axes as number[]).reduce((p, ax) => p * x[0].shape[ax], 1)) };
          break;
        case 'gather': {
          const [t, idx] = x;
          const row = numel(t.shape.slice(1));
          const out = new Float64Array(idx.data.length * row);
          idx.data.forEach((v, i) => {
            const j = v < 0 ? v + t.shape[0] : v;
            if (j < 0 || j >= t.shape[0]) throw new Error(`refeval: gather index ${v} out of range [0, ${t.shape[0]})`);
            out.set(t.data.subarray(j * row, (j + 1) * row), i * row);
          });
          r = { shape: [...idx.shape, ...t.shape.slice(1)], data: out };
          break;
        }
        case 'gatherGrad': {
          const [t, idx, g] = x;
          const row = numel(t.shape.slice(1));
          const out = new Float64Array(t.data.length);
          idx.data.forEach((v, i) => {
            const j = v < 0 ? v + t.shape[0] : v;
            for (let k = 0; k < row; k++) out[j * row + k] += g.data[i * row + k];
          });
          r = { shape: t.shape.slice(), data: out };
          break;
        }
        case 'gatherElements':
        case 'scatterAddLike':
        case 'scatterAddInto': {
          const [src, idx] = x;
          const ax = a.axis as number;
          const ss = strides(src.shape);
          const out = n.op === 'scatterAddInto' ? Float64Array.from(src.data) : new Float64Array(n.op === 'gatherElements' ? idx.data.length : src.data.length);
          forEachIndex(idx.shape, (flat, c) => {
            const cc = c.slice();
            const v = idx.data[flat];
            cc[ax] = v < 0 ? v + src.shape[ax] : v;
            if (n.op === 'gatherElements') out[flat] = src.data[flatOf(cc, ss)];
            else out[flatOf(cc, ss)] += x[2].data[flat];
          });
          r = { shape: n.op === 'gatherElements' ? idx.shape.slice() : src.shape.slice(), data: out };
          break;
        }
        case 'dequantNBits':
        case 'quantWeightT':
        case 'qmatmul': {
          // A block-quantized W [N, K] (engine/model/quantize.ts layout): (q − 2^(bits−1)) · scale.
          const src = n.op === 'qmatmul' ? n : n.op === 'dequantNBits' ? n : n.inputs[0];
          const [codes, scales] = n.op === 'quantWeightT' ? src.inputs.map((i) => vals.get(i.id)!) : n.op === 'qmatmul' ? [x[1], x[2]] : [x[0], x[1]];
          const { N, K, bits, blockSize } = src.attrs as { N: number; K: number; bits: number; blockSize: number };
          const kb = Math.ceil(K / blockSize),
            blob = (blockSize * bits) / 8,
            mid = 2 ** (bits - 1);
          const w = new Float64Array(N * K);
          for (let i = 0; i < N; i++)
            for (let k = 0; k < K; k++) {
              const b = Math.floor(k / blockSize),
                j = k % blockSize;
              const byte = codes!.data[(i * kb + b) * blob + (bits === 8 ? j : j >> 1)]!;
              const q = bits === 8 ? byte : (byte >> ((j & 1) * 4)) & 15;
              w[i * K + k] = (q - mid) * scales!.data[i * kb + b]!;
            }
          const W = { shape: [N, K], data: w };
          r = n.op === 'dequantNBits' ? W : n.op === 'quantWeightT' ? transpose(W, [1, 0]) : matmul(x[0], transpose(W, [1, 0]));
          break;
        }
        case 'gatherNBits': {
          // Rows of a block-quantized table W [N, K]: (q − 2^(bits−1)) · scale for each id.
          const [codes, scales, ids] = x;
          const { N, K, bits, blockSize } = n.attrs as { N: number; K: number; bits: number; blockSize: number };
          const kb = Math.ceil(K / blockSize),
            blob = (blockSize * bits) / 8,
            mid = 2 ** (bits - 1);
          const out = new Float64Array(ids!.data.length * K);
          ids!.data.forEach((id, t) => {
            const i = id < 0 ? id + N : id;
            for (let k = 0; k < K; k++) {
              const b = Math.floor(k / blockSize),
                j = k % blockSize;
              const byte = codes!.data[(i * kb + b) * blob + (bits === 8 ? j : j >> 1)]!;
              const q = bits === 8 ? byte : (byte >> ((j & 1) * 4)) & 15;
              out[t * K + k] = (q - mid) * scales!.data[i * kb + b]!;
            }
          });
          r = { shape: [...ids!.shape, K], data: out };
          break;
        }
        default:
          throw new Error(`refeval: op '${n.op}' is not implemented`);
      }
    bind(n, r);
    vals.set(n.id, r);
  }
  const result: Record<string, HostTensor> = {};
  for (const k of wanted ?? Object.keys(graph.outputs)) {
    const n = graph.outputs[k];
    const v = vals.get(n.id)!;
    result[k] = toHost(v, n.dtype);
  }
  return result;
}

function insertOnes(shape: number[], axes: number[]): number[] {
  const r = shape.length + axes.length;
  const out: number[] = [];
  let j = 0;
  for (let i = 0; i < r; i++) out.push(axes.includes(i) ? 1 : shape[j++]);
  return out;
}

function sliceArr(a: Arr, starts: number[], ends: number[], axes: number[]): Arr {
  const begin = a.shape.map(() => 0);
  const shape = a.shape.slice();
  axes.forEach((ax, i) => {
    const [s, e] = normSlice(a.shape[ax], starts[i], ends[i]);
    begin[ax] = s;
    shape[ax] = e - s;
  });
  const out = new Float64Array(numel(shape));
  const as = strides(a.shape);
  forEachIndex(shape, (flat, c) => {
    out[flat] =
      a.data[
        flatOf(
          c.map((v, k) => v + begin[k]),
          as,
        )
      ];
  });
  return { shape, data: out };
}

function toHost(a: Arr, dtype: DType): HostTensor {
  const data = allocData(dtype, a.data.length);
  if (data instanceof BigInt64Array)
    a.data.forEach((v, i) => {
      data[i] = BigInt(v);
    });
  else (data as Float64Array).set(a.data);
  return { dtype, shape: a.shape.slice(), data };
}
