/**
 * The graph IR: a program over the op set (ops.ts) is recorded into nodes with dtypes and
 * (possibly symbolic) shapes. Shape inference runs as each node is recorded, so a mismatch
 * throws at the op that caused it, naming the op and both shapes.
 *
 * Symbolic dims are strings. A product of symbols (from reshape with -1) is written as sorted
 * factors joined by '*', with an optional numeric coefficient first ("4*batch*seq"). Any other
 * derived dim (e.g. the length after concatenating a KV cache) gets a fresh name; every
 * symbolic dim is registered with a node and axis where it can be read at run time, which is
 * how the ONNX exporter builds runtime shapes.
 */
import type { DType, Dim, Ops, Shape } from './ops';

export interface InputSpec {
  name: string;
  dtype: DType;
  shape: Shape;
}

export interface GNode {
  readonly id: number;
  readonly op: string;
  readonly inputs: GNode[];
  readonly attrs: Record<string, unknown>;
  readonly dtype: DType;
  readonly shape: Shape;
}

export interface Graph {
  inputs: { spec: InputSpec; node: GNode }[];
  /** Every node in topological (recording) order, inputs first. */
  nodes: GNode[];
  outputs: Record<string, GNode>;
  /** Where each symbolic dim can be read at run time. */
  dimSources: Map<string, { node: GNode; axis: number }>;
}

export type Program = (o: Ops<GNode>, x: Record<string, GNode>) => Record<string, GNode>;

/** The ids of the nodes `roots` depend on, themselves included: what evaluating or exporting them needs. */
export function reachable(roots: GNode[]): Set<number> {
  const seen = new Set<number>();
  const stack = roots.slice();
  while (stack.length) {
    const n = stack.pop()!;
    if (seen.has(n.id)) continue;
    seen.add(n.id);
    stack.push(...n.inputs);
  }
  return seen;
}

export function traceGraph(inputs: InputSpec[], program: Program): Graph {
  const g: Graph = { inputs: [], nodes: [], outputs: {}, dimSources: new Map() };
  const o = new GraphOps(g);
  const x: Record<string, GNode> = {};
  for (const spec of inputs) {
    if (x[spec.name]) throw new Error(`traceGraph: duplicate input name '${spec.name}'`);
    const node = o.record('input', [], { name: spec.name }, spec.dtype, spec.shape);
    g.inputs.push({ spec, node });
    x[spec.name] = node;
  }
  const out = program(o, x);
  for (const [name, node] of Object.entries(out)) {
    if (!node || typeof node !== 'object' || !('op' in node)) throw new Error(`traceGraph: output '${name}' is not a graph node`);
    g.outputs[name] = node;
  }
  return g;
}

// ---- dim arithmetic ---------------------------------------------------------------------

const BIG = 2 ** 31 - 1;

interface Monomial {
  coef: number;
  syms: string[];
}

function isMonomialString(d: string): boolean {
  return /^(\d+\*)?[A-Za-z_][\w.]*(\*[A-Za-z_][\w.]*)*$/.test(d);
}

export function toMonomial(d: Dim): Monomial | null {
  if (typeof d === 'number') return { coef: d, syms: [] };
  if (!isMonomialString(d)) return { coef: 1, syms: [d] };
  let coef = 1;
  const syms: string[] = [];
  for (const f of d.split('*')) {
    if (/^\d+$/.test(f)) coef *= Number(f);
    else syms.push(f);
  }
  return { coef, syms: syms.sort() };
}

export function fromMonomial(m: Monomial): Dim {
  if (m.syms.length === 0) return m.coef;
  const s = m.syms.slice().sort().join('*');
  return m.coef === 1 ? s : `${m.coef}*${s}`;
}

function mulMono(a: Monomial, b: Monomial): Monomial {
  return { coef: a.coef * b.coef, syms: [...a.syms, ...b.syms].sort() };
}

function divMono(a: Monomial, b: Monomial): Monomial | null {
  const syms = a.syms.slice();
  for (const s of b.syms) {
    const i = syms.indexOf(s);
    if (i < 0) return null;
    syms.splice(i, 1);
  }
  if (b.coef === 0 || a.coef % b.coef !== 0) return null;
  return { coef: a.coef / b.coef, syms };
}

