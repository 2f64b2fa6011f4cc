/**
 * Reverse-mode autodiff on the graph IR. Every op's derivative sits in ONE table
 * (`gradientRules`); each rule is written with the same recorder, so the backward pass is
 * ordinary ops in the same graph and exports to ONNX like the forward pass.
 */
import { GraphOps, type GNode, type Graph } from './graph';

type Rule = (o: GraphOps, node: GNode, g: GNode) => (GNode | null)[];

const one = (o: GraphOps, like: GNode) => o.scalar(1, like.dtype);

/** The gradient table: op name → rule returning one gradient (or null) per input. */
export const gradientRules: Record<string, Rule> = {
  add: (o, n, g) => [o.sumTo(g, n.inputs[0]), o.sumTo(g, n.inputs[1])],
  sub: (o, n, g) => [o.sumTo(g, n.inputs[0]), o.sumTo(o.neg(g), n.inputs[1])],
  mul: (o, n, g) => [o.sumTo(o.mul(g, n.inputs[1]), n.inputs[0]), o.sumTo(o.mul(g, n.inputs[0]), n.inputs[1])],
  div: (o, n, g) => {
    const [a, b] = n.inputs;
    return [o.sumTo(o.div(g, b), a), o.sumTo(o.neg(o.div(o.mul(g, n), b)), b)];
  },
  pow: (o, n, g) => {
    const [a, b] = n.inputs;
    const da = o.mul(g, o.mul(b, o.pow(a, o.sub(b, one(o, b)))));
    const db = o.mul(g, o.mul(n, o.log(a)));
    return [o.sumTo(da, a), o.sumTo(db, b)];
  },
  maximum: (o, n, g) => {
    const [a, b] = n.inputs;
    const z = o.zerosLike(g);
    const aWins = o.greater(b, a);
    return [o.sumTo(o.where(aWins, z, g), a), o.sumTo(o.where(aWins, g, z), b)];
  },
  minimum: (o, n, g) => {
    const [a, b] = n.inputs;
    const z = o.zerosLike(g);
    const bWins = o.less(b, a);
    return [o.sumTo(o.where(bWins, z, g), a), o.sumTo(o.where(bWins, g, z), b)];
  },
  neg: (o, _n, g) => [o.neg(g)],
  exp: (o, n, g) => [o.mul(g, n)],
  log: (o, n, g) => [o.div(g, n.inputs[0])],
  sqrt: (o, n, g) => [o.div(g, o.mul(o.scalar(2, n.dtype), n))],
  abs: (o, n, g) => [o.where(o.less(n.inputs[0], o.zerosLike(n.inputs[0])), o.neg(g), g)],
  tanh: (o, n, g) => [o.mul(g, o.sub(one(o, n), o.mul(n, n)))],
  sigmoid: (o, n, g) => [o.mul(g, o.mul(n, o.sub(one(o, n), n)))],
  sin: (o, n, g) => [o.mul(g, o.cos(n.inputs[0]))],
  cos: (o, n, g) => [o.neg(o.mul(g, o.sin(n.inputs[0])))],
  cast: (o, n, g) => [isFloat(n.inputs[0]) ? o.cast(g, n.inputs[0].dtype) : null],
  stopGradient: () => [null],
  where: (o, n, g) => {
    const [c, a, b] = n.inputs;
    const z = o.zerosLike(g);
    return [null, o.sumTo(o.where(c, g, z), a), o.sumTo(o.where(c, z, g), b)];
  },
  matmul: (o, n, g) => {
    const [a, b] = n.inputs;
    const tr = (x: GNode) => {
      const r = x.shape.length;
      const perm = [...Array(r).keys()];
      [perm[r - 2], perm[r - 1]] = [perm[r - 1], perm[r - 2]];
      return o.transpose(x, perm);
    };
    return [o.sumTo(o.matmul(g, tr(b)), a), o.sumTo(o.matmul(tr(a), g), b)];
  },
  sum: (o, n, g) => [o.expandAs(keepDimsOf(o, n, g), n.inputs[0])],
  mean: (o, n, g) => {
    const x = n.inputs[0];
    const count = o.dimProduct(x, n.attrs.axes as number[], x.dtype);
    return [o.div(o.expandAs(keepDimsOf(o, n, g), x), count)];
  },
  max: (o, n, g) => {
    const x = n.inputs[0];
    const axes = n.attrs.axes as number[];
    const m = n.attrs.keepDims ? n : o.unsqueeze(n, axes);
    const hit = o.cast(o.equal(x, o.expandAs(m, x)), x.dtype);
    const ties = o.sum(hit, axes, true);
    return [o.mul(o.div(hit, ties), o.expandAs(keepDimsOf(o, n, g), x))];
  },
  softmax: (o, n, g) => {
    const axis = n.attrs.axis as number;
    return [o.mul(n, o.sub(g, o.sum(o.mul(g, n), [axis], true)))];
  },
  logSoftmax: (o, n, g) => {
    const axis = n.attrs.axis as number;
    // Picking entries of the log-softmax (a token's logprob: gatherElements along `axis`) has
    // the gradient g = scatter-add of the picked gradients gp into zeros. Then sum(g, axis) =
    // sum(gp, axis) and the rule below becomes scatter-add of gp onto −softmax·sum(gp): no
    // dense zeros, no dense subtraction, no reduction over the vocabulary.
    if (g.op === 'scatterAddLike' && g.inputs[0] === n && g.attrs.axis === axis && sameOtherDims(g.inputs[1], n, axis)) {
      const [, idx, gp] = g.inputs;
      return [o.scatterAddInto(o.mul(o.exp(n), o.neg(o.sum(gp, [axis], true))), idx, gp, axis)];
    }
    return [o.sub(g, o.mul(o.exp(n), o.sum(g, [axis], true)))];
  },
  reshape: (o, n, g) => [o.reshapeLike(g, n.inputs[0])],
  reshapeLike: (o, n, g) => [o.reshapeLike(g, n.inputs[0]), null],
  transpose: (o, n, g) => {
    const perm = n.attrs.perm as number[];
    const inv = perm.map((_, i) => perm.indexOf(i));
    return [o.transpose(g, inv)];
  },
  concat: (o, n, g) => {
    const axis = n.attrs.axis as number;
    const sizes = n.inputs.map((x) => x.shape[axis]);
    if (sizes.every((s) => typeof s === 'number')) {
      let off = 0;
      return n.inputs.map((_, i) => {
        const s = sizes[i] as number;
        const r = o.slice(g, [off], [off + s], [axis]);
        off += s;
        return r;
      });
    }
    return n.inputs.map((x, i) => o.record('concatGrad', [g, ...n.inputs], { axis, index: i }, x.dtype, x.shape));
  },
  slice: (o, n, g) => [o.sliceGrad(n.inputs[0], g, n.attrs)],
  unsqueeze: (o, n, g) => [o.squeeze(g, n.attrs.axes as number[])],
  squeeze: (o, n, g) => [o.reshapeLike(g, n.inputs[0])],
  expandAs: (o, n, g) => [o.sumTo(g, n.inputs[0]), null],
  gather: (o, n, g) => [o.gatherGrad(n.inputs[0], n.inputs[1], g), null],
  gatherElements: (o, n, g) => [o.scatterAddLike(n.inputs[0], n.inputs[1], g, n.attrs.axis as number), null],
  chunk: (o, n, g) => [o.chunkGrad(n.inputs[0], g, n.attrs)],
  after: (_o, _n, g) => [g, null],
  recomputeEntry: (_o, _n, g) => [g],
  // x · Wᵀ with W block-quantized (engine/model/quantize.ts): dx = g · W, W dequantized here, in the
  // backward pass, one layer at a time (made to wait for g, so no dequantized W is computed early
  // and kept alive); the codes and scales are frozen (no gradient).
  qmatmul: (o, n, g) => {
    const [, codes, scales] = n.inputs;
    const a = n.attrs;
    const attrs = { N: a.N, K: a.K, bits: a.bits, blockSize: a.blockSize };
    const w = o.record('dequantNBits', [codes, o.after(scales, g)], attrs, n.dtype, [a.N, a.K] as number[]);
    return [o.matmul(g, w), null, null];
  },
  dequantNBits: () => [null, null],
  // Rows of a block-quantized table (a frozen embedding, engine/model/quantize.ts): no gradient to codes, scales or ids.
  gatherNBits: () => [null, null, null],
  // A piece of a quantized weight's codes or scales (engine/model/quantize.ts): frozen, no gradient.
  gatedSlice: () => [null, null],
  quantWeightT: () => [null],
  // Ops with no gradient (integer/boolean results or constants).
  const: () => [],
  input: () => [],
  range: () => [null],
  greater: () => [null, null],
  less: () => [null, null],
  equal: () => [null, null],
  zerosLike: () => [null],
  dimProduct: () => [null],
};

