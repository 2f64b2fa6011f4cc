/**
 * The three programs built on the transformer — `score`, `train` and `decode` — and the host
 * helpers that pack token sequences into their inputs. Each program is a plain function over
 * the op set, so the ORT and tfjs interpreters run exactly the same thing.
 */
import type { DType, Ops, Shape } from '../tensor/ops';
import type { InputSpec } from '../tensor/graph';
import type { HostTensor } from '../tensor/host';
import { weightShapes, type ModelConfig } from './config';
import { headLogprobs, lmHead, transformer } from './transformer';
import { adapterShapes, type LoraSpec } from './lora';

export const NEG_INF = -1e9;

/** A loss over per-token log-probabilities; must return `loss` (scalar) plus any metrics. */
export type LossProgram = <T>(o: Ops<T>, t: { logprobs: T; entropy?: T; mask: T } & Record<string, T>) => Record<string, T>;

export interface LossSpec {
  /** Identifies the program (sessions are cached per key). */
  key: string;
  /** Extra per-batch inputs of the loss (e.g. advantages, old_logprobs), shapes over 'batch','seq'. */
  inputs: InputSpec[];
  program: LossProgram;
  /** Whether the program reads `entropy`. */
  entropy?: boolean;
}

/** Right-padded batch of sequences for score/train: position t predicts token t+1. */
export interface PackedBatch {
  batch: number;
  length: number;
  inputIds: Int32Array; // [B, T]
  targets: Int32Array; // [B, T]  targets[b, t] = seq[b][t + 1]
  positionIds: Int32Array; // [B, T]
  attnBias: Float32Array; // [B, 1, T, T]
  /** 1 where targets[b, t] is a real next token, else 0 [B, T]. */
  valid: Float32Array;
}

export function packSequences(seqs: number[][], padId = 0): PackedBatch {
  const B = seqs.length;
  const T = Math.max(1, ...seqs.map((s) => s.length - 1));
  const inputIds = new Int32Array(B * T).fill(padId);
  const targets = new Int32Array(B * T).fill(padId);
  const positionIds = new Int32Array(B * T);
  const valid = new Float32Array(B * T);
  const attnBias = new Float32Array(B * T * T).fill(NEG_INF);
  seqs.forEach((s, b) => {
    const n = Math.max(0, s.length - 1);
    for (let t = 0; t < T; t++) {
      positionIds[b * T + t] = t;
      if (t < n) {
        inputIds[b * T + t] = s[t];
        targets[b * T + t] = s[t + 1];
        valid[b * T + t] = 1;
      }
      // Causal; padded queries attend to themselves so their softmax stays finite.
      for (let j = 0; j <= t; j++) if (j < n || j === t) attnBias[(b * T + t) * T + j] = 0;
    }
  });
  return { batch: B, length: T, inputIds, targets, positionIds, attnBias, valid };
}

/**
 * Attention bias for the decode program: new tokens [B, T] after a past of P, with
 * attentionMask [B, P+T] (1 = real token). Query i sits at key index P+i.
 */
export function buildAttentionBias(attentionMask: Int32Array, B: number, T: number, S: number): Float32Array {
  const bias = new Float32Array(B * T * S).fill(NEG_INF);
  const P = S - T;
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < T; i++) {
      let any = false;
      for (let j = 0; j <= P + i; j++) {
        if (attentionMask[b * S + j]) {
          bias[(b * T + i) * S + j] = 0;
          any = true;
        }
      }
      if (!any) bias[(b * T + i) * S + P + i] = 0;
    }
  }
  return bias;
}

/** The programs' weight inputs: the model's, plus the LoRA adapters' when `lora` is given. */
export function programWeightShapes(c: ModelConfig, lora?: LoraSpec): Record<string, number[]> {
  return lora ? { ...weightShapes(c), ...adapterShapes(c, lora) } : weightShapes(c);
}

export function weightSpecs(c: ModelConfig, lora?: LoraSpec): InputSpec[] {
  return Object.entries(programWeightShapes(c, lora)).map(([name, shape]) => ({ name, dtype: 'float32' as DType, shape }));
}