export function dimsEqual(a: Dim, b: Dim): boolean {
  if (typeof a === 'number' && typeof b === 'number') return a === b;
  if (typeof a === 'string' && typeof b === 'string') return fromMonomial(toMonomial(a)!) === fromMonomial(toMonomial(b)!);
  return false;
}

/**
 * Could a and b be equal at run time? Two numbers must match; a symbolic dim may take any
 * value (two differently named symbols may be equal too: a KV cache's past+new length and the
 * attention mask's total length are the same number under different names).
 */
function dimsCompatible(a: Dim, b: Dim): boolean {
  if (typeof a === 'number' && typeof b === 'number') return a === b;
  return true;
}

export const fmtShape = (s: Shape): string => `[${s.join(',')}]`;

export function broadcastShapes(op: string, ...shapes: Shape[]): Shape {
  const rank = Math.max(...shapes.map((s) => s.length));
  const out: Dim[] = [];
  for (let i = 0; i < rank; i++) {
    let d: Dim = 1;
    for (const s of shapes) {
      const e = s[s.length - rank + i];
      if (e === undefined || e === 1) continue;
      if (d === 1) d = e;
      else if (!dimsCompatible(d, e)) {
        throw new Error(`${op}: shapes cannot broadcast: ${shapes.map(fmtShape).join(' vs ')}`);
      } else if (typeof d === 'string' && typeof e === 'number') d = e;
    }
    out.push(d);
  }
  return out;
}

function normAxis(op: string, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) throw new Error(`${op}: axis ${axis} out of range for rank ${rank}`);
  return a;
}

const FLOAT: DType[] = ['float32', 'float64'];
const isFloat = (t: DType): boolean => FLOAT.includes(t);

// ---- the recorder -----------------------------------------------------------------------

let freshCounter = 0;
let groupCounter = 0;

/**
 * The ops that record one node of their own name through the recorder's shared helpers (binary
 * with broadcasting, unary, reduce): lists instead of a method each, installed by GraphOps'
 * static block.
 */
const BINARY = ['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum'] as const;
/** Comparisons: binary, with a bool result. */
const COMPARE = ['greater', 'less', 'equal'] as const;
const UNARY_FLOAT = ['exp', 'log', 'sqrt', 'tanh', 'sigmoid', 'sin', 'cos'] as const;
/** Unary ops that also take integer tensors. */
const UNARY_ANY = ['neg', 'abs', 'stopGradient'] as const;
const REDUCE = ['sum', 'mean', 'max'] as const;
type TableOp = (typeof BINARY | typeof COMPARE | typeof UNARY_FLOAT | typeof UNARY_ANY | typeof REDUCE)[number];

/** The type side of the installed ops (GraphOps extends it to implement Ops). */
const TableOps = class {} as new () => Pick<Ops<GNode>, TableOp>;

export class GraphOps extends TableOps implements Ops<GNode> {
  readonly kind = 'graph';
  constructor(readonly graph: Graph) {
    super();
  }

  static {
    const install = (op: TableOp, method: (this: GraphOps, ...args: any[]) => GNode) =>
      Object.defineProperty(GraphOps.prototype, op, { value: method, writable: true, configurable: true });
    for (const op of BINARY)
      install(op, function (a: GNode, b: GNode) {
        return this.binary(op, a, b);
      });
    for (const op of COMPARE)
      install(op, function (a: GNode, b: GNode) {
        return this.binary(op, a, b, 'bool');
      });
    for (const op of UNARY_FLOAT)
      install(op, function (x: GNode) {
        return this.unary(op, x);
      });
    for (const op of UNARY_ANY)
      install(op, function (x: GNode) {
        return this.unary(op, x, false);
      });
    for (const op of REDUCE)
      install(op, function (x: GNode, axes: number[], keepDims = false) {
        return this.reduce(op, x, axes, keepDims);
      });
  }

  record(op: string, inputs: GNode[], attrs: Record<string, unknown>, dtype: DType, shape: Shape): GNode {
    const node: GNode = { id: this.graph.nodes.length, op, inputs, attrs, dtype, shape };
    this.graph.nodes.push(node);
    shape.forEach((d, axis) => {
      if (typeof d === 'string' && !this.graph.dimSources.has(d)) this.graph.dimSources.set(d, { node, axis });
    });
    return node;
  }

  private fresh(hint: string): string {
    freshCounter += 1;
    return `${hint}_${freshCounter}`;
  }