/** Whether a and b have the same (static or symbolic) sizes on every axis but `axis`. */
function sameOtherDims(a: GNode, b: GNode, axis: number): boolean {
  const ax = axis < 0 ? axis + b.shape.length : axis;
  return a.shape.length === b.shape.length && a.shape.every((d, i) => i === ax || d === b.shape[i]);
}

function isFloat(x: GNode): boolean {
  return x.dtype === 'float32' || x.dtype === 'float64';
}

/** The upstream gradient of a reduction, with the reduced axes present as size 1. */
function keepDimsOf(o: GraphOps, n: GNode, g: GNode): GNode {
  return n.attrs.keepDims ? g : o.unsqueeze(g, n.attrs.axes as number[]);
}

/** Ops through which a weight reaches a product unchanged in size (its gradient is the weight's, reshaped). */
const WEIGHT_VIEWS = new Set(['transpose', 'reshape', 'identity', 'recomputeEntry']);

/**
 * withGradients' `weightsFirst`: at a node that reads a trainable weight (directly or through a
 * transpose/reshape of it), the gradients it passes to its other inputs wait (`after`) for the
 * weight's gradient. So a small weight's gradient (a LoRA adapter's dA = (g·B)ᵀ·x, dB = gᵀ·(x·Aᵀ))
 * is computed as the backward pass goes, and the layer's input x and its gradient g are freed
 * there, instead of every layer's being kept until ONNX Runtime's depth-first order reaches that
 * gradient output (at Qwen2.5-1.5B widths and 1 × 512 tokens: 2.1 GiB of such tensors).
 */
