/**
 * Quantized rollouts (`rollout.quantize`): the decode session samples with a block-quantized copy
 * of the policy's linear weights while scoring and training stay float32.
 *
 * Numerics (hand-written, host side): each weight W [N, K] (HF Linear layout, out × in) is cut
 * along K into blocks of QUANT_BLOCK values; a block gets one float scale s = max|w| / (2^(b−1) − 1)
 * and codes q = round(w / s) + 2^(b−1), clamped to [1, 2^b − 1] (symmetric: no zero-point tensor,
 * the implicit zero point 2^(b−1) of ONNX Runtime's MatMulNBits), so w ≈ (q − 2^(b−1)) · s.
 * Codes are laid out as MatMulNBits reads them: B [N, ⌈K / block⌉, block · b / 8] uint8, packed
 * low bits first along K (int4: element 2j in the low nibble of byte j, 2j+1 in the high one);
 * scales [N · ⌈K / block⌉] float.
 *
 * Graph side: the decode program is traced unchanged through a proxy of the op set
 * (quantizedOps) that turns `matmul(x, transpose(W, [1, 0]))` of a planned weight input W into one
 * `com.microsoft.MatMulNBits` node whose codes and scales are initializers of the session (ORT
 * pre-packs only constant B; with B as a graph input its CPU kernel dequantizes B on every call,
 * 14× slower than float32). So the quantized session is rebuilt when the weights change
 * (PolicyModel: once per weight version). accuracy_level 4: activations are quantized to int8
 * per block too and the products accumulate in int32 (the fast CPU path: the float-compute path
 * for 8 bits is not available on AVX2 and falls back to dequantizing per call).
 * Measured: `npm run bench:quant-matmul` (operators) and `npm run bench:quant` (rollouts); docs/areas/train.md.
 *
 * The same proxy with `bits: 32` bakes float32 weights into the decode session (PolicyModel
 * option `bakeDecodeWeights`): each planned W becomes an initializer holding Wᵀ [K, N] read by a
 * plain MatMul, which ORT pre-packs once for its GEMM instead of packing the weight operand on
 * every call (`npm run bench:rollout -- --baseline inputs` measures the two side by side).
 */
import type { DType, Ops, Shape } from '../tensor/ops';
import type { GNode, GraphOps, InputSpec } from '../tensor/graph';
import type { HostTensor } from '../tensor/host';
import type { OnnxInitializer } from '../tensor/onnx';
import type { ModelConfig } from './config';

export const QUANT_MODES = ['none', 'int8', 'int4'] as const;
export type QuantMode = (typeof QUANT_MODES)[number];
export const QUANT_BITS: Record<Exclude<QuantMode, 'none'>, 4 | 8> = { int8: 8, int4: 4 };
/** Values of K per scale (MatMulNBits block_size: a power of two ≥ 16). */
export const QUANT_BLOCK = 32;
/** MatMulNBits accuracy_level: 4 = int8 activations, int32 accumulation (see the file comment). */
export const QUANT_ACCURACY_LEVEL = 4;

export interface QuantizedMatrix {
  bits: 4 | 8;
  blockSize: number;
  /** Rows (output features) and columns (input features) of W. */
  N: number;
  K: number;
  /** [N, ⌈K / blockSize⌉, blockSize · bits / 8] codes. */
  codes: Uint8Array;
  /** [N · ⌈K / blockSize⌉] scales. */
  scales: Float32Array;
}

/**
 * Bytes of one quantized linear weight W [N, K] (out × in; a [K, N] operand of x·Wᵀ has the same
 * count) at `bits` and `blockSize`: codes N · ⌈K / block⌉ · block · bits / 8 plus one float32
 * scale per block (the padding of a last partial block counts). The memory plan reads this.
 */
export function quantizedBytes(N: number, K: number, bits: 4 | 8, blockSize = QUANT_BLOCK): number {
  const kb = Math.ceil(K / blockSize);
  return N * kb * ((blockSize * bits) / 8) + N * kb * 4;
}