  shape(x: GNode): Shape {
    return x.shape;
  }
  dtype(x: GNode): DType {
    return x.dtype;
  }

  scalar(value: number, dtype: DType = 'float32'): GNode {
    return this.record('const', [], { values: [value] }, dtype, []);
  }
  constant(values: ArrayLike<number>, shape: number[], dtype: DType = 'float32'): GNode {
    const n = shape.reduce((a, b) => a * b, 1);
    if (values.length !== n) throw new Error(`constant: ${values.length} values for shape ${fmtShape(shape)}`);
    return this.record('const', [], { values: Array.from(values) }, dtype, shape);
  }
  range(n: Dim | GNode): GNode {
    if (typeof n === 'object') {
      if (n.shape.length !== 0) throw new Error(`range: expects a scalar count, got ${fmtShape(n.shape)}`);
      return this.record('range', [this.cast(n, 'int32')], {}, 'int32', [this.fresh('range')]);
    }
    return this.record('range', [], { n }, 'int32', [n]);
  }

  private binary(op: string, a: GNode, b: GNode, outType?: DType): GNode {
    if (a.dtype !== b.dtype) throw new Error(`${op}: dtypes differ: ${a.dtype}${fmtShape(a.shape)} vs ${b.dtype}${fmtShape(b.shape)}`);
    return this.record(op, [a, b], {}, outType ?? a.dtype, broadcastShapes(op, a.shape, b.shape));
  }

  private unary(op: string, x: GNode, floatOnly = true): GNode {
    if (floatOnly && !isFloat(x.dtype)) throw new Error(`${op}: expects a float tensor, got ${x.dtype}${fmtShape(x.shape)}`);
    return this.record(op, [x], {}, x.dtype, x.shape);
  }
  cast(x: GNode, dtype: DType): GNode {
    if (x.dtype === dtype) return x;
    return this.record('cast', [x], { to: dtype }, dtype, x.shape);
  }

  where(cond: GNode, a: GNode, b: GNode): GNode {
    if (cond.dtype !== 'bool') throw new Error(`where: condition must be bool, got ${cond.dtype}`);
    if (a.dtype !== b.dtype) throw new Error(`where: branch dtypes differ: ${a.dtype} vs ${b.dtype}`);
    return this.record('where', [cond, a, b], {}, a.dtype, broadcastShapes('where', cond.shape, a.shape, b.shape));
  }

  matmul(a: GNode, b: GNode): GNode {
    if (a.shape.length < 2 || b.shape.length < 2) {
      throw new Error(`matmul: both operands need rank >= 2: ${fmtShape(a.shape)} x ${fmtShape(b.shape)}`);
    }
    if (a.dtype !== b.dtype) throw new Error(`matmul: dtypes differ: ${a.dtype} vs ${b.dtype}`);
    const k1 = a.shape[a.shape.length - 1],
      k2 = b.shape[b.shape.length - 2];
    if (!dimsCompatible(k1, k2)) throw new Error(`matmul: inner dims differ: ${fmtShape(a.shape)} x ${fmtShape(b.shape)}`);
    const batch = broadcastShapes('matmul', a.shape.slice(0, -2), b.shape.slice(0, -2));
    return this.record('matmul', [a, b], {}, a.dtype, [...batch, a.shape[a.shape.length - 2], b.shape[b.shape.length - 1]]);
  }

  private reduce(op: string, x: GNode, axes: number[], keepDims = false): GNode {
    const r = x.shape.length;
    const ax = [...new Set(axes.map((a) => normAxis(op, a, r)))].sort((p, q) => p - q);
    const shape = keepDims ? x.shape.map((d, i) => (ax.includes(i) ? 1 : d)) : x.shape.filter((_, i) => !ax.includes(i));
    return this.record(op, [x], { axes: ax, keepDims }, x.dtype, shape);
  }
  softmax(x: GNode, axis = -1): GNode {
    return this.record('softmax', [x], { axis: normAxis('softmax', axis, x.shape.length) }, x.dtype, x.shape);
  }
  logSoftmax(x: GNode, axis = -1): GNode {
    return this.record('logSoftmax', [x], { axis: normAxis('logSoftmax', axis, x.shape.length) }, x.dtype, x.shape);
  }

