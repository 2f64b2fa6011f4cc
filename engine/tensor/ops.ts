/**
 * The op set: the one vocabulary in which Arbor's model and losses are written.
 *
 * A program is a plain function over `Ops<T>`. Two interpreters implement it:
 *  - the graph recorder (engine/tensor/graph.ts): T is a symbolic node; the recorded IR gets
 *    shape inference, reverse-mode autodiff, ONNX export and ONNX Runtime execution;
 *  - the tfjs interpreter (engine/tensor/tfjs.ts): T is a tf.Tensor, run eagerly.
 *
 * Conventions (both interpreters must follow them exactly):
 *  - Binary elementwise ops broadcast like NumPy/ONNX (right-aligned).
 *  - Axes may be negative (counted from the end).
 *  - `matmul` is ONNX MatMul / numpy.matmul: batched over leading dims, broadcasting them.
 *  - Comparisons return `bool`; `where(cond, a, b)` selects elementwise with broadcasting.
 *  - Reductions take explicit axes; `keepDims` defaults to false.
 *  - `gather(table, indices)` is ONNX Gather on axis 0 (embedding lookup);
 *    `gatherElements(x, indices, axis)` is ONNX GatherElements (torch.gather).
 *  - Integer index tensors are int32 in programs (the ONNX exporter casts to int64 where ONNX
 *    requires it).
 *  - Dims are numbers or symbolic names (e.g. 'batch', 'seq'); reshape accepts at most one -1.
 */

/** uint8: only the packed codes of a block-quantized weight (engine/model/quantize.ts) are uint8; no op computes on them but the quantized-weight ops of the graph recorder. */
export type DType = 'float32' | 'float64' | 'int32' | 'int64' | 'bool' | 'uint8';
export type Dim = number | string;
export type Shape = Dim[];

export interface Ops<T> {
  /** The interpreter's name, e.g. 'graph' or 'tfjs'. */
  readonly kind: string;

  // ---- introspection -------------------------------------------------------------------
  shape(x: T): Shape;
  dtype(x: T): DType;

  // ---- constants -----------------------------------------------------------------------
  scalar(value: number, dtype?: DType): T;
  constant(values: ArrayLike<number>, shape: number[], dtype?: DType): T;
  /** [0, 1, ..., n-1] as int32 (n may be a symbolic dim resolved at run time). */
  range(n: Dim | T): T;

  // ---- elementwise binary (broadcasting) ------------------------------------------------
  add(a: T, b: T): T;
  sub(a: T, b: T): T;
  mul(a: T, b: T): T;
  div(a: T, b: T): T;
  pow(a: T, b: T): T;
  maximum(a: T, b: T): T;
  minimum(a: T, b: T): T;

  // ---- elementwise unary ---------------------------------------------------------------
  neg(x: T): T;
  exp(x: T): T;
  log(x: T): T;
  sqrt(x: T): T;
  abs(x: T): T;
  tanh(x: T): T;
  sigmoid(x: T): T;
  sin(x: T): T;
  cos(x: T): T;
  cast(x: T, dtype: DType): T;
  /** Identity in the forward pass, zero gradient. */
  stopGradient(x: T): T;

  // ---- comparisons and selection -------------------------------------------------------
  greater(a: T, b: T): T;
  less(a: T, b: T): T;
  equal(a: T, b: T): T;
  where(cond: T, a: T, b: T): T;

  // ---- linear algebra ------------------------------------------------------------------
  matmul(a: T, b: T): T;

  // ---- reductions ----------------------------------------------------------------------
  sum(x: T, axes: number[], keepDims?: boolean): T;
  mean(x: T, axes: number[], keepDims?: boolean): T;
  max(x: T, axes: number[], keepDims?: boolean): T;
  softmax(x: T, axis?: number): T;
  logSoftmax(x: T, axis?: number): T;

  // ---- shape ---------------------------------------------------------------------------
  reshape(x: T, shape: Shape): T;
  transpose(x: T, perm: number[]): T;
  concat(xs: T[], axis: number): T;
  /** Slice along `axes` with ONNX Slice semantics (ends clamp; steps 1). */
  slice(x: T, starts: number[], ends: number[], axes: number[]): T;
  /** Insert size-1 axes (ONNX Unsqueeze). */
  unsqueeze(x: T, axes: number[]): T;
  /** Remove size-1 axes (ONNX Squeeze). */
  squeeze(x: T, axes: number[]): T;
  /** Broadcast x to the shape of `like` (ONNX Expand with Shape(like)). */
  expandAs(x: T, like: T): T;

  // ---- indexing ------------------------------------------------------------------------
  gather(table: T, indices: T): T;
  gatherElements(x: T, indices: T, axis: number): T;

  // ---- memory control (graph interpreter only; eager interpreters leave them undefined) ---
  /**
   * Part `index` of `count` near-equal parts of x along `axis` (sizes ceil(n/count), the last
   * ones smaller or empty), for a dim only known at run time.
   */
  chunk?(x: T, axis: number, index: number, count: number): T;
  /** x, computed only after `dep` (an ordering edge for the executor; the value is x's). */
  after?(x: T, dep: T): T;
  /**
   * Record `fn(entries)` as a recompute group: the backward pass recomputes the group's values
   * from its entries instead of keeping them alive from the forward pass (activation
   * checkpointing), each group after the previous group's backward.
   */
  recompute?<R>(entries: T[], fn: (entries: T[]) => R): R;
  /**
   * A weight W [N, K] that is stored block-quantized (a quantized base's LM head:
   * engine/model/quantize.ts quantizedBaseOps), as row pieces in order: each `read(dep)` is that
   * piece's rows of W dequantized to float32 once `dep` exists, an ordinary tensor whose products
   * are plain matmuls. Undefined for a float32 weight.
   */
  rowPieces?(w: T): Array<(dep: T) => T> | undefined;

  // ---- fused kernels (graph interpreter only; callers keep the unfused form for the others) --
  /**
   * Attention of new tokens over a KV cache in one kernel (ONNX Attention, opset 23, on ORT's
   * CPU provider; engine/tensor/onnx.ts lowers it to MatMul/Softmax for WebGPU). Shapes:
   * q [B, T, H·hd], k and v [B, T, Hkv·hd] (the new tokens' projections, already rotated),
   * pastK/pastV [B, Hkv, P, hd], bias [B, 1, T, P+T] (additive: 0 or −1e9; causality and padding
   * are both in it, query i sitting at key P+i). probs = softmax(scale·q·kᵀ + bias) over the P+T
   * keys, head h reading KV head ⌊h·Hkv/H⌋ (grouped-query attention). Returns out [B, T, H·hd]
   * and the cache with the new tokens appended, presentK/presentV [B, Hkv, P+T, hd]. No gradient.
   */
  attention?(q: T, k: T, v: T, pastK: T, pastV: T, bias: T, a: { heads: number; kvHeads: number; scale: number }): { out: T; presentK: T; presentV: T };
}

/** Helpers written once over the op set (no interpreter-specific code). */
export function rmsNorm<T>(o: Ops<T>, x: T, weight: T, eps: number): T {
  const ms = o.mean(o.mul(x, x), [-1], true);
  return o.mul(o.div(x, o.sqrt(o.add(ms, o.scalar(eps)))), weight);
}

export function silu<T>(o: Ops<T>, x: T): T {
  return o.mul(x, o.sigmoid(x));
}
