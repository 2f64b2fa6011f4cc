/**
 * The tfjs interpreter of the op set: the same programs, run eagerly with tfjs's own autodiff.
 * It is the independent oracle in tests and an optional training backend (`backend: tfjs`).
 * Backends in order of preference: tfjs-node-gpu, tfjs-node (optional dependencies; absent
 * when their libtensorflow download failed), wasm, cpu.
 */
import * as tf from '@tensorflow/tfjs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type { DType, Dim, Ops, Shape } from './ops';
import type { HostTensor } from './host';

const require = createRequire(import.meta.url);

type Tensor = tf.Tensor;

const BACKENDS = ['tensorflow-gpu', 'tensorflow', 'wasm', 'cpu'] as const;
let chosen: string | null = null;
const probe: Record<string, { available: boolean; error?: string }> = {};

async function tryBackend(name: string): Promise<boolean> {
  try {
    if (name === 'tensorflow-gpu') await import('@tensorflow/tfjs-node-gpu' as string);
    else if (name === 'tensorflow') await import('@tensorflow/tfjs-node' as string);
    else if (name === 'wasm') {
      const wasm = await import('@tensorflow/tfjs-backend-wasm');
      const dir = dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json'));
      wasm.setWasmPaths(`${dir}/dist/`);
    }
    const ok = await tf.setBackend(name === 'tensorflow-gpu' ? 'tensorflow' : name);
    if (!ok) throw new Error(`tf.setBackend('${name}') returned false`);
    await tf.ready();
    probe[name] = { available: true };
    return true;
  } catch (e) {
    probe[name] = { available: false, error: e instanceof Error ? e.message.split('\n')[0] : String(e) };
    return false;
  }
}

/** Pick the best tfjs backend present (or `prefer`, if it loads). Returns its name. */
export async function initTfjs(prefer?: string): Promise<string> {
  if (chosen && (!prefer || prefer === chosen)) return chosen;
  const order = prefer ? [prefer, ...BACKENDS.filter((b) => b !== prefer)] : [...BACKENDS];
  for (const b of order) {
    if (await tryBackend(b)) {
      chosen = b;
      return b;
    }
  }
  throw new Error('tfjs: no backend could be initialised');
}

export async function tfjsInfo(): Promise<{ backends: { name: string; available: boolean; error?: string }[]; chosen: string }> {
  const current = await initTfjs();
  for (const b of BACKENDS) if (!probe[b]) await tryBackend(b);
  await tf.setBackend(current === 'tensorflow-gpu' ? 'tensorflow' : current);
  return { backends: BACKENDS.map((name) => ({ name, ...probe[name] })), chosen: current };
}

const tfType = (d: DType): tf.DataType => (d === 'float32' || d === 'float64' ? 'float32' : d === 'bool' ? 'bool' : 'int32');

function num(d: Dim, op: string): number {
  if (typeof d !== 'number') throw new Error(`tfjs ${op}: symbolic dim '${d}' (tfjs runs eagerly on concrete shapes)`);
  return d;
}

/** tf.gather whose gradient works on every backend (wasm lacks UnsortedSegmentSum). */
const gatherRows = tf.customGrad(((table: Tensor, indices: Tensor, save: tf.GradSaveFunc) => {
  save([indices]);
  const value = tf.gather(table, indices as tf.Tensor);
  const rows = table.shape[0];
  const rest = table.shape.slice(1);
  return {
    value,
    gradFunc: (dy: Tensor, saved: Tensor[]) => {
      const idx = tf.reshape(saved[0], [-1]) as tf.Tensor1D;
      const oneHot = tf.oneHot(tf.cast(idx, 'int32'), rows); // [N, V]
      const g2 = tf.reshape(dy, [idx.shape[0], -1]); // [N, R]
      const dTable = tf.reshape(tf.matMul(oneHot.toFloat(), g2, true, false), [rows, ...rest]);
      return [dTable, tf.zerosLike(saved[0])];
    },
  };
}) as unknown as Parameters<typeof tf.customGrad>[0]) as unknown as (table: Tensor, indices: Tensor) => Tensor;

// Comparisons have no gradient; tfjs needs that said explicitly when they sit on a tape path.
for (const kernelName of ['Greater', 'Less', 'Equal', 'GreaterEqual', 'LessEqual']) {
  if (!tf.getGradient(kernelName)) {
    tf.registerGradient({
      kernelName,
      inputsToSave: ['a', 'b'],
      gradFunc: (_dy: Tensor | Tensor[], saved: Tensor[]) => ({ a: () => tf.zerosLike(saved[0]), b: () => tf.zerosLike(saved[1]) }),
    });
  }
}