  reshape(x: GNode, shape: Shape): GNode {
    const negs = shape.filter((d) => d === -1).length;
    if (negs > 1) throw new Error(`reshape: at most one -1 in ${fmtShape(shape)}`);
    let total: Monomial = { coef: 1, syms: [] };
    for (const d of x.shape) total = mulMono(total, toMonomial(d)!);
    let known: Monomial = { coef: 1, syms: [] };
    for (const d of shape) if (d !== -1) known = mulMono(known, toMonomial(d)!);
    let out = shape.slice();
    if (negs === 1) {
      const rest = divMono(total, known);
      if (!rest) throw new Error(`reshape: cannot infer -1 reshaping ${fmtShape(x.shape)} to ${fmtShape(shape)}`);
      out = shape.map((d) => (d === -1 ? fromMonomial(rest) : d));
    } else if (fromMonomial(total) !== fromMonomial(known) && total.syms.length === 0 && known.syms.length === 0) {
      throw new Error(`reshape: element count differs: ${fmtShape(x.shape)} to ${fmtShape(shape)}`);
    }
    return this.record('reshape', [x], { shape: out }, x.dtype, out);
  }
  transpose(x: GNode, perm: number[]): GNode {
    if (perm.length !== x.shape.length || [...perm].sort().some((p, i) => p !== i)) {
      throw new Error(`transpose: perm [${perm}] does not fit shape ${fmtShape(x.shape)}`);
    }
    return this.record(
      'transpose',
      [x],
      { perm },
      x.dtype,
      perm.map((p) => x.shape[p]),
    );
  }
  concat(xs: GNode[], axis: number): GNode {
    if (xs.length === 0) throw new Error('concat: no inputs');
    const r = xs[0].shape.length;
    const ax = normAxis('concat', axis, r);
    let total: Dim = 0;
    for (const x of xs) {
      if (x.shape.length !== r || x.dtype !== xs[0].dtype) {
        throw new Error(`concat: inputs differ in rank or dtype: ${xs.map((t) => t.dtype + fmtShape(t.shape)).join(', ')}`);
      }
      x.shape.forEach((d, i) => {
        if (i !== ax && !dimsCompatible(d, xs[0].shape[i])) {
          throw new Error(`concat: dim ${i} differs: ${xs.map((t) => fmtShape(t.shape)).join(', ')}`);
        }
      });
      const d = x.shape[ax];
      total = typeof total === 'number' && typeof d === 'number' ? total + d : 'pending';
    }
    const shape = xs[0].shape.slice();
    shape[ax] = total === 'pending' ? this.fresh('cat') : total;
    return this.record('concat', xs, { axis: ax }, xs[0].dtype, shape);
  }
  slice(x: GNode, starts: number[], ends: number[], axes: number[]): GNode {
    if (starts.length !== axes.length || ends.length !== axes.length) throw new Error('slice: starts, ends and axes differ in length');
    const r = x.shape.length;
    const ax = axes.map((a) => normAxis('slice', a, r));
    const shape = x.shape.slice();
    ax.forEach((a, i) => {
      const d = x.shape[a],
        s = starts[i],
        e = Math.min(ends[i], BIG);
      if (typeof d === 'number') {
        const cl = (v: number) => Math.max(0, Math.min(d, v < 0 ? v + d : v));
        shape[a] = Math.max(0, cl(e) - cl(s));
      } else if (s >= 0 && e >= 0 && e < BIG) shape[a] = e - s;
      else if (s < 0 && e >= BIG) shape[a] = -s;
      else if (s === 0 && e >= BIG) shape[a] = d;
      else shape[a] = this.fresh('slice');
    });
    return this.record('slice', [x], { starts, ends: ends.map((e) => Math.min(e, BIG)), axes: ax }, x.dtype, shape);
  }
  unsqueeze(x: GNode, axes: number[]): GNode {
    const r = x.shape.length + axes.length;
    const ax = axes.map((a) => normAxis('unsqueeze', a, r)).sort((p, q) => p - q);
    const shape: Dim[] = [];
    let j = 0;
    for (let i = 0; i < r; i++) shape.push(ax.includes(i) ? 1 : x.shape[j++]);
    return this.record('unsqueeze', [x], { axes: ax }, x.dtype, shape);
  }
  squeeze(x: GNode, axes: number[]): GNode {
    const ax = axes.map((a) => normAxis('squeeze', a, x.shape.length));
    for (const a of ax) {
      if (x.shape[a] !== 1) throw new Error(`squeeze: axis ${a} of ${fmtShape(x.shape)} is not 1`);
    }
    return this.record(
      'squeeze',
      [x],
      { axes: ax },
      x.dtype,
      x.shape.filter((_, i) => !ax.includes(i)),
    );
  }
  expandAs(x: GNode, like: GNode): GNode {
    const shape = broadcastShapes('expandAs', x.shape, like.shape);
    if (shape.length !== like.shape.length) throw new Error(`expandAs: ${fmtShape(x.shape)} has higher rank than ${fmtShape(like.shape)}`);
    return this.record('expandAs', [x, like], {}, x.dtype, like.shape);
  }