/** The train program's scalar seed of LoRA dropout masks (only with lora.dropout > 0). */
export const LORA_SEED_INPUT = 'lora_seed';
const loraTrainInputs = (lora?: LoraSpec): InputSpec[] => (lora && lora.dropout > 0 ? [{ name: LORA_SEED_INPUT, dtype: 'float32', shape: [] }] : []);

const seqSpec = (name: string, dtype: DType, shape: Shape = ['batch', 'seq']): InputSpec => ({ name, dtype, shape });

export function scoreInputSpecs(c: ModelConfig, lora?: LoraSpec): InputSpec[] {
  return [
    ...weightSpecs(c, lora),
    seqSpec('input_ids', 'int32'),
    seqSpec('position_ids', 'int32'),
    seqSpec('attn_bias', 'float32', ['batch', 1, 'seq', 'seq']),
    seqSpec('targets', 'int32'),
  ];
}

function pickWeights<T>(c: ModelConfig, x: Record<string, T>, lora?: LoraSpec): Record<string, T> {
  const w: Record<string, T> = {};
  for (const name of Object.keys(programWeightShapes(c, lora))) w[name] = x[name];
  return w;
}

/**
 * The hidden states the LM head reads for a policy at `temperature`: softmax(h·W / T) is
 * softmax((h / T)·W), so scaling h (one [B, T, D] multiply) tempers every head path alike — the
 * plain, the chunked, the frozen head's closed-form gradient and the quantized head's online
 * softmax — and autodiff carries the 1/T into the gradient. The policy the RL update scores and
 * trains is the one the rollout sampled from (verl's `logits.div_(temperature)`, TRL's
 * `logits / self.temperature`); SFT and replay stay at T = 1.
 */
function tempered<T>(o: Ops<T>, hidden: T, temperature: number): T {
  if (!(temperature > 0) || !Number.isFinite(temperature))
    throw new Error(`rollout.temperature: the scored policy's temperature must be a finite number > 0 (got ${temperature})`);
  return temperature === 1 ? hidden : o.mul(hidden, o.scalar(1 / temperature));
}

/**
 * `score`: per-token logprobs (and entropy) of the given targets. `headChunks`: row chunks of the
 * LM head (transformer.ts headLogprobs; default defaultHeadChunks(c)); `temperature`: of the
 * scored policy, softmax(logits / T) (tempered).
 */
export function scoreProgram(c: ModelConfig, withEntropy: boolean, lora?: LoraSpec, headChunks?: number, temperature = 1) {
  return <T>(o: Ops<T>, x: Record<string, T>): Record<string, T> => {
    const { hidden } = transformer(
      o,
      c,
      pickWeights(c, x, lora),
      { inputIds: x.input_ids, positionIds: x.position_ids, attnBias: x.attn_bias, ropeLengthOffset: 1 },
      lora && { spec: lora },
    );
    const r = headLogprobs(o, c, pickWeights(c, x), tempered(o, hidden, temperature), x.targets, withEntropy, headChunks, false, true);
    return r.entropy ? { logprobs: r.logprobs, entropy: r.entropy } : { logprobs: r.logprobs };
  };
}

export function trainInputSpecs(c: ModelConfig, loss: LossSpec, lora?: LoraSpec): InputSpec[] {
  return [...scoreInputSpecs(c, lora), seqSpec('loss_mask', 'float32'), ...loss.inputs, ...loraTrainInputs(lora)];
}

/**
 * `train`: the loss and its metrics (gradients are added by the interpreter); `headChunks` as for
 * scoreProgram; `recomputeLayers`: activation checkpointing of all (true) or the first k blocks (TransformerInputs);
 * `frozenHead`: the LM head gets no gradient, so its gradient w.r.t. the hidden states is taken in
 * closed form in the forward pass (transformer.ts frozenHeadLogprobs; only when the head is not in `wrt`);
 * `temperature`: of the trained policy, as for scoreProgram.
 */