/** Block-wise symmetric quantization of W [N, K] (row-major, HF Linear layout) for MatMulNBits. */
export function quantizeBlockwise(w: Float32Array, N: number, K: number, bits: 4 | 8, blockSize = QUANT_BLOCK): QuantizedMatrix {
  if (w.length !== N * K) throw new Error(`quantizeBlockwise: ${w.length} values for [${N}, ${K}]`);
  const m = emptyQuantized(N, K, bits, blockSize);
  quantizeRowsInto(m, w, 0);
  return m;
}

/** A quantized W [N, K] whose codes and scales are still to be written (quantizeRowsInto). */
export function emptyQuantized(N: number, K: number, bits: 4 | 8, blockSize = QUANT_BLOCK): QuantizedMatrix {
  if (blockSize < 16 || (blockSize & (blockSize - 1)) !== 0) throw new Error(`quantizeBlockwise: block size ${blockSize} is not a power of two ≥ 16`);
  const kb = Math.ceil(K / blockSize);
  return { bits, blockSize, N, K, codes: new Uint8Array(N * kb * ((blockSize * bits) / 8)), scales: new Float32Array(N * kb) };
}

/**
 * Quantize rows [row0, row0 + rows.length / K) of W into `m` (blocks never cross a row, so a
 * matrix quantized a few rows at a time has the codes of quantizeBlockwise on the whole): a large
 * weight is read and quantized in row chunks, never held in float32 whole (loadCheckpoint).
 */
export function quantizeRowsInto(m: QuantizedMatrix, rows: Float32Array, row0: number): void {
  const { N, K, bits, blockSize, codes, scales } = m;
  const count = rows.length / K;
  if (!Number.isInteger(count) || row0 < 0 || row0 + count > N) throw new Error(`quantizeRowsInto: ${rows.length} values from row ${row0} of [${N}, ${K}]`);
  const kb = Math.ceil(K / blockSize);
  const blob = (blockSize * bits) / 8;
  const mid = 1 << (bits - 1);
  const qmax = mid - 1;
  const w = rows;
  for (let r = 0; r < count; r++) {
    const n = row0 + r;
    const row = r * K;
    for (let b = 0; b < kb; b++) {
      const k0 = b * blockSize,
        k1 = Math.min(K, k0 + blockSize);
      let amax = 0;
      for (let k = k0; k < k1; k++) amax = Math.max(amax, Math.abs(w[row + k]!));
      const s = Math.fround(amax / qmax);
      scales[n * kb + b] = s;
      const inv = s > 0 ? 1 / s : 0;
      const off = (n * kb + b) * blob;
      const len = k1 - k0;
      // |w · inv| ≤ qmax up to rounding, so the clamp only catches the rounding; padding past K is code `mid` (value 0).
      if (bits === 8) {
        for (let j = 0; j < len; j++) {
          const q = Math.round(w[row + k0 + j]! * inv);
          codes[off + j] = (q > qmax ? qmax : q < -qmax ? -qmax : q) + mid;
        }
        for (let j = len; j < blockSize; j++) codes[off + j] = mid;
      } else
        for (let j = 0; j < blockSize; j += 2) {
          let lo = j < len ? Math.round(w[row + k0 + j]! * inv) : 0;
          let hi = j + 1 < len ? Math.round(w[row + k0 + j + 1]! * inv) : 0;
          lo = lo > qmax ? qmax : lo < -qmax ? -qmax : lo;
          hi = hi > qmax ? qmax : hi < -qmax ? -qmax : hi;
          codes[off + (j >> 1)] = (lo + mid) | ((hi + mid) << 4);
        }
    }
  }
}

/** W [N, K] back from its codes: (q − 2^(b−1)) · s (the reference MatMulNBits computes with). */
export function dequantizeBlockwise(m: QuantizedMatrix): Float32Array {
  const { bits, blockSize, N, K, codes, scales } = m;
  const kb = Math.ceil(K / blockSize);
  const blob = (blockSize * bits) / 8;
  const mid = 1 << (bits - 1);
  const out = new Float32Array(N * K);
  for (let n = 0; n < N; n++)
    for (let b = 0; b < kb; b++) {
      const s = scales[n * kb + b]!;
      const off = (n * kb + b) * blob;
      for (let j = 0; j < blockSize && b * blockSize + j < K; j++) {
        const q = bits === 8 ? codes[off + j]! : (codes[off + (j >> 1)]! >> ((j & 1) * 4)) & 15;
        out[n * K + b * blockSize + j] = Math.fround((q - mid) * s);
      }
    }
  return out;
}

