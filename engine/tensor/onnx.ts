/**
 * ONNX export of the graph IR (opset 18). Symbolic dims become dim_params; shapes that depend
 * on symbolic dims are computed at run time from Shape() of a node that carries the dim
 * (graph.dimSources). Weights are graph inputs, so one session serves every training step;
 * only a decode session built with OnnxOptions.initializers reads baked (or quantized) weights
 * as constants (engine/model/quantize.ts).
 */
import onnxProto from 'onnx-proto';
import type { Dim, DType } from './ops';
import { reachable, toMonomial, type GNode, type Graph } from './graph';

const { onnx } = onnxProto;
const OPSET = 18;

const ONNX_DTYPE: Record<DType, number> = { float32: 1, uint8: 2, int32: 6, int64: 7, bool: 9, float64: 11 };
const ATTR = { FLOAT: 1, INT: 2, STRING: 3, TENSOR: 4, INTS: 7 } as const;

type Attr = { name: string; type: number; i?: number; f?: number; ints?: number[]; s?: Uint8Array; t?: onnxProto.onnx.ITensorProto };

const SIMPLE: Record<string, string> = {
  add: 'Add',
  sub: 'Sub',
  mul: 'Mul',
  div: 'Div',
  pow: 'Pow',
  maximum: 'Max',
  minimum: 'Min',
  neg: 'Neg',
  exp: 'Exp',
  log: 'Log',
  sqrt: 'Sqrt',
  abs: 'Abs',
  tanh: 'Tanh',
  sigmoid: 'Sigmoid',
  sin: 'Sin',
  cos: 'Cos',
  stopGradient: 'Identity',
  greater: 'Greater',
  less: 'Less',
  equal: 'Equal',
  where: 'Where',
  matmul: 'MatMul',
};

export interface OnnxOptions {
  /** Export float32 tensors as float64 (for numerical reference runs). */
  float64?: boolean;
  /**
   * For ORT's WebGPU provider (1.30), whose kernels lack some ops and int64 tensors (ORT then runs
   * those nodes on the CPU, moving their data off the device and back: docs/BENCHMARKS.md):
   * LogSoftmax as max, subtract, exp, sum, log; the gather gradient's scatter indices and the
   * chunk slices' bounds in int32; zeros as a broadcast constant instead of ConstantOfShape.
   */
  webgpu?: boolean;
  /**
   * Constant tensors of the model by name (raw little-endian bytes; ONNX TensorProto data types):
   * what `matmulNBits` and `initializer` nodes read (engine/model/quantize.ts: quantized or baked
   * decode weights). ORT pre-packs constant weights, so these are not graph inputs.
   */
  initializers?: Record<string, OnnxInitializer>;
}

/** A constant tensor of an exported model (OnnxOptions.initializers). */
export interface OnnxInitializer {
  /** ONNX TensorProto data type (1 float, 2 uint8, …). */
  dataType: number;
  dims: number[];
  /** The bytes, or `external`: stored outside the model, under its name as location (given at session creation: RunnerOptions.externalFeeds). */
  raw?: Uint8Array;
  external?: { length: number };
}