export function trainProgram(
  c: ModelConfig,
  loss: LossSpec,
  lora?: LoraSpec,
  headChunks?: number,
  recomputeLayers: boolean | number = false,
  frozenHead = false,
  temperature = 1,
) {
  return <T>(o: Ops<T>, x: Record<string, T>): Record<string, T> => {
    const w = pickWeights(c, x, lora);
    const ctx = lora && { spec: lora, seed: lora.dropout > 0 ? x[LORA_SEED_INPUT] : undefined };
    const { hidden } = transformer(
      o,
      c,
      w,
      { inputIds: x.input_ids, positionIds: x.position_ids, attnBias: x.attn_bias, ropeLengthOffset: 1, recomputeLayers },
      ctx,
    );
    const r = headLogprobs(o, c, w, tempered(o, hidden, temperature), x.targets, !!loss.entropy, headChunks, frozenHead);
    const extra: Record<string, T> = {};
    for (const s of loss.inputs) extra[s.name] = x[s.name];
    const out = loss.program(o, { ...extra, logprobs: r.logprobs, entropy: r.entropy as T, mask: x.loss_mask });
    if (!out.loss) throw new Error(`loss program '${loss.key}' returned no 'loss'`);
    // The current policy's log π of every target [B, T]: already computed for the loss, so the
    // update reads each token's ratio from it without a scoring forward (engine/train/model-port.ts).
    return { ...out, token_logprobs: r.logprobs };
  };
}

export function decodeInputSpecs(c: ModelConfig, lora?: LoraSpec): InputSpec[] {
  const kv: InputSpec[] = [];
  for (let i = 0; i < c.numLayers; i++) {
    kv.push({ name: `past_k_${i}`, dtype: 'float32', shape: ['batch', c.numKvHeads, 'past', c.headDim] });
    kv.push({ name: `past_v_${i}`, dtype: 'float32', shape: ['batch', c.numKvHeads, 'past', c.headDim] });
  }
  return [
    ...weightSpecs(c, lora),
    seqSpec('input_ids', 'int32', ['batch', 'new']),
    seqSpec('position_ids', 'int32', ['batch', 'new']),
    seqSpec('attn_bias', 'float32', ['batch', 1, 'new', 'total']),
    ...kv,
    ...sampleInputSpecs(),
  ];
}

/** Per-row inputs of the decode graph's sampling head (see sampleHead). */
export function sampleInputSpecs(): InputSpec[] {
  return [
    { name: 'sample_u', dtype: 'float32', shape: ['batch'] },
    { name: 'inv_temp', dtype: 'float32', shape: ['batch'] },
    { name: 'greedy', dtype: 'float32', shape: ['batch'] },
  ];
}

/** Host feeds for the sampling head: uniforms, 1/temperature and greedy flags per row. */
export function sampleFeeds(B: number, s?: { u: Float32Array; invTemp: Float32Array; greedy: Float32Array }): Record<string, HostTensor> {
  return {
    sample_u: { dtype: 'float32', shape: [B], data: s?.u ?? new Float32Array(B) },
    inv_temp: { dtype: 'float32', shape: [B], data: s?.invTemp ?? new Float32Array(B).fill(1) },
    greedy: { dtype: 'float32', shape: [B], data: s?.greedy ?? new Float32Array(B) },
  };
}

/**
 * Ids per block of the sampling head's prefix sums (see sampleHead) for a vocabulary of V: per
 * row the head costs ≈ V·block (within blocks) + (V/block)² (across blocks) multiply-adds; the
 * cheapest of 16…128 is taken (V 512 → 16, 8192 → 32, 151936 → 64). A fixed 128 cost 67M
 * multiply-adds per step for a 25M model (V 8192) at batch 64, ~4% of the model's own; 32 costs
 * 21M, ~1% (ORT's timings on the shared 2-core machine were too noisy to show the
 * difference: bench:decode-graph, docs/BENCHMARKS.md).
 */