function weightGradFirst(o: GraphOps, n: GNode, ins: (GNode | null)[], wrtIds: Set<number>): void {
  const isWeight = (x: GNode): boolean => wrtIds.has(x.id) || (WEIGHT_VIEWS.has(x.op) && !!x.inputs[0] && isWeight(x.inputs[0]));
  const w = n.inputs.findIndex((x, k) => isWeight(x) && ins[k]);
  if (w < 0) return;
  n.inputs.forEach((x, k) => {
    if (k !== w && ins[k] && !isWeight(x) && isFloat(x)) ins[k] = o.after(ins[k]!, ins[w]!);
  });
}

/**
 * Add gradient outputs `grad.<name>` of the scalar output `loss` with respect to the inputs
 * in `wrt` (any subset: all weights, or only adapters). Inputs off the loss's path get zeros.
 */
export function withGradients(graph: Graph, loss: string, wrt: string[], opts: { weightsFirst?: boolean } = {}): Graph {
  const lossNode = graph.outputs[loss];
  if (!lossNode) throw new Error(`withGradients: no output named '${loss}'`);
  if (lossNode.shape.length !== 0) throw new Error(`withGradients: loss '${loss}' must be a scalar, has shape [${lossNode.shape}]`);
  const g: Graph = { inputs: graph.inputs, nodes: graph.nodes.slice(), outputs: { ...graph.outputs }, dimSources: new Map(graph.dimSources) };
  const o = new GraphOps(g);
  const wrtNodes = wrt.map((name) => {
    const e = graph.inputs.find((i) => i.spec.name === name);
    if (!e) throw new Error(`withGradients: no input named '${name}'`);
    if (!isFloat(e.node)) throw new Error(`withGradients: input '${name}' is ${e.node.dtype}, not float`);
    return e.node;
  });

  const wrtIds = new Set(wrtNodes.map((n) => n.id));
  // Nodes that depend on some wrt input: only they need gradients.
  const needs = new Set<number>(wrtNodes.map((n) => n.id));
  for (const n of graph.nodes) if (n.inputs.some((i) => needs.has(i.id)) && n.op !== 'stopGradient') needs.add(n.id);

  const grads = new Map<number, GNode>();
  grads.set(lossNode.id, o.scalar(1, lossNode.dtype));
  // Recompute groups (GraphOps.recompute): a rule for a node of a group reads the node and its
  // inputs through clones recorded here, in the backward pass, so the forward values need not
  // stay alive. A group's clones start from its entries made to wait (`after`) for the gradient
  // that left the group processed before it: groups are recomputed one at a time, and the
  // clones are not common subexpressions of the forward nodes (which ONNX Runtime would merge).
  const clones = new Map<number, GNode>();
  let lastGroupGrad: GNode | undefined;
  const cloneOf = (m: GNode): GNode => {
    if (m.attrs.group === undefined) return m;
    const hit = clones.get(m.id);
    if (hit) return hit;
    let c: GNode;
    if (m.op === 'recomputeEntry') c = lastGroupGrad ? o.after(m.inputs[0], lastGroupGrad) : m.inputs[0];
    else {
      const { group: _g, ...attrs } = m.attrs;
      c = o.record(m.op, m.inputs.map(cloneOf), attrs, m.dtype, m.shape);
    }
    clones.set(m.id, c);
    return c;
  };
  for (let i = lossNode.id; i >= 0; i--) {
    const n = graph.nodes[i];
    const gn = grads.get(n.id);
    if (!gn || n.op === 'input' || !needs.has(n.id)) continue;
    const rule = gradientRules[n.op];
    if (!rule) throw new Error(`withGradients: op '${n.op}' has no gradient rule`);
    const grouped = n.attrs.group !== undefined;
    const ins = rule(o, grouped ? cloneOf(n) : n, gn);
    if (opts.weightsFirst) weightGradFirst(o, n, ins, wrtIds);
    n.inputs.forEach((inp, k) => {
      const d = ins[k];
      if (!d || !needs.has(inp.id) || !isFloat(inp)) return;
      const prev = grads.get(inp.id);
      grads.set(inp.id, prev ? o.add(prev, d) : d);
    });
    if (grouped && n.op === 'recomputeEntry' && ins[0]) lastGroupGrad = ins[0];
  }
  for (const w of wrtNodes) {
    const name = w.attrs.name as string;
    g.outputs[`grad.${name}`] = grads.get(w.id) ?? o.zerosLike(w);
  }
  return g;
}