/**
 * The weights the quantized decode session reads as codes: every layer's attention and MLP
 * projections and the LM head (the embedding matrix when tied: the lookup keeps the float32
 * table). Norms, biases, embeddings and LoRA adapters stay float32.
 */
export function quantizedWeightNames(c: ModelConfig): string[] {
  const out: string[] = [];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    for (const m of ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj', 'self_attn.o_proj', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'])
      out.push(`${p}.${m}.weight`);
  }
  out.push(c.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
  return out;
}

/** Name of a baked float32 weight's initializer (Wᵀ, [K, N]). */
export const bakedName = (weight: string) => `${weight}::wT`;

/** Wᵀ [K, N] of W [N, K] (row-major). */
export function transposeWeight(w: Float32Array, N: number, K: number): Float32Array {
  const out = new Float32Array(N * K);
  for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) out[k * N + n] = w[n * K + k]!;
  return out;
}

/** The ONNX initializers of baked float32 weights (each Wᵀ [K, N]), by the names the MatMul nodes read. */
export function bakedInitializers(mats: Map<string, { N: number; K: number; wT: Float32Array }>): Record<string, OnnxInitializer> {
  const out: Record<string, OnnxInitializer> = {};
  for (const [name, m] of mats) out[bakedName(name)] = { dataType: 1, dims: [m.K, m.N], raw: new Uint8Array(m.wT.buffer, m.wT.byteOffset, m.wT.byteLength) };
  return out;
}

/** Names of a quantized weight's two initializers in the ONNX model. */
export const codesName = (weight: string) => `${weight}::qcodes`;
export const scalesName = (weight: string) => `${weight}::qscales`;

/** The ONNX initializers of quantized weights (codes uint8, scales float), by the names the MatMulNBits nodes read. */
export function quantizedInitializers(mats: Map<string, QuantizedMatrix>): Record<string, OnnxInitializer> {
  const out: Record<string, OnnxInitializer> = {};
  for (const [name, m] of mats) {
    const kb = Math.ceil(m.K / m.blockSize);
    out[codesName(name)] = { dataType: 2, dims: [m.N, kb, (m.blockSize * m.bits) / 8], raw: m.codes };
    out[scalesName(name)] = { dataType: 1, dims: [m.N * kb], raw: new Uint8Array(m.scales.buffer, m.scales.byteOffset, m.scales.byteLength) };
  }
  return out;
}

/** quantizedInitializers as external initializers: their bytes are the worker's persistent feeds of the same names (RunnerOptions.externalFeeds). */
export function externalQuantizedInitializers(mats: Map<string, { N: number; K: number; bits: number; blockSize: number }>): Record<string, OnnxInitializer> {
  const out: Record<string, OnnxInitializer> = {};
  for (const [name, m] of mats) {
    const kb = Math.ceil(m.K / m.blockSize);
    const blob = (m.blockSize * m.bits) / 8;
    out[codesName(name)] = { dataType: 2, dims: [m.N, kb, blob], external: { length: m.N * kb * blob } };
    out[scalesName(name)] = { dataType: 1, dims: [m.N * kb], external: { length: m.N * kb * 4 } };
  }
  return out;
}

/**
 * The op set of the graph recorder with every `matmul(x, transpose(W, [1, 0]))` of a weight input
 * named in `plan` recorded as a MatMulNBits node (engine/tensor/onnx.ts lowers it; its codes and
 * scales are the session's initializers, see quantizedInitializers). Any other use of such a
 * transpose has no lowering and fails the export, naming the op. A weight planned with `bits: 32`
 * instead reads its float32 Wᵀ initializer (bakedInitializers) through an ordinary matmul.
 */