  gather(table: GNode, indices: GNode): GNode {
    if (indices.dtype !== 'int32' && indices.dtype !== 'int64') throw new Error(`gather: indices must be int32/int64, got ${indices.dtype}`);
    if (table.shape.length < 1) throw new Error('gather: table must have rank >= 1');
    return this.record('gather', [table, indices], {}, table.dtype, [...indices.shape, ...table.shape.slice(1)]);
  }
  gatherElements(x: GNode, indices: GNode, axis: number): GNode {
    if (indices.dtype !== 'int32' && indices.dtype !== 'int64') throw new Error(`gatherElements: indices must be int32/int64, got ${indices.dtype}`);
    if (indices.shape.length !== x.shape.length) {
      throw new Error(`gatherElements: rank differs: ${fmtShape(x.shape)} vs indices ${fmtShape(indices.shape)}`);
    }
    const ax = normAxis('gatherElements', axis, x.shape.length);
    return this.record('gatherElements', [x, indices], { axis: ax }, x.dtype, indices.shape);
  }

  chunk(x: GNode, axis: number, index: number, count: number): GNode {
    const ax = normAxis('chunk', axis, x.shape.length);
    if (!Number.isInteger(count) || count < 1 || !Number.isInteger(index) || index < 0 || index >= count) throw new Error(`chunk: part ${index} of ${count}`);
    const d = x.shape[ax];
    const shape = x.shape.slice();
    if (typeof d === 'number') {
      const size = Math.ceil(d / count);
      shape[ax] = Math.max(0, Math.min(d, (index + 1) * size) - Math.min(d, index * size));
    } else shape[ax] = this.fresh('chunk');
    return this.record('chunk', [x], { axis: ax, index, count }, x.dtype, shape);
  }
  after(x: GNode, dep: GNode): GNode {
    if (dep.shape.length === 0 || x.shape.length === 0) throw new Error('after: x and dep must have rank ≥ 1');
    return this.record('after', [x, dep], {}, x.dtype, x.shape);
  }
  recompute<R>(entries: GNode[], fn: (entries: GNode[]) => R): R {
    const group = ++groupCounter;
    const first = this.graph.nodes.length;
    const ins = entries.map((e) => this.record('recomputeEntry', [e], { group }, e.dtype, e.shape));
    const r = fn(ins);
    // Every node recorded by fn that computes from something (constants are never recomputed).
    for (let i = first + ins.length; i < this.graph.nodes.length; i++) {
      const n = this.graph.nodes[i];
      if (n.inputs.length) (n.attrs as Record<string, unknown>).group = group;
    }
    return r;
  }