export function sampleBlock(V: number): number {
  let best = 16;
  const cost = (b: number) => V * b + Math.ceil(V / b) ** 2;
  for (const b of [32, 64, 128]) if (cost(b) < cost(best)) best = b;
  return Math.min(V, best);
}

/**
 * Sampling inside the decode graph, so a decode step returns one token, its logprob and the
 * entropy per row instead of the logits. It reproduces engine/rollout/sampling.ts's full-
 * distribution path exactly (up to float32 rounding): z = logits · inv_temp, e = exp(z − max z),
 * and the token is the first i whose inclusive prefix sum of e exceeds u · Σe (inverse CDF, with
 * the row's uniform u drawn on the host from the sequence's own stream); greedy rows take the
 * first maximal logit (the same prefix-count over the indicator of z = max z). logprob =
 * z[token] − logsumexp(z), entropy = H(softmax z). The prefix sums are two small triangular
 * matmuls (within blocks of sampleBlock(V) ids, then across blocks), so no scan op is needed.
 */
function sampleHead<T>(o: Ops<T>, logits: T, V: number, u: T, invTemp: T, greedy: T, block = sampleBlock(V)): { token: T; logprob: T; entropy: T } {
  const z = o.mul(logits, o.unsqueeze(invTemp, [1])); // [B, V]
  const m = o.max(z, [1], true);
  const e = o.exp(o.sub(z, m));
  const sumE = o.sum(e, [1], true); // [B, 1]
  const logZ = o.log(sumE);
  const entropy = o.squeeze(o.sub(logZ, o.div(o.sum(o.mul(e, o.sub(z, m)), [1], true), sumE)), [1]);
  const isGreedy = o.greater(o.unsqueeze(greedy, [1]), o.scalar(0.5)); // [B, 1]
  const indicator = o.cast(o.equal(z, m), 'float32');
  let x = o.where(isGreedy, indicator, e); // what to prefix-sum
  const target = o.where(isGreedy, o.scalar(0.5), o.mul(o.unsqueeze(u, [1]), sumE)); // [B, 1]
  const Bk = Math.min(V, block);
  const G = Math.ceil(V / Bk);
  const Vp = G * Bk;
  if (Vp > V) {
    // Zero columns up to a whole number of blocks ([B, 1] · 0 broadcast against [1, pad]).
    const zeros = o.add(o.constant(new Float32Array(Vp - V), [1, Vp - V]), o.mul(o.slice(x, [0], [1], [1]), o.scalar(0)));
    x = o.concat([x, zeros], 1);
  }
  const tri = new Float32Array(Bk * Bk); // inclusive: [j, i] = 1 for j ≤ i
  for (let j = 0; j < Bk; j++) for (let i = j; i < Bk; i++) tri[j * Bk + i] = 1;
  const xb = o.reshape(x, [-1, G, Bk]);
  let cum = o.matmul(xb, o.constant(tri, [Bk, Bk])); // [B, G, Bk]
  if (G > 1) {
    const strict = new Float32Array(G * G); // exclusive across blocks: [j, g] = 1 for j < g
    for (let j = 0; j < G; j++) for (let g = j + 1; g < G; g++) strict[j * G + g] = 1;
    const before = o.matmul(o.sum(xb, [2]), o.constant(strict, [G, G])); // [B, G]
    cum = o.add(cum, o.unsqueeze(before, [2]));
  }
  const cumFlat = o.reshape(cum, [-1, Vp]);
  // token = #{i : cum_i ≤ target} = Vp − #{i : cum_i > target}, at most V − 1.
  const above = o.sum(o.cast(o.greater(cumFlat, target), 'float32'), [1], true); // [B, 1]
  const idx = o.minimum(o.sub(o.scalar(Vp), above), o.scalar(V - 1));
  const token = o.cast(idx, 'int32'); // [B, 1]
  const logprob = o.squeeze(o.sub(o.sub(o.gatherElements(z, token, 1), m), logZ), [1]);
  return { token: o.squeeze(token, [1]), logprob, entropy };
}