export function toOnnx(graph: Graph, opts: OnnxOptions = {}): Uint8Array {
  const ft = (t: DType): number => ONNX_DTYPE[opts.float64 && t === 'float32' ? 'float64' : t];
  const nodes: onnxProto.onnx.INodeProto[] = [];
  const inits: onnxProto.onnx.ITensorProto[] = [];
  let tmp = 0;
  let contrib = false;
  const fresh = (p: string) => `${p}_${tmp++}`;
  const name = (n: GNode) => (n.op === 'input' || n.op === 'initializer' ? (n.attrs.name as string) : `n${n.id}`);

  const emit = (op: string, inputs: string[], attrs: Attr[] = [], out?: string): string => {
    const o = out ?? fresh(op);
    nodes.push({ opType: op, input: inputs, output: [o], attribute: attrs, name: fresh(`${op}_node`) });
    return o;
  };
  const i64 = (vals: number[], dims: number[] = [vals.length]): string => {
    const n = fresh('c');
    inits.push({ name: n, dataType: 7, dims, rawData: new Uint8Array(BigInt64Array.from(vals.map(BigInt)).buffer) });
    return n;
  };
  const constTensor = (dtype: DType, values: number[], dims: number[], nm: string) => {
    const t = ft(dtype);
    let raw: Uint8Array;
    if (t === 1) raw = new Uint8Array(Float32Array.from(values).buffer);
    else if (t === 11) raw = new Uint8Array(Float64Array.from(values).buffer);
    else if (t === 6) raw = new Uint8Array(Int32Array.from(values).buffer);
    else if (t === 7) raw = new Uint8Array(BigInt64Array.from(values.map((v) => BigInt(Math.trunc(v)))).buffer);
    else raw = Uint8Array.from(values.map((v) => (v ? 1 : 0)));
    inits.push({ name: nm, dataType: t, dims, rawData: raw });
  };
  const scalarTensorAttr = (dtype: DType, v: number): onnxProto.onnx.ITensorProto => {
    const t = ft(dtype);
    const raw =
      t === 1
        ? new Uint8Array(Float32Array.of(v).buffer)
        : t === 11
          ? new Uint8Array(Float64Array.of(v).buffer)
          : t === 6
            ? new Uint8Array(Int32Array.of(v).buffer)
            : t === 7
              ? new Uint8Array(BigInt64Array.of(BigInt(v)).buffer)
              : Uint8Array.of(v ? 1 : 0);
    return { dataType: t, dims: [1], rawData: raw };
  };
  const ints = (nm: string, v: number[]): Attr => ({ name: nm, type: ATTR.INTS, ints: v });
  const int = (nm: string, v: number): Attr => ({ name: nm, type: ATTR.INT, i: v });
  const shapeOf = (x: string) => emit('Shape', [x]);
  const zerosLike = (x: string, dtype: DType) => {
    if (opts.webgpu && dtype === 'float32') {
      // WebGPU has no ConstantOfShape kernel (ORT made the zeros on the CPU and copied them over): a broadcast zero.
      const z = fresh('c');
      constTensor(dtype, [0], [], z);
      return emit('Expand', [z, shapeOf(x)]);
    }
    return emit('ConstantOfShape', [shapeOf(x)], [{ name: 'value', type: ATTR.TENSOR, t: scalarTensorAttr(dtype, 0) }]);
  };
  /** Slice bounds for a WebGPU session: int32 (its Slice kernel takes no int64 bounds; ORT ran the slice on the CPU). */
  const sliceIndex = (t: string) => (opts.webgpu ? emit('Cast', [t], [int('to', 6)]) : t);

  // Runtime value of a dim as a 1-element int64 tensor.
  const dimCache = new Map<string, string>();
  let currentId = 0;
  const dimTensor = (d: Dim): string => {
    if (typeof d === 'number') return i64([d]);
    const hit = dimCache.get(d);
    if (hit) return hit;
    let out: string;
    const src = graph.dimSources.get(d);
    // A node may be the first carrier of a dim it derives (reshape to batch*seq): only an
    // earlier node can supply it; otherwise build it from its factors.
    if (src && src.node.id < currentId) {
      out = emit('Shape', [name(src.node)], [int('start', src.axis), int('end', src.axis + 1)]);
    } else {
      const m = toMonomial(d)!;
      if (m.syms.length === 1 && m.syms[0] === d) throw new Error(`onnx: dim '${d}' cannot be computed at run time`);
      out = i64([m.coef]);
      for (const s of m.syms) out = emit('Mul', [out, dimTensor(s)]);
    }
    dimCache.set(d, out);
    return out;
  };
  const shapeTensor = (dims: Dim[], like?: GNode): string => {
    if (dims.every((d) => typeof d === 'number')) return i64(dims as number[]);
    const parts = dims.map((d, i) => {
      if (d === -1) return i64([-1]);
      if (like && typeof d === 'string' && like.shape[i] === d) return i64([0]);
      return dimTensor(d);
    });
    return emit('Concat', parts, [int('axis', 0)]);
  };
  const dimScalarOf = (x: string, axis: number) => emit('Shape', [x], [int('start', axis), int('end', axis + 1)]);

  const scalarConst = (dtype: DType, v: number): string => {
    const nm = fresh('c');
    constTensor(dtype, [v], [], nm);
    return nm;
  };
  // W [N, K] from its codes [N, ⌈K/b⌉, b·bits/8] (uint8) and scales [N·⌈K/b⌉]: (q − 2^(bits−1)) · s.
  const dequant = (codes: string, scales: string, N: number, K: number, bits: number, blockSize: number, codesGated: boolean): string => {
    const kb = Math.ceil(K / blockSize);
    // On the CPU the codes are read only once the scales exist (a slice of all rows starting at 0·(the scales'
    // size)): a dequantization whose scales wait for something (the product's x, the backward's output gradient)
    // waits as a whole, and two of one weight with different gates differ from the codes on. Ungated, ORT's
    // common-subexpression elimination merged the forward's, the recomputed forward's and the backward's chains
    // from Cast(codes) to the scaling into one per weight, kept from the forward pass to the backward: the whole
    // base in float32 (the Qwen2.5-1.5B GRPO update past 9 GiB; docs/BENCHMARKS.md). Codes that are a gated slice
    // already (a row piece: quantizedBaseOps) are not sliced again. WebGPU: no uint8 Slice.
    const gated =
      opts.webgpu || codesGated
        ? codes
        : emit('Slice', [codes, emit('Mul', [emit('Shape', [scales], [int('start', 0), int('end', 1)]), i64([0])]), i64([N]), i64([0])]);
    const nibbles = (lo: string, hi: string) =>
      emit('Reshape', [emit('Concat', [emit('Unsqueeze', [lo, i64([3])]), emit('Unsqueeze', [hi, i64([3])])], [int('axis', 3)]), i64([N, kb, blockSize])]);
    let c: string;
    if (bits === 4 && !opts.webgpu) {
      // int4 on the CPU: the nibbles split in uint8 (high c >> 4, low c & 15), then one Cast: a byte per code until
      // the float32 weight (bench:quant-matmul `bsf4` against `ew4`, the float ops below).
      const u8 = (v: number) => {
        const nm = fresh('c');
        inits.push({ name: nm, dataType: 2, dims: [], rawData: Uint8Array.of(v) });
        return nm;
      };
      const hi = emit('BitShift', [gated, u8(4)], [{ name: 'direction', type: ATTR.STRING, s: new TextEncoder().encode('RIGHT') }]);
      c = emit('Cast', [nibbles(emit('BitwiseAnd', [gated, u8(15)]), hi)], [int('to', ft('float32'))]);
    } else {
      // Elementwise float ops every provider has (int4: high nibble ⌊c/16⌋, low c − 16·⌊c/16⌋).
      c = emit('Cast', [gated], [int('to', ft('float32'))]);
      if (bits === 4) {
        const hi = emit('Floor', [emit('Div', [c, scalarConst('float32', 16)])]);
        c = nibbles(emit('Sub', [c, emit('Mul', [hi, scalarConst('float32', 16)])]), hi);
      }
    }
    const w = emit('Mul', [emit('Sub', [c, scalarConst('float32', 2 ** (bits - 1))]), emit('Reshape', [scales, i64([N, kb, 1])])]);
    const full = emit('Reshape', [w, i64([N, kb * blockSize])]);
    return kb * blockSize !== K ? emit('Slice', [full, i64([0]), i64([K]), i64([1])]) : full;
  };
  // Part `index` of `count` along `axis` of x: [min(i·s, n), min((i+1)·s, n)) with s = ceil(n / count).
  const chunkBounds = (x: string, axis: number, index: number, count: number) => {
    const total = dimScalarOf(x, axis);
    const size = emit('Div', [emit('Add', [total, i64([count - 1])]), i64([count])]);
    const start = emit('Min', [emit('Mul', [size, i64([index])]), total]);
    const end = emit('Min', [emit('Mul', [size, i64([index + 1])]), total]);
    return { start, end, total };
  };

  // The fused Attention op (opset 23) on ORT's CPU provider; for WebGPU (no kernel in ORT 1.30)
  // and float64 reference runs, the same attention as MatMul/Softmax nodes.
  const fusedAttention = !opts.webgpu && !opts.float64;
  const presentOf = new Map<number, Record<number, string>>();
  for (const n of graph.nodes)
    if (n.op === 'attentionPresent') presentOf.set(n.inputs[0].id, { ...presentOf.get(n.inputs[0].id), [n.attrs.index as number]: name(n) });
  const attentionByMatMul = (ins: string[], out: string, presents: string[], a: Record<string, any>) => {
    const H = a.heads as number,
      Hkv = a.kvHeads as number,
      hd = a.headDim as number,
      rep = H / Hkv;
    const heads = (x: string, h: number) => emit('Transpose', [emit('Reshape', [x, i64([0, 0, h, hd])])], [ints('perm', [0, 2, 1, 3])]); // [B, h, T, hd]
    const [q, k, v, pastK, pastV, bias] = ins;
    const pk = emit('Concat', [pastK, heads(k, Hkv)], [int('axis', 2)], presents[0]);
    const pv = emit('Concat', [pastV, heads(v, Hkv)], [int('axis', 2)], presents[1]);
    const scaled = (x: string) => (a.scale === 1 ? x : emit('Mul', [x, scalarConst('float32', a.scale)]));
    let ctx: string;
    if (rep === 1) {
      const scores = emit('MatMul', [heads(q, H), emit('Transpose', [pk], [ints('perm', [0, 1, 3, 2])])]);
      ctx = emit('MatMul', [emit('Softmax', [emit('Add', [scaled(scores), bias])], [int('axis', -1)]), pv]);
    } else {
      // [B, Hkv, rep, T, hd] queries against keys broadcast over the group (as transformer.ts).
      const qg = emit('Reshape', [heads(q, H), i64([0, Hkv, rep, -1, hd])]);
      const kT = emit('Reshape', [emit('Transpose', [pk], [ints('perm', [0, 1, 3, 2])]), i64([0, Hkv, 1, hd, -1])]);
      const scores = emit('Add', [scaled(emit('MatMul', [qg, kT])), emit('Unsqueeze', [bias, i64([1])])]);
      const probs = emit('Softmax', [scores], [int('axis', -1)]);
      ctx = emit('Reshape', [emit('MatMul', [probs, emit('Reshape', [pv, i64([0, Hkv, 1, -1, hd])])]), i64([0, H, -1, hd])]);
    }
    emit('Reshape', [emit('Transpose', [ctx], [ints('perm', [0, 2, 1, 3])]), i64([0, 0, H * hd])], [], out);
  };

  // Only nodes some output depends on are exported (autodiff can leave unused nodes behind,
  // e.g. a gradient a later rule folded into another op).
  const live = reachable(Object.values(graph.outputs));
  for (const n of graph.nodes) {
    if (!live.has(n.id)) continue;
    const ins = n.inputs.map(name);
    const a = n.attrs as Record<string, any>;
    const out = name(n);
    currentId = n.id;
    if (n.op === 'input') continue;
    if (SIMPLE[n.op]) {
      emit(SIMPLE[n.op], ins, [], out);
      continue;
    }
    switch (n.op) {
      case 'const':
        constTensor(n.dtype, a.values, n.shape as number[], out);
        break;
      case 'cast':
        emit('Cast', ins, [int('to', ft(a.to))], out);
        break;
      case 'range': {
        const lim = ins.length ? ins[0] : emit('Cast', [emit('Squeeze', [dimTensor(a.n)])], [int('to', 6)]);
        const zero = fresh('c'),
          oneN = fresh('c');
        constTensor('int32', [0], [], zero);
        constTensor('int32', [1], [], oneN);
        emit('Range', [zero, lim, oneN], [], out);
        break;
      }
      case 'sum':
        emit('ReduceSum', [ins[0], i64(a.axes)], [int('keepdims', a.keepDims ? 1 : 0)], out);
        break;
      case 'mean':
        emit('ReduceMean', [ins[0], i64(a.axes)], [int('keepdims', a.keepDims ? 1 : 0)], out);
        break;
      case 'max':
        emit('ReduceMax', [ins[0], i64(a.axes)], [int('keepdims', a.keepDims ? 1 : 0)], out);
        break;
      case 'softmax':
        emit('Softmax', ins, [int('axis', a.axis)], out);
        break;
      case 'logSoftmax':
        if (opts.webgpu) {
          const ax = i64([a.axis]);
          const shifted = emit('Sub', [ins[0], emit('ReduceMax', [ins[0], ax], [int('keepdims', 1)])]);
          emit('Sub', [shifted, emit('Log', [emit('ReduceSum', [emit('Exp', [shifted]), ax], [int('keepdims', 1)])])], [], out);
        } else emit('LogSoftmax', ins, [int('axis', a.axis)], out);
        break;
      case 'reshape':
        emit('Reshape', [ins[0], shapeTensor(a.shape, n.inputs[0])], [], out);
        break;
      case 'reshapeLike':
        emit('Reshape', [ins[0], shapeOf(ins[1])], [], out);
        break;
      case 'transpose':
        emit('Transpose', ins, [ints('perm', a.perm)], out);
        break;
      case 'concat':
        emit('Concat', ins, [int('axis', a.axis)], out);
        break;
      case 'slice':
        emit('Slice', [ins[0], i64(a.starts), i64(a.ends), i64(a.axes)], [], out);
        break;
      case 'gatedSlice': {
        // slice, only once the second input exists: its starts are the constant + 0·(dep's first size), so two
        // gated slices of one tensor with different deps are different nodes (ORT's common-subexpression
        // elimination cannot merge them into one output kept alive for both).
        const zero = emit('Mul', [emit('Shape', [ins[1]], [int('start', 0), int('end', 1)]), i64([0])]);
        emit('Slice', [ins[0], emit('Add', [i64(a.starts), zero]), i64(a.ends), i64(a.axes)], [], out);
        break;
      }
      case 'unsqueeze':
        emit('Unsqueeze', [ins[0], i64(a.axes)], [], out);
        break;
      case 'squeeze':
        emit('Squeeze', [ins[0], i64(a.axes)], [], out);
        break;
      case 'expandAs':
        emit('Expand', [ins[0], shapeOf(ins[1])], [], out);
        break;
      case 'gather':
        emit('Gather', ins, [int('axis', 0)], out);
        break;
      case 'gatherElements':
        emit('GatherElements', ins, [int('axis', a.axis)], out);
        break;
      case 'zerosLike':
        zerosLike(ins[0], n.dtype);
        emitRename(nodes, out);
        break;
      case 'dimProduct': {
        const s = emit('Gather', [shapeOf(ins[0]), i64(a.axes)], [int('axis', 0)]);
        emit('Cast', [emit('ReduceProd', [s], [int('keepdims', 0)])], [int('to', ft(n.dtype))], out);
        break;
      }
      case 'gatherGrad': {
        const [table, idx, g] = ins;
        const rest = n.inputs[0].shape.slice(1);
        const restDims = rest.length === 0 ? [1] : rest;
        const rowSize = restDims.every((d) => typeof d === 'number')
          ? i64([(restDims as number[]).reduce((p, q) => p * q, 1)])
          : emit('ReduceProd', [emit('Shape', [table], [int('start', 1)])], [int('keepdims', 1)]);
        const flatShape = emit('Concat', [i64([-1]), rowSize], [int('axis', 0)]);
        const g2 = emit('Reshape', [g, flatShape]);
        const i2 = emit('Reshape', [idx, i64([-1, 1])]);
        const ie = emit('Expand', [emit('Cast', [i2], [int('to', opts.webgpu ? 6 : 7)]), shapeOf(g2)]);
        const z = emit('Reshape', [zerosLike(table, n.dtype), flatShape]);
        const sc = emit('ScatterElements', [z, ie, g2], [int('axis', 0), { name: 'reduction', type: ATTR.STRING, s: new TextEncoder().encode('add') }]);
        emit('Reshape', [sc, shapeOf(table)], [], out);
        break;
      }
      case 'scatterAddLike':
      case 'scatterAddInto': {
        const [x, idx, g] = ins;
        emit(
          'ScatterElements',
          [n.op === 'scatterAddLike' ? zerosLike(x, n.dtype) : x, idx, g],
          [int('axis', a.axis), { name: 'reduction', type: ATTR.STRING, s: new TextEncoder().encode('add') }],
          out,
        );
        break;
      }
      case 'sliceGrad': {
        const [x, g] = ins;
        const src = n.inputs[0];
        const r = src.shape.length;
        const begins: string[] = [],
          endsP: string[] = [];
        for (let ax = 0; ax < r; ax++) {
          const k = (a.axes as number[]).indexOf(ax);
          if (k < 0) {
            begins.push(i64([0]));
            endsP.push(i64([0]));
            continue;
          }
          const s0 = a.starts[k] as number,
            e0 = a.ends[k] as number;
          const d = src.shape[ax];
          if (typeof d === 'number') {
            const cl = (v: number) => Math.max(0, Math.min(d, v < 0 ? v + d : v));
            const s = cl(s0),
              e = Math.max(s, cl(e0));
            begins.push(i64([s]));
            endsP.push(i64([d - e]));
          } else {
            const dt = dimScalarOf(x, ax);
            const clamp = (v: number) => (v >= 0 ? emit('Min', [i64([v]), dt]) : emit('Max', [emit('Add', [dt, i64([v])]), i64([0])]));
            const s = clamp(s0);
            const e = emit('Max', [clamp(e0), s]);
            begins.push(s);
            endsP.push(emit('Sub', [dt, e]));
          }
        }
        const pads = emit('Concat', [...begins, ...endsP], [int('axis', 0)]);
        emit('Pad', [g, pads], [], out);
        break;
      }
      case 'initializer':
        // A constant of OnnxOptions.initializers, read by name (engine/model/quantize.ts: baked float32 weights).
        if (!opts.initializers?.[a.name as string]) throw new Error(`onnx: initializer '${a.name}' is read but OnnxOptions.initializers does not hold it`);
        break;
      case 'matmulNBits': {
        // com.microsoft.MatMulNBits: A [..., K] times dequantized B [N, K]ᵀ; B and its scales are initializers.
        for (const t of [a.codes, a.scales] as string[])
          if (!opts.initializers?.[t]) throw new Error(`onnx: matmulNBits reads initializer '${t}', which OnnxOptions.initializers does not hold`);
        nodes.push({
          opType: 'MatMulNBits',
          domain: 'com.microsoft',
          input: [ins[0], a.codes, a.scales],
          output: [out],
          attribute: [int('K', a.K), int('N', a.N), int('bits', a.bits), int('block_size', a.blockSize), int('accuracy_level', a.accuracyLevel)],
          name: fresh('MatMulNBits_node'),
        });
        contrib = true;
        break;
      }
      case 'qmatmul':
        // x [M, K] · Wᵀ with W [N, K] block-quantized (engine/model/quantize.ts quantizedBaseOps). On the CPU with
        // the codes a graph input (score and train sessions), W is dequantized with elementwise ops and multiplied
        // by MatMul: ORT's MatMulNBits pre-packs only constant codes and otherwise dequantizes B per call in a slow
        // path (the Qwen2.5-0.5B LoRA step 14.8× float32's: docs/BENCHMARKS.md, bench:quant-base). Constant codes
        // (the CPU decode session) and WebGPU (its MatMulNBits shader) take com.microsoft.MatMulNBits.
        if (!opts.webgpu && n.inputs[1]!.op !== 'initializer') {
          // The scales (and through them the codes: dequant) wait for x (+ 0·x's first size): each product
          // dequantizes its own copy, freed after its Gemm, and a block recomputed in the backward pass dequantizes
          // again, instead of ORT merging identical dequantizations into one kept from the forward pass on.
          const zero = emit('Mul', [
            emit('Cast', [emit('Shape', [ins[0]!], [int('start', 0), int('end', 1)])], [int('to', ft('float32'))]),
            scalarConst('float32', 0),
          ]);
          const scales = emit('Add', [ins[2]!, zero]);
          // MatMul of the transposed weight, which ORT fuses into FusedMatMul (transB), the kernel of the float32
          // sessions' products (Gemm(transB) before: the 0.5B step the same within noise, docs/BENCHMARKS.md 2026-11-28).
          const w = dequant(ins[1]!, scales, a.N, a.K, a.bits, a.blockSize, n.inputs[1]!.op === 'gatedSlice');
          emit('MatMul', [ins[0]!, emit('Transpose', [w], [ints('perm', [1, 0])])], [], out);
          break;
        }
        nodes.push({
          opType: 'MatMulNBits',
          domain: 'com.microsoft',
          input: ins,
          output: [out],
          attribute: [int('K', a.K), int('N', a.N), int('bits', a.bits), int('block_size', a.blockSize), int('accuracy_level', a.accuracyLevel)],
          name: fresh('MatMulNBits_node'),
        });
        contrib = true;
        break;
      case 'dequantNBits':
      case 'quantWeightT': {
        const src = n.op === 'dequantNBits' ? n : n.inputs[0];
        const [codes, scales] = n.op === 'dequantNBits' ? ins : src.inputs.map(name);
        const { N, K, bits, blockSize } = src.attrs as { N: number; K: number; bits: number; blockSize: number };
        const full = dequant(codes!, scales!, N, K, bits, blockSize, src.inputs[0]!.op === 'gatedSlice');
        if (n.op === 'dequantNBits') emit('Identity', [full], [], out);
        else emit('Transpose', [full], [ints('perm', [1, 0])], out);
        break;
      }
      case 'gatherNBits': {
        // Rows `ids` of a block-quantized table W [N, K] (a frozen embedding): the rows' codes and
        // scales are gathered, then dequantized as dequantNBits does: [...ids, K], no float32 table.
        const [codes, scales, ids] = ins;
        const { N, K, bits, blockSize } = a as { N: number; K: number; bits: number; blockSize: number };
        const kb = Math.ceil(K / blockSize);
        const r = n.inputs[2].shape.length;
        const keep = (...tail: number[]) => i64([...new Array<number>(r).fill(0), ...tail]);
        let c = emit('Cast', [emit('Gather', [codes, ids], [int('axis', 0)])], [int('to', ft('float32'))]); // [...ids, kb, blob]
        if (bits === 4) {
          const hi = emit('Floor', [emit('Div', [c, scalarConst('float32', 16)])]);
          const lo = emit('Sub', [c, emit('Mul', [hi, scalarConst('float32', 16)])]);
          const pair = emit('Concat', [emit('Unsqueeze', [lo, i64([r + 2])]), emit('Unsqueeze', [hi, i64([r + 2])])], [int('axis', r + 2)]);
          c = emit('Reshape', [pair, keep(kb, blockSize)]);
        }
        const s = emit('Gather', [emit('Reshape', [scales, i64([N, kb, 1])]), ids], [int('axis', 0)]); // [...ids, kb, 1]
        const w = emit('Reshape', [emit('Mul', [emit('Sub', [c, scalarConst('float32', 2 ** (bits - 1))]), s]), keep(kb * blockSize)]);
        if (kb * blockSize !== K) emit('Slice', [w, i64([0]), i64([K]), i64([r])], [], out);
        else emit('Identity', [w], [], out);
        break;
      }
      case 'recomputeEntry':
        emit('Identity', [ins[0]], [], out);
        break;
      case 'after': {
        // x + 0·(dep's first size): the value of x, but only once dep exists (an ordering edge
        // ORT keeps; a size, not a value of dep, so no inf or NaN can leak in).
        const size = emit('Cast', [emit('Shape', [ins[1]], [int('start', 0), int('end', 1)])], [int('to', ft(n.inputs[0].dtype))]);
        const z = emit('Mul', [size, scalarConst(n.inputs[0].dtype, 0)]);
        emit('Add', [ins[0], z], [], out);
        break;
      }
      case 'chunk':
      case 'chunkGrad': {
        const x = ins[0];
        const { start, end, total } = chunkBounds(x, a.axis, a.index, a.count);
        if (n.op === 'chunk') emit('Slice', [x, sliceIndex(start), sliceIndex(end), sliceIndex(i64([a.axis]))], [], out);
        else {
          const r = n.inputs[0].shape.length;
          const zero = i64([0]);
          const begins = Array.from({ length: r }, (_, ax) => (ax === a.axis ? start : zero));
          const endsP = Array.from({ length: r }, (_, ax) => (ax === a.axis ? emit('Sub', [total, end]) : zero));
          emit('Pad', [ins[1], emit('Concat', [...begins, ...endsP], [int('axis', 0)])], [], out);
        }
        break;
      }
      case 'concatGrad': {
        const g = ins[0];
        const parts = ins.slice(1);
        let start = i64([0]);
        for (let j = 0; j < a.index; j++) start = emit('Add', [start, dimScalarOf(parts[j], a.axis)]);
        const end = emit('Add', [start, dimScalarOf(parts[a.index], a.axis)]);
        emit('Slice', [g, sliceIndex(start), sliceIndex(end), sliceIndex(i64([a.axis]))], [], out);
        break;
      }
      case 'attention': {
        // Its present outputs carry the names of the attentionPresent nodes that read them.
        const presents = [1, 2].map((i) => presentOf.get(n.id)?.[i] ?? fresh('present'));
        if (fusedAttention) {
          nodes.push({
            opType: 'Attention',
            input: [ins[0], ins[1], ins[2], ins[5], ins[3], ins[4]],
            // A present nothing reads is left out (an optional output of the op: no graph output to copy it to).
            output: [out, ...[1, 2].map((i, j) => (presentOf.get(n.id)?.[i] ? presents[j]! : ''))],
            attribute: [int('q_num_heads', a.heads), int('kv_num_heads', a.kvHeads), { name: 'scale', type: ATTR.FLOAT, f: a.scale }, int('is_causal', 0)],
            name: fresh('Attention_node'),
          });
        } else attentionByMatMul(ins, out, presents, a);
        break;
      }
      case 'attentionPresent':
        break; // written by its attention node
      default:
        throw new Error(`onnx: op '${n.op}' has no ONNX lowering`);
    }
  }

  const valueInfo = (nm: string, dtype: DType, shape: Dim[]): onnxProto.onnx.IValueInfoProto => ({
    name: nm,
    type: { tensorType: { elemType: ft(dtype), shape: { dim: shape.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } },
  });
  const outputs: onnxProto.onnx.IValueInfoProto[] = [];
  for (const [nm, node] of Object.entries(graph.outputs)) {
    emit('Identity', [name(node)], [], nm);
    outputs.push(valueInfo(nm, node.dtype, node.shape));
  }
  for (const [nm, t] of Object.entries(opts.initializers ?? {}))
    inits.push(
      t.external
        ? {
            name: nm,
            dataType: t.dataType,
            dims: t.dims,
            dataLocation: onnx.TensorProto.DataLocation.EXTERNAL,
            externalData: [
              { key: 'location', value: nm },
              { key: 'offset', value: '0' },
              { key: 'length', value: String(t.external.length) },
            ],
          }
        : { name: nm, dataType: t.dataType, dims: t.dims, rawData: t.raw },
    );
  const model = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'arbor',
    // Opset 23 only where the fused Attention op is used (the decode graph on the CPU); com.microsoft for MatMulNBits.
    opsetImport: [
      { domain: '', version: fusedAttention && graph.nodes.some((n) => n.op === 'attention' && live.has(n.id)) ? 23 : OPSET },
      ...(contrib ? [{ domain: 'com.microsoft', version: 1 }] : []),
    ],
    graph: {
      name: 'arbor',
      node: nodes,
      initializer: inits,
      input: graph.inputs.map((i) => valueInfo(i.spec.name, i.spec.dtype, i.spec.shape)),
      output: outputs,
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

/** Rename the output of the last emitted node (used where a helper returns a fresh name). */
function emitRename(nodes: onnxProto.onnx.INodeProto[], out: string): void {
  nodes[nodes.length - 1].output = [out];
}