  attention(
    q: GNode,
    k: GNode,
    v: GNode,
    pastK: GNode,
    pastV: GNode,
    bias: GNode,
    a: { heads: number; kvHeads: number; scale: number },
  ): { out: GNode; presentK: GNode; presentV: GNode } {
    const { heads: H, kvHeads: Hkv } = a;
    if (!Number.isInteger(H) || !Number.isInteger(Hkv) || H < 1 || Hkv < 1 || H % Hkv !== 0)
      throw new Error(`attention: heads ${H} must be a positive multiple of kvHeads ${Hkv}`);
    const ranks = [q, k, v].map((t) => t.shape.length).concat([pastK, pastV, bias].map((t) => t.shape.length - 1));
    if (ranks.some((r) => r !== 3))
      throw new Error(
        `attention: q/k/v must be [B, T, n·hd] and pastK/pastV/bias rank 4, got ${[q, k, v, pastK, pastV, bias].map((t) => fmtShape(t.shape)).join(', ')}`,
      );
    if ([q, k, v, pastK, pastV, bias].some((t) => t.dtype !== 'float32')) throw new Error('attention: every input must be float32');
    const [B, T, qw] = q.shape;
    const hd = pastK.shape[3];
    if (typeof hd !== 'number' || !dimsCompatible(qw, H * hd) || !dimsCompatible(k.shape[2], Hkv * hd) || !dimsCompatible(v.shape[2], Hkv * hd))
      throw new Error(`attention: q ${fmtShape(q.shape)}, k ${fmtShape(k.shape)}, v ${fmtShape(v.shape)} do not fit ${H} heads, ${Hkv} KV heads of size ${hd}`);
    if (!dimsCompatible(pastK.shape[1], Hkv) || !dimsCompatible(pastV.shape[1], Hkv) || pastV.shape[3] !== hd)
      throw new Error(`attention: pastK ${fmtShape(pastK.shape)} / pastV ${fmtShape(pastV.shape)} must be [B, ${Hkv}, P, ${hd}]`);
    if (!dimsCompatible(bias.shape[1], 1) || !dimsCompatible(bias.shape[2], T))
      throw new Error(`attention: bias ${fmtShape(bias.shape)} must be [B, 1, T, P+T]`);
    const S = bias.shape[3];
    const out = this.record('attention', [q, k, v, pastK, pastV, bias], { heads: H, kvHeads: Hkv, scale: a.scale, headDim: hd }, 'float32', [B, T, H * hd]);
    const present = (index: number) => this.record('attentionPresent', [out], { index }, 'float32', [B, Hkv, S, hd]);
    return { out, presentK: present(1), presentV: present(2) };
  }

  // ---- internal ops used by autodiff (not part of the public op set) ------------------
  /** Gradient of chunk: g padded with zeros back to x's shape. */
  chunkGrad(x: GNode, g: GNode, attrs: Record<string, unknown>): GNode {
    return this.record('chunkGrad', [x, g], { axis: attrs.axis, index: attrs.index, count: attrs.count }, x.dtype, x.shape);
  }
  /** Sum `g` over broadcast axes so it has `like`'s shape. */
  sumTo(g: GNode, like: GNode): GNode {
    if (g.shape.length === like.shape.length && g.shape.every((d, i) => dimsEqual(d, like.shape[i]))) return g;
    const lead = g.shape.length - like.shape.length;
    const axes: number[] = [];
    for (let i = 0; i < g.shape.length; i++) {
      if (i < lead) axes.push(i);
      else if (like.shape[i - lead] === 1 && g.shape[i] !== 1) axes.push(i);
    }
    let r = axes.length ? this.sum(g, axes, true) : g;
    if (lead > 0 || r.shape.length !== like.shape.length) r = this.reshapeLike(r, like);
    return r;
  }
  reshapeLike(x: GNode, like: GNode): GNode {
    return this.record('reshapeLike', [x, like], {}, x.dtype, like.shape);
  }
  zerosLike(x: GNode): GNode {
    return this.record('zerosLike', [x], {}, x.dtype, x.shape);
  }
  /** Float scalar: the product of x's sizes along `axes` (at run time). */
  dimProduct(x: GNode, axes: number[], dtype: DType): GNode {
    return this.record('dimProduct', [x], { axes }, dtype, []);
  }
  /** Gradient of gather(table, idx): scatter-add rows of g into zeros shaped like table. */
  gatherGrad(table: GNode, indices: GNode, g: GNode): GNode {
    return this.record('gatherGrad', [table, indices, g], {}, table.dtype, table.shape);
  }
  /** zeros like x, then out[idx along axis] += g (ScatterElements with reduction add). */
  scatterAddLike(x: GNode, indices: GNode, g: GNode, axis: number): GNode {
    return this.record('scatterAddLike', [x, indices, g], { axis }, x.dtype, x.shape);
  }
  /** base, then out[idx along axis] += g (ScatterElements with reduction add onto base). */
  scatterAddInto(base: GNode, indices: GNode, g: GNode, axis: number): GNode {
    return this.record('scatterAddInto', [base, indices, g], { axis }, base.dtype, base.shape);
  }
  /** Gradient of slice: g padded with zeros back to x's shape. */
  sliceGrad(x: GNode, g: GNode, attrs: Record<string, unknown>): GNode {
    return this.record('sliceGrad', [x, g], attrs, x.dtype, x.shape);
  }
}