export function quantizedOps(o: Ops<GNode>, plan: Map<string, { bits: 4 | 8 | 32; blockSize: number }>): Ops<GNode> {
  const g = o as GraphOps;
  const planned = (x: GNode) => x.op === 'input' && plan.has(x.attrs.name as string);
  return new Proxy(o, {
    get(target, key) {
      if (key === 'transpose')
        return (x: GNode, perm: number[]) => {
          if (!planned(x) || perm.length !== 2 || perm[0] !== 1) return target.transpose(x, perm);
          const [N, K] = x.shape;
          if (plan.get(x.attrs.name as string)!.bits === 32) return g.record('initializer', [], { name: bakedName(x.attrs.name as string) }, x.dtype, [K!, N!]);
          return g.record('quantWeightT', [x], { weight: x.attrs.name }, x.dtype, [K!, N!]);
        };
      if (key === 'matmul')
        return (a: GNode, b: GNode) => {
          if (b.op !== 'quantWeightT') return target.matmul(a, b);
          const name = b.attrs.weight as string;
          const { bits, blockSize } = plan.get(name)! as { bits: 4 | 8; blockSize: number };
          const [K, N] = b.shape as number[];
          const k = a.shape[a.shape.length - 1];
          if (typeof k === 'number' && k !== K) throw new Error(`matmul: inner dims differ: [${a.shape}] x quantized ${name} [${K}, ${N}]`);
          const shape: Shape = [...a.shape.slice(0, -1), N!];
          return g.record(
            'matmulNBits',
            [a],
            { codes: codesName(name), scales: scalesName(name), K, N, bits, blockSize, accuracyLevel: QUANT_ACCURACY_LEVEL },
            'float32' as DType,
            shape,
          );
        };
      const v = (target as unknown as Record<string | symbol, unknown>)[key];
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

// ---- The quantized frozen base (`model.quantize_base`) -------------------------------------
//
// Under LoRA the base's linear weights never change, so they are quantized once at load and the
// float32 arrays are dropped: every program (score, train, decode) reads each projection W [N, K]
// as codes + scales. In the graph W is a `dequantNBits` node over the two (a graph input each, or
// an initializer of a baked CPU decode session); quantizedBaseOps turns `x · transpose(W)` into one
// MatMulNBits node (`qmatmul`), whose gradient dequantizes W in the backward pass one layer at a
// time (engine/tensor/autodiff.ts), so no float32 copy of the base exists at any point. The LM
// head (at HEAD_QUANT_BITS) and an untied embedding table are quantized too (a lookup dequantizes
// the rows it reads: gatherNBits); a weight larger than QUANT_PIECE_BYTES dequantized (the head) is
// read in pieces of vocabulary rows, so no kernel dequantizes it whole; the norms and the adapters
// stay float32 inputs.

/** `model.quantize_base`: bits and values per scale of the frozen base's linear weights. */
export interface BaseQuantSpec {
  bits: 4 | 8;
  blockSize: number;
}

/** The spec of a config's `model.quantize_base` / `model.quantize_block` (undefined for 'none'). */
export function baseQuantSpec(mode: QuantMode | undefined, blockSize = QUANT_BLOCK): BaseQuantSpec | undefined {
  if (!mode || mode === 'none') return undefined;
  return { bits: QUANT_BITS[mode], blockSize };
}

/**
 * The weights a quantized base stores as codes: every layer's q/k/v/o and MLP projections, the LM
 * head (a tied table is the head: its lookup reads the used rows' codes, gatherNBits) and an untied
 * embedding table (gatherNBits too). Norms, biases and the adapters stay float32.
 */
export function baseQuantNames(c: ModelConfig): string[] {
  return c.tieWordEmbeddings ? quantizedWeightNames(c) : ['model.embed_tokens.weight', ...quantizedWeightNames(c)];
}

/**
 * Bits of the LM head (with a tied table, the embedding) in a quantized base: 8 whatever the
 * base's bits. The head's rounding reaches every logit directly, with no later layer to average
 * it out; measured on the trained tiny SFT model (docs/areas/model.md "The LM head at 8 bits"),
 * KL to float32 of the int4 base: float32 head 0.0176, 8-bit head 0.0185, 4-bit head 0.0463.
 * At 8 bits it is still 3.6× smaller than float32 (Qwen2.5-1.5B: 933 → 263 MB; Qwen3-8B: 2.49 →
 * 0.70 GB). The same choice as llama.cpp's 4-bit mixes, which keep output.weight at 6–8 bits.
 */
export const HEAD_QUANT_BITS = 8;

/** The LM head's weight name (the embedding table when tied). */
export function headWeightName(c: ModelConfig): string {
  return c.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
}

/** Each quantized weight of a base at `spec` with its own bits: the spec's, the LM head HEAD_QUANT_BITS at least. */
export function baseQuantLayout(c: ModelConfig, spec: BaseQuantSpec): Map<string, BaseQuantSpec> {
  const head = headWeightName(c);
  const headSpec: BaseQuantSpec = { bits: Math.max(spec.bits, HEAD_QUANT_BITS) as 4 | 8, blockSize: spec.blockSize };
  return new Map(baseQuantNames(c).map((n) => [n, n === head ? headSpec : spec] as const));
}

/** The program inputs with each quantized weight W [N, K] replaced by its codes (uint8) and scales (float32) inputs. */
export function quantizedBaseSpecs(specs: InputSpec[], layout: Map<string, BaseQuantSpec>): InputSpec[] {
  const out: InputSpec[] = [];
  for (const s of specs) {
    const spec = layout.get(s.name);
    if (!spec) {
      out.push(s);
      continue;
    }
    const [N, K] = s.shape as number[];
    const kb = Math.ceil(K! / spec.blockSize);
    out.push({ name: codesName(s.name), dtype: 'uint8', shape: [N!, kb, (spec.blockSize * spec.bits) / 8] });
    out.push({ name: scalesName(s.name), dtype: 'float32', shape: [N! * kb] });
  }
  return out;
}

/** The input names of the quantized weights' codes and scales. */
export function quantizedFeedNames(mats: Map<string, unknown>): string[] {
  return [...mats.keys()].flatMap((n) => [codesName(n), scalesName(n)]);
}

/** Feeds of a quantized weight's two inputs (quantizedBaseSpecs). */
export function quantizedFeeds(name: string, m: QuantizedMatrix): Record<string, HostTensor> {
  const kb = Math.ceil(m.K / m.blockSize);
  return {
    [codesName(name)]: { dtype: 'uint8', shape: [m.N, kb, (m.blockSize * m.bits) / 8], data: m.codes },
    [scalesName(name)]: { dtype: 'float32', shape: [m.N * kb], data: m.scales },
  };
}

/**
 * Trace `program` with the quantized weights of `layout` read as codes + scales: from the graph's
 * inputs (`source: 'input'`, specs from quantizedBaseSpecs) or from initializers of the session
 * (`'initializer'`, quantizedInitializers; a baked CPU decode session). Each x · Wᵀ of such a
 * weight becomes one MatMulNBits at `accuracyLevel` (0: float32 products of the dequantized
 * weight, as the float reference computes; 4: int8 activations, the CPU's fast decode path; or
 * per weight by its bits).
 */
export function withQuantizedBase(
  program: (o: Ops<GNode>, x: Record<string, GNode>) => Record<string, GNode>,
  layout: Map<string, BaseQuantSpec>,
  shapes: Record<string, number[]>,
  source: 'input' | 'initializer',
  accuracyLevel: 0 | 4 | ((bits: 4 | 8) => 0 | 4),
  pieceBytes = QUANT_PIECE_BYTES,
): (o: Ops<GNode>, x: Record<string, GNode>) => Record<string, GNode> {
  return (o, x) => {
    const g = o as GraphOps;
    const xs: Record<string, GNode> = { ...x };
    for (const [name, spec] of layout) {
      const [N, K] = shapes[name]!;
      const kb = Math.ceil(K! / spec.blockSize);
      const codes =
        source === 'input' ? x[codesName(name)]! : g.record('initializer', [], { name: codesName(name) }, 'uint8', [N!, kb, (spec.blockSize * spec.bits) / 8]);
      const scales = source === 'input' ? x[scalesName(name)]! : g.record('initializer', [], { name: scalesName(name) }, 'float32', [N! * kb]);
      if (!codes || !scales) throw new Error(`withQuantizedBase: no codes/scales input for ${name}`);
      xs[name] = g.record('dequantNBits', [codes, scales], { N, K, bits: spec.bits, blockSize: spec.blockSize, weight: name }, 'float32', [N!, K!]);
    }
    return program(quantizedBaseOps(o, accuracyLevel, pieceBytes), xs);
  };
}

/**
 * Float32 bytes of the largest part of a quantized weight dequantized at once. The score and train
 * sessions dequantize each weight for its product (engine/tensor/onnx.ts `qmatmul`: on the CPU
 * elementwise ops, then Gemm; WebGPU's MatMulNBits over codes that are an input), and the frozen
 * head's p·W reads W dequantized: at Qwen3-8B's LM head [151,936 × 4,096] that is 2.49 GB, more
 * than its codes and scales (0.70 GB). A weight above this size is read as row pieces of at most
 * this size (quantizedBaseOps): 38 at that head, 14 at Qwen2.5-1.5B's; no linear layer of the
 * released shapes is split (Qwen3-8B's MLP: 235 MB). The dequantization's elementwise chain holds
 * twice its output at its peak, so 64 MiB pieces cost 128 MiB at once.
 */
export const QUANT_PIECE_BYTES = 64 * 2 ** 20;

/** The row ranges [start, end) of W [N, K] read as pieces of at most QUANT_PIECE_BYTES (one range when it fits). */
export function quantPieces(N: number, K: number, pieceBytes = QUANT_PIECE_BYTES): Array<[number, number]> {
  const n = Math.max(1, Math.ceil((N * K * 4) / pieceBytes));
  const rows = Math.ceil(N / n);
  const out: Array<[number, number]> = [];
  for (let s = 0; s < N; s += rows) out.push([s, Math.min(N, s + rows)]);
  return out;
}

/**
 * The op set with `matmul(x, transpose(W, [1, 0]))` of a dequantNBits weight W recorded as one
 * `qmatmul` (MatMulNBits) node, and `gather(W, ids)` as `gatherNBits` (the rows' codes, then
 * dequantized). `matmul(y, W)` (y [..., N]) reads the dequantized float32 matrix. A W above
 * QUANT_PIECE_BYTES float32 is read in row pieces (quantPieces): x · Wᵀ as the concatenation of
 * each piece's MatMulNBits, y · W as the sum of y's column slices times each dequantized piece.
 */
export function quantizedBaseOps(o: Ops<GNode>, accuracyLevel: 0 | 4 | ((bits: 4 | 8) => 0 | 4), pieceBytes = QUANT_PIECE_BYTES): Ops<GNode> {
  const g = o as GraphOps;
  const accuracy = (bits: number) => (typeof accuracyLevel === 'number' ? accuracyLevel : accuracyLevel(bits as 4 | 8));
  type Q = { N: number; K: number; bits: number; blockSize: number; weight?: string };
  // The row pieces of the dequantNBits node w (quantPieces): [start, end], or null when it is read whole.
  const ranges = (w: GNode) => {
    const { N, K } = w.attrs as Q;
    const r = quantPieces(N, K, pieceBytes);
    return r.length > 1 ? r : null;
  };
  // Rows [s, e) of w's codes and scales, read once `dep` exists (gatedSlice). Each piece waits for the previous
  // piece's product, so one piece is dequantized at a time; and the same piece read by two head chunks is two
  // slices, never one merged by ONNX Runtime's common-subexpression elimination (a merged dequantized piece would
  // live from the first chunk to the last: all pieces together, the float32 head).
  const piece = (w: GNode, s: number, e: number, dep: GNode) => {
    const { K, blockSize } = w.attrs as Q;
    const kb = Math.ceil(K / blockSize);
    const [codes, scales] = w.inputs as [GNode, GNode];
    const gated = (x: GNode, a: number, b: number) =>
      g.record('gatedSlice', [x, dep], { starts: [a], ends: [b], axes: [0] }, x.dtype, [b - a, ...x.shape.slice(1)]);
    return [gated(codes, s, e), gated(scales, s * kb, e * kb)] as const;
  };
  // A dequantNBits node marked `plain` (rowPieces' reads) is an ordinary float32 tensor: its products are not rewritten.
  const quantized = (x: GNode) => x.op === 'dequantNBits' && !x.attrs.plain;
  return new Proxy(o, {
    get(target, key) {
      if (key === 'rowPieces')
        return (w: GNode) => {
          if (!quantized(w)) return undefined;
          const { N, K, bits, blockSize, weight } = w.attrs as Q;
          const rs = quantPieces(N, K, pieceBytes);
          const [codes, scales] = w.inputs as [GNode, GNode];
          return rs.map(([s, e]) => (dep: GNode) => {
            // One piece: the codes whole, gated behind the scales (as the backward's dequantization is: autodiff.ts).
            const [c, sc] = rs.length > 1 ? piece(w, s, e, dep) : [codes, g.after(scales, dep)];
            return g.record('dequantNBits', [c, sc], { N: e - s, K, bits, blockSize, weight, plain: true }, 'float32', [e - s, K]);
          });
        };
      if (key === 'transpose')
        return (x: GNode, perm: number[]) => {
          if (!quantized(x) || perm.length !== 2 || perm[0] !== 1) return target.transpose(x, perm);
          return g.record('quantWeightT', [x], {}, x.dtype, [x.shape[1]!, x.shape[0]!]);
        };
      if (key === 'gather')
        return (table: GNode, ids: GNode) => {
          if (!quantized(table)) return target.gather(table, ids);
          const { N, K, bits, blockSize } = table.attrs as Q;
          return g.record('gatherNBits', [table.inputs[0]!, table.inputs[1]!, ids], { N, K, bits, blockSize }, 'float32', [...ids.shape, K]);
        };
      if (key === 'matmul')
        return (a: GNode, b: GNode) => {
          if (quantized(b) && a.shape.length === 2) {
            // y · W, W [N, K]: Σ over pieces of y[:, s:e] · W[s:e].
            const rs = ranges(b);
            if (!rs) return target.matmul(a, b);
            const { K, bits, blockSize, weight } = b.attrs as Q;
            let sum: GNode | undefined;
            for (const [s, e] of rs) {
              const [codes, scales] = piece(b, s, e, sum ?? a);
              const w = g.record('dequantNBits', [codes, scales], { N: e - s, K, bits, blockSize, weight }, 'float32', [e - s, K]);
              const part = target.matmul(o.slice(a, [s], [e], [1]), w);
              sum = sum ? target.add(sum, part) : part;
            }
            return sum!;
          }
          if (b.op !== 'quantWeightT' || a.shape.length !== 2) return target.matmul(a, b);
          const w = b.inputs[0]!;
          const { N, K, bits, blockSize } = w.attrs as Q;
          const k = a.shape[1];
          if (typeof k === 'number' && k !== K) throw new Error(`matmul: inner dims differ: [${a.shape}] x quantized ${w.attrs.weight} [${K}, ${N}]`);
          const qmatmul = (codes: GNode, scales: GNode, n: number) =>
            g.record('qmatmul', [a, codes, scales], { K, N: n, bits, blockSize, accuracyLevel: accuracy(bits) }, 'float32', [a.shape[0]!, n]);
          const rs = ranges(w);
          if (!rs) return qmatmul(w.inputs[0]!, w.inputs[1]!, N);
          const outs: GNode[] = [];
          for (const [s, e] of rs) {
            const [codes, scales] = piece(w, s, e, outs[outs.length - 1] ?? a);
            outs.push(qmatmul(codes, scales, e - s));
          }
          return target.concat(outs, 1);
        };
      const v = (target as unknown as Record<string | symbol, unknown>)[key];
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