const identityNoGrad = tf.customGrad(((x: Tensor) => ({ value: tf.clone(x), gradFunc: (dy: Tensor) => tf.zerosLike(dy) })) as unknown as Parameters<
  typeof tf.customGrad
>[0]) as unknown as (x: Tensor) => Tensor;

/** The op set's dtype of a tfjs tensor (tfjs has bool, int32 and float32 only). */
const ourType = (x: Tensor): DType => (x.dtype === 'bool' ? 'bool' : x.dtype === 'int32' ? 'int32' : 'float32');

/**
 * The ops that are tfjs's function of the same name with the same arguments: two lists (the
 * elementwise math; comparisons, reductions and shape ops) instead of a method each. The
 * annotation of `sameAsTf` type-checks every one of them against the op set.
 */
const TF_MATH = ['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'neg', 'exp', 'log', 'sqrt', 'abs', 'tanh', 'sigmoid', 'sin', 'cos'] as const;
const TF_OTHER = ['greater', 'less', 'equal', 'sum', 'mean', 'max', 'transpose', 'concat'] as const;
type SameAsTf = (typeof TF_MATH)[number] | (typeof TF_OTHER)[number];
const sameAsTf: Pick<Ops<Tensor>, SameAsTf> = tf;

/** The base class whose prototype holds those functions as they are (TfjsOps writes the other ops). */
const TfFunctions = class {} as new () => Pick<Ops<Tensor>, SameAsTf>;
for (const name of [...TF_MATH, ...TF_OTHER]) Object.defineProperty(TfFunctions.prototype, name, { value: sameAsTf[name], writable: true, configurable: true });

export class TfjsOps extends TfFunctions implements Ops<Tensor> {
  readonly kind = 'tfjs';
  shape(x: Tensor): Shape {
    return x.shape;
  }
  dtype(x: Tensor): DType {
    return ourType(x);
  }
  scalar(value: number, dtype: DType = 'float32'): Tensor {
    return tf.scalar(value, tfType(dtype));
  }
  constant(values: ArrayLike<number>, shape: number[], dtype: DType = 'float32'): Tensor {
    return tf.tensor(Array.from(values), shape, tfType(dtype));
  }
  range(n: Dim | Tensor): Tensor {
    const len = typeof n === 'object' ? Number((n as Tensor).dataSync()[0]) : num(n as Dim, 'range');
    return tf.range(0, len, 1, 'int32');
  }
  cast(x: Tensor, dtype: DType): Tensor {
    return x.dtype === tfType(dtype) ? x : tf.cast(x, tfType(dtype));
  }
  stopGradient(x: Tensor): Tensor {
    return identityNoGrad(x);
  }
  where(cond: Tensor, a: Tensor, b: Tensor): Tensor {
    const shape = tf
      .broadcastArgs(tf.broadcastArgs(tf.tensor1d(cond.shape, 'int32'), tf.tensor1d(a.shape, 'int32')), tf.tensor1d(b.shape, 'int32'))
      .arraySync() as number[];
    const bc = (t: Tensor) => (t.shape.length === shape.length && t.shape.every((d, i) => d === shape[i]) ? t : tf.broadcastTo(t, shape));
    return tf.where(bc(cond), bc(a), bc(b));
  }
  matmul(a: Tensor, b: Tensor): Tensor {
    if (a.rank > 2 && b.rank === 2) {
      const lead = a.shape.slice(0, -1);
      const out = tf.matMul(tf.reshape(a, [-1, a.shape[a.rank - 1]]) as tf.Tensor2D, b as tf.Tensor2D);
      return tf.reshape(out, [...lead, b.shape[1] as number]);
    }
    // Broadcast the batch dims explicitly (tfjs's own matMul broadcasting is unreliable for
    // rank > 3 with a size-1 middle dim, measured against the float64 reference).
    const ba = a.shape.slice(0, -2),
      bb = b.shape.slice(0, -2);
    const r = Math.max(ba.length, bb.length);
    const batch = Array.from({ length: r }, (_, i) => Math.max(ba[ba.length - r + i] ?? 1, bb[bb.length - r + i] ?? 1));
    const fit = (t: Tensor, bs: number[]) => {
      const same = bs.length === r && bs.every((d, i) => d === batch[i]);
      return same ? t : tf.add(t, tf.zeros([...batch, ...t.shape.slice(-2)])); // (broadcastTo has no rank-5 gradient)
    };
    return tf.matMul(fit(a, ba), fit(b, bb));
  }
  softmax(x: Tensor, axis = -1): Tensor {
    return tf.exp(this.logSoftmax(x, axis));
  }
  logSoftmax(x: Tensor, axis = -1): Tensor {
    return tf.sub(x, tf.logSumExp(x, axis, true));
  }
  reshape(x: Tensor, shape: Shape): Tensor {
    return tf.reshape(
      x,
      shape.map((d) => num(d, 'reshape')),
    );
  }
  slice(x: Tensor, starts: number[], ends: number[], axes: number[]): Tensor {
    const begin = x.shape.map(() => 0);
    const size = x.shape.slice();
    axes.forEach((a0, i) => {
      const a = a0 < 0 ? a0 + x.rank : a0;
      const d = x.shape[a];
      const cl = (v: number) => Math.max(0, Math.min(d, v < 0 ? v + d : v));
      const s = cl(starts[i]),
        e = Math.max(s, cl(Math.min(ends[i], 2 ** 31 - 1)));
      begin[a] = s;
      size[a] = e - s;
    });
    return tf.slice(x, begin, size);
  }
  unsqueeze(x: Tensor, axes: number[]): Tensor {
    const r = x.rank + axes.length;
    const ax = axes.map((a) => (a < 0 ? a + r : a)).sort((p, q) => p - q);
    let y = x;
    for (const a of ax) y = tf.expandDims(y, a);
    return y;
  }
  squeeze(x: Tensor, axes: number[]): Tensor {
    return tf.squeeze(
      x,
      axes.map((a) => (a < 0 ? a + x.rank : a)),
    );
  }
  expandAs(x: Tensor, like: Tensor): Tensor {
    // Float: add zeros (differentiable at any rank; broadcastTo's tile gradient stops at rank 4).
    return x.dtype === 'float32' ? tf.add(x, tf.zeros(like.shape)) : tf.broadcastTo(x, like.shape);
  }
  gather(table: Tensor, indices: Tensor): Tensor {
    return gatherRows(table, indices);
  }
  gatherElements(x: Tensor, indices: Tensor, axis: number): Tensor {
    // One-hot select along the axis (tfjs has no GatherElements); gradients follow from mul/sum.
    const a = axis < 0 ? axis + x.rank : axis;
    const last = x.rank - 1;
    const perm = [...Array(x.rank).keys()];
    [perm[a], perm[last]] = [perm[last], perm[a]];
    const xt = a === last ? x : tf.transpose(x, perm);
    const it = a === last ? indices : tf.transpose(indices, perm);
    const depth = xt.shape[last];
    const oh = tf.oneHot(tf.cast(it, 'int32'), depth); // [..., K, V]
    const picked = tf.sum(tf.mul(tf.expandDims(xt, -2), oh), -1);
    return a === last ? picked : tf.transpose(picked, perm);
  }
}

export function toTf(t: HostTensor): Tensor {
  const data = t.data instanceof BigInt64Array ? Int32Array.from(t.data, Number) : t.data instanceof Float64Array ? Float32Array.from(t.data) : t.data;
  return tf.tensor(data as Float32Array | Int32Array | Uint8Array, t.shape, tfType(t.dtype));
}

export function fromTf(x: Tensor): HostTensor {
  const data = x.dataSync();
  const dtype = ourType(x);
  return { dtype, shape: x.shape.slice(), data: dtype === 'bool' ? Uint8Array.from(data) : (data as Float32Array | Int32Array) };
}

export type TfProgram = (o: Ops<Tensor>, x: Record<string, Tensor>) => Record<string, Tensor>;

/**
 * Run a program eagerly. With `grad`, also returns `grad.<name>` of the scalar output
 * `grad.loss` with respect to each input in `grad.wrt` (tfjs autodiff).
 */
export function runTfjs(program: TfProgram, feeds: Record<string, HostTensor>, grad?: { loss: string; wrt: string[] }): Record<string, HostTensor> {
  const o = new TfjsOps();
  const result: Record<string, HostTensor> = {};
  tf.tidy(() => {
    const x: Record<string, Tensor> = {};
    for (const [k, v] of Object.entries(feeds)) x[k] = toTf(v);
    if (!grad) {
      for (const [k, v] of Object.entries(program(o, x))) result[k] = fromTf(v);
      return;
    }
    let outs: Record<string, Tensor>;
    const f = (...ws: Tensor[]) => {
      const xx = { ...x };
      grad.wrt.forEach((name, i) => {
        xx[name] = ws[i];
      });
      outs = program(o, xx);
      for (const [k, v] of Object.entries(outs)) result[k] = fromTf(v); // read now: grads() disposes them
      const loss = outs[grad.loss];
      if (!loss) throw new Error(`runTfjs: program has no output '${grad.loss}'`);
      return loss as tf.Scalar;
    };
    const gs = tf.grads(f)(grad.wrt.map((n) => x[n]));
    grad.wrt.forEach((n, i) => {
      result[`grad.${n}`] = fromTf(gs[i]);
    });
  });
  return result;
}