/**
 * The op set with x·x written as Pow(x, 2): ONNX Runtime's SimplifiedLayerNormFusion fuses an
 * RMSNorm (Pow → ReduceMean → Add → Sqrt → Div → Mul) into one SimplifiedLayerNormalization
 * kernel only when the square is a Pow, so each norm of the decode graph is one node instead of
 * six (a small model's decode step is mostly per-node cost). Only the decode program uses it:
 * the train graph keeps its own ops (its backward reuses the intermediates, so nothing would fuse).
 */
function fusableOps<T>(o: Ops<T>): Ops<T> {
  return new Proxy(o, {
    get(target, key) {
      if (key === 'mul') return (a: T, b: T) => (a === b ? target.pow(a, target.scalar(2)) : target.mul(a, b));
      const v = (target as unknown as Record<string | symbol, unknown>)[key];
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** Earlier forms of the decode graph, for benchmarks only (scripts/bench/decode-graph.ts). */
export interface DecodeVariant {
  /** false: RMSNorm squares as x·x (not fused by ORT). */
  fuseNorm?: boolean;
  /** Prefix-sum block of the sampling head (default sampleBlock(V)). */
  sampleBlock?: number;
  /** false: attention as MatMul/Softmax with a Concat of the cache per layer (no fused Attention op). */
  fusedAttention?: boolean;
  /**
   * What the graph gives back of the cache: 'present' (default) the extended cache per layer,
   * present_k_i / present_v_i [B, Hkv, P+T, hd]; 'new' only the new tokens' keys and values,
   * new_k_i / new_v_i [B, Hkv, T, hd], for a caller that extends its own cache (the worker KV
   * host on the CPU: fetching the whole present from ORT costs an allocation and a copy of the
   * cache per step, see engine/rollout/worker-kv.ts).
   */
  kvOut?: 'present' | 'new';
}

/**
 * `decode`: logits of the last new position, the extended KV cache, and one token sampled from
 * those logits per row (token, token_logprob, token_entropy; see sampleHead).
 */
export function decodeProgram(c: ModelConfig, lora?: LoraSpec, variant: DecodeVariant = {}) {
  return <T>(ops: Ops<T>, x: Record<string, T>): Record<string, T> => {
    const o = variant.fuseNorm === false ? ops : fusableOps(ops);
    const w = pickWeights(c, x, lora);
    const past = Array.from({ length: c.numLayers }, (_, i) => ({ k: x[`past_k_${i}`], v: x[`past_v_${i}`] }));
    const { hidden, present, fresh } = transformer(
      o,
      c,
      w,
      { inputIds: x.input_ids, positionIds: x.position_ids, attnBias: x.attn_bias, past, fusedAttention: variant.fusedAttention !== false },
      lora && { spec: lora },
    );
    const last = o.squeeze(o.slice(hidden, [-1], [2 ** 31 - 1], [1]), [1]); // [B, D]
    const logits = lmHead(o, c, w, last);
    const sampled = sampleHead(o, logits, c.vocabSize, x.sample_u, x.inv_temp, x.greedy, variant.sampleBlock ?? sampleBlock(c.vocabSize));
    const out: Record<string, T> = { logits, token: sampled.token, token_logprob: sampled.logprob, token_entropy: sampled.entropy };
    (variant.kvOut === 'new' ? fresh : present).forEach((p, i) => {
      out[`${variant.kvOut === 'new' ? 'new' : 'present'}_k_${i}`] = p.k;
      out[`${variant.kvOut === 'new' ? 'new' : 'present'}_v_${i}`] = p.v;
    });
    return out;
  };
}

export function batchFeeds(b: PackedBatch): Record<string, HostTensor> {
  const B = b.batch,
    T = b.length;
  return {
    input_ids: { dtype: 'int32', shape: [B, T], data: b.inputIds },
    position_ids: { dtype: 'int32', shape: [B, T], data: b.positionIds },
    attn_bias: { dtype: 'float32', shape: [B, 1, T, T], data: b.attnBias },
    targets: { dtype: 'int32', shape: [B, T], data: b.targets },
  };
}
