/**
 * The decoder-only transformer of the Llama / Qwen2 / Qwen3 family, written once against the
 * op set. It reads top to bottom: embedding → N × (RMSNorm → attention → residual → RMSNorm →
 * SwiGLU MLP → residual) → RMSNorm → LM head. The same function is recorded into ONNX graphs
 * (score / train / decode) and run eagerly by tfjs.
 *
 * Inputs per call:
 *   inputIds    [B, T] int32
 *   positionIds [B, T] int32  (positions of the new tokens; left padding keeps them correct)
 *   attnBias    [B, 1, T, P+T] float32: 0 where a query may attend to a key, -1e9 elsewhere
 *               (causal + padding; built on the host by buildAttentionBias)
 *   past        optional per-layer keys/values [B, Hkv, P, hd] (the KV cache)
 * Weights use HF names and layouts (Linear weights are [out, in]).
 */
import { rmsNorm, silu, type Ops } from '../tensor/ops';
import type { ModelConfig } from './config';
import { rotaryAngles } from './rope';
import { loraDelta, loraFor, type LoraApplied, type LoraContext } from './lora';

export interface TransformerInputs<T> {
  inputIds: T;
  positionIds: T;
  attnBias: T;
  past?: { k: T; v: T }[];
  /**
   * Sequence length beyond the last input position (dynamic RoPE only): 1 for score/train, whose
   * last target is not an input, so the length matches transformers' forward over the whole sequence.
   */
  ropeLengthOffset?: number;
  /**
   * Recompute blocks' activations in the backward pass from their inputs (activation
   * checkpointing; graph interpreter only): only those blocks' inputs stay alive between the
   * forward and the backward pass, for one more forward pass of their compute. `true`: every
   * block; a number k: the first k blocks (a budget, as Megatron's block recompute: the other
   * blocks keep their activations and are not computed twice); `false`/0: none.
   */
  recomputeLayers?: boolean | number;
  /**
   * With `past`: attention over the cache as one fused kernel (Ops.attention: ONNX Attention on
   * ORT's CPU provider) where the interpreter has it; the other interpreters (tfjs) take the
   * MatMul/Softmax form. Same numbers either way (tests/engine/rollout/golden.test.ts).
   */
  fusedAttention?: boolean;
}

export interface TransformerOutputs<T> {
  /** Final hidden states after the last norm [B, T, D]. */
  hidden: T;
  /** Keys/values including the new tokens, per layer [B, Hkv, P+T, hd]. */
  present: { k: T; v: T }[];
  /** The new tokens' keys (rotated) and values alone, per layer [B, Hkv, T, hd]. */
  fresh: { k: T; v: T }[];
}

/**
 * x [B, T, in] · wᵀ (+ b) → [B, T, out]. The tokens are flattened to one [B·T, in] matrix so
 * the weight gradient is one GEMM over all tokens, [in, B·T] · [B·T, out], instead of B
 * batched products summed afterwards (as torch's F.linear does).
 */
function linear<T>(o: Ops<T>, x: T, w: T, b?: T, lora?: LoraApplied<T>): T {
  const [B, T] = o.shape(x);
  const [out, inp] = o.shape(w);
  let flat = o.matmul(o.reshape(x, [-1, inp]), o.transpose(w, [1, 0]));
  if (lora) flat = o.add(flat, loraDelta(o, x, lora)); // + (alpha/rank)·dropout(x)·Aᵀ·Bᵀ (engine/model/lora.ts)
  const y = o.reshape(flat, [B, T, out]);
  return b ? o.add(y, b) : y;
}

interface Rope<T> {
  cos: T;
  sin: T;
  cosQ: T;
  sinQ: T;
}

/**
 * cos and sin of the rotary angles for each position: [B, 1, T, hd]; cosQ/sinQ are the same
 * times the attention scale 1/√hd, so rotating the queries also scales them (the scale then
 * costs B·T·hd multiplies once per call instead of B·H·T·S per layer on the scores, and the
 * same again in the backward pass).
 */
function rotary<T>(o: Ops<T>, c: ModelConfig, positionIds: T, lengthOffset = 0): Rope<T> {
  // rope_scaling (linear / dynamic / yarn / llama3) is applied in rope.ts; yarn scales cos/sin.
  const { angles: freqs, attentionFactor } = rotaryAngles(o, c, positionIds, lengthOffset); // [B, T, half]
  const emb = o.unsqueeze(o.concat([freqs, freqs], 2), [1]); // [B, 1, T, hd]
  let cos = o.cos(emb),
    sin = o.sin(emb);
  if (attentionFactor !== 1) {
    cos = o.mul(cos, o.scalar(attentionFactor));
    sin = o.mul(sin, o.scalar(attentionFactor));
  }
  const scale = o.scalar(1 / Math.sqrt(c.headDim));
  return { cos, sin, cosQ: o.mul(cos, scale), sinQ: o.mul(sin, scale) };
}

function applyRotary<T>(o: Ops<T>, x: T, cos: T, sin: T, headDim: number): T {
  const half = headDim / 2;
  const x1 = o.slice(x, [0], [half], [3]);
  const x2 = o.slice(x, [half], [headDim], [3]);
  const rotated = o.concat([o.neg(x2), x1], 3);
  return o.add(o.mul(x, cos), o.mul(rotated, sin));
}

function attention<T>(
  o: Ops<T>,
  c: ModelConfig,
  w: Record<string, T>,
  p: string,
  x: T,
  rope: Rope<T>,
  bias: T,
  past?: { k: T; v: T },
  lora?: LoraContext<T>,
  fused = false,
) {
  const [B, T] = o.shape(x);
  const H = c.numHeads,
    Hkv = c.numKvHeads,
    hd = c.headDim,
    rep = H / Hkv;
  if (fused && past && o.attention) {
    // Token-major [B, T, n, hd] throughout: no head transposes, the cache appended inside the kernel.
    const split = (y: T, n: number) => o.reshape(y, [B, T, n, hd]);
    let q = split(linear(o, x, w[`${p}.q_proj.weight`], w[`${p}.q_proj.bias`], loraFor(lora, w, `${p}.q_proj`)), H);
    let k = split(linear(o, x, w[`${p}.k_proj.weight`], w[`${p}.k_proj.bias`], loraFor(lora, w, `${p}.k_proj`)), Hkv);
    const v = linear(o, x, w[`${p}.v_proj.weight`], w[`${p}.v_proj.bias`], loraFor(lora, w, `${p}.v_proj`));
    if (c.qkNorm) {
      q = rmsNorm(o, q, w[`${p}.q_norm.weight`], c.rmsNormEps);
      k = rmsNorm(o, k, w[`${p}.k_norm.weight`], c.rmsNormEps);
    }
    const tokenMajor = (r: T) => o.reshape(r, [B, T, 1, hd]); // [B, 1, T, hd] → [B, T, 1, hd]: a unit axis moved, no copy
    q = applyRotary(o, q, tokenMajor(rope.cosQ), tokenMajor(rope.sinQ), hd); // rotated and scaled by 1/√hd
    k = applyRotary(o, k, tokenMajor(rope.cos), tokenMajor(rope.sin), hd);
    const flat = (y: T, n: number) => o.reshape(y, [B, T, n * hd]);
    const r = o.attention(flat(q, H), flat(k, Hkv), v, past.k, past.v, bias, { heads: H, kvHeads: Hkv, scale: 1 });
    const headMajor = (y: T) => o.transpose(o.reshape(y, [B, T, Hkv, hd]), [0, 2, 1, 3]);
    return {
      out: linear(o, r.out, w[`${p}.o_proj.weight`], undefined, loraFor(lora, w, `${p}.o_proj`)),
      present: { k: r.presentK, v: r.presentV },
      fresh: { k: headMajor(k), v: headMajor(v) },
    };
  }
  const heads = (y: T, n: number) => o.transpose(o.reshape(y, [B, T, n, hd]), [0, 2, 1, 3]); // [B, n, T, hd]
  let q = heads(linear(o, x, w[`${p}.q_proj.weight`], w[`${p}.q_proj.bias`], loraFor(lora, w, `${p}.q_proj`)), H);
  let k = heads(linear(o, x, w[`${p}.k_proj.weight`], w[`${p}.k_proj.bias`], loraFor(lora, w, `${p}.k_proj`)), Hkv);
  let v = heads(linear(o, x, w[`${p}.v_proj.weight`], w[`${p}.v_proj.bias`], loraFor(lora, w, `${p}.v_proj`)), Hkv);
  if (c.qkNorm) {
    q = rmsNorm(o, q, w[`${p}.q_norm.weight`], c.rmsNormEps);
    k = rmsNorm(o, k, w[`${p}.k_norm.weight`], c.rmsNormEps);
  }
  q = applyRotary(o, q, rope.cosQ, rope.sinQ, hd); // rotated and scaled by 1/√hd
  k = applyRotary(o, k, rope.cos, rope.sin, hd);
  const fresh = { k, v };
  if (past) {
    k = o.concat([past.k, k], 2);
    v = o.concat([past.v, v], 2);
  }
  const present = { k, v };
  let ctx: T; // [B, H, T, hd]
  if (rep === 1) {
    // Multi-head attention: plain 4-D matmuls (a 5-D layout with a size-1 axis makes ONNX
    // Runtime's layout optimiser emit 5-D transposes that cost 6x the 4-D ones).
    const probs = o.softmax(o.add(o.matmul(q, o.transpose(k, [0, 1, 3, 2])), bias), -1); // [B, H, T, S]
    ctx = o.matmul(probs, v);
  } else {
    // Grouped-query attention without copying K/V: queries of the `rep` heads that share a KV
    // head are stacked, [B, Hkv, rep, T, hd], and the score matmul broadcasts K over them.
    // (Reshape, not Unsqueeze, adds the unit axis: ORT moves transposes through Unsqueeze and
    // then runs them as slow 5-D transposes.)
    const S = o.shape(k)[2];
    const qg = o.reshape(q, [B, Hkv, rep, T, hd]);
    const kT = o.reshape(o.transpose(k, [0, 1, 3, 2]), [B, Hkv, 1, hd, S]);
    const probs = o.softmax(o.add(o.matmul(qg, kT), o.unsqueeze(bias, [1])), -1); // [B, Hkv, rep, T, S]
    ctx = o.reshape(o.matmul(probs, o.reshape(v, [B, Hkv, 1, S, hd])), [B, H, T, hd]);
  }
  const merged = o.reshape(o.transpose(ctx, [0, 2, 1, 3]), [B, T, H * hd]);
  return { out: linear(o, merged, w[`${p}.o_proj.weight`], undefined, loraFor(lora, w, `${p}.o_proj`)), present, fresh };
}

function mlp<T>(o: Ops<T>, w: Record<string, T>, p: string, x: T, lora?: LoraContext<T>): T {
  const gate = silu(o, linear(o, x, w[`${p}.gate_proj.weight`], undefined, loraFor(lora, w, `${p}.gate_proj`)));
  const up = linear(o, x, w[`${p}.up_proj.weight`], undefined, loraFor(lora, w, `${p}.up_proj`));
  return linear(o, o.mul(gate, up), w[`${p}.down_proj.weight`], undefined, loraFor(lora, w, `${p}.down_proj`));
}

/** `lora`: add the adapters found in `w` (engine/model/lora.ts) to the targeted linear layers. */
export function transformer<T>(o: Ops<T>, c: ModelConfig, w: Record<string, T>, x: TransformerInputs<T>, lora?: LoraContext<T>): TransformerOutputs<T> {
  let h = o.gather(w['model.embed_tokens.weight'], x.inputIds);
  const rope = rotary(o, c, x.positionIds, x.ropeLengthOffset);
  const present: { k: T; v: T }[] = [];
  const fresh: { k: T; v: T }[] = [];
  const recomputed = recomputedBlocks(c, x.recomputeLayers);
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    const block = (hin: T) => {
      const a = attention(
        o,
        c,
        w,
        `${p}.self_attn`,
        rmsNorm(o, hin, w[`${p}.input_layernorm.weight`], c.rmsNormEps),
        rope,
        x.attnBias,
        x.past?.[i],
        lora,
        x.fusedAttention,
      );
      const h1 = o.add(hin, a.out);
      return {
        h: o.add(h1, mlp(o, w, `${p}.mlp`, rmsNorm(o, h1, w[`${p}.post_attention_layernorm.weight`], c.rmsNormEps), lora)),
        present: a.present,
        fresh: a.fresh,
      };
    };
    const r = i < recomputed && o.recompute ? o.recompute([h], ([hc]) => block(hc)) : block(h);
    present.push(r.present);
    fresh.push(r.fresh);
    h = r.h;
  }
  return { hidden: rmsNorm(o, h, w['model.norm.weight'], c.rmsNormEps), present, fresh };
}

/**
 * How many blocks (the first ones) a `recomputeLayers` setting recomputes: true = all, false = 0,
 * a number = that many; refused unless an integer in [0, numLayers].
 */
export function recomputedBlocks(c: ModelConfig, r: boolean | number | undefined): number {
  if (r === undefined || r === false) return 0;
  if (r === true) return c.numLayers;
  if (!Number.isInteger(r) || r < 0 || r > c.numLayers)
    throw new Error(
      `model.recompute_layers (recomputeLayers): ${r} blocks to recompute, but the model has ${c.numLayers} (give true, false or an integer 0–${c.numLayers})`,
    );
  return r;
}

/** Logits from hidden states [..., D] → [..., V]. */
export function lmHead<T>(o: Ops<T>, c: ModelConfig, w: Record<string, T>, hidden: T): T {
  const head = c.tieWordEmbeddings ? w['model.embed_tokens.weight'] : w['lm_head.weight'];
  // [B, T, D] goes through `linear` (tokens flattened) so the head's weight gradient is one
  // [D, B·T] × [B·T, V] GEMM, not B batched products summed afterwards (3.5× slower at V 8192).
  if (o.shape(hidden).length === 3) return linear(o, hidden, head);
  return o.matmul(hidden, o.transpose(head, [1, 0]));
}

/**
 * Per-token log-probabilities of `targets` and the entropy of each predictive distribution,
 * from logits [B, T, V]: logprobs[b, t] = log p(targets[b, t] | prefix up to t).
 */
export function tokenLogprobsAndEntropy<T>(o: Ops<T>, logits: T, targets: T, withEntropy: boolean): { logprobs: T; entropy?: T } {
  const lp = o.logSoftmax(logits, -1);
  const logprobs = o.squeeze(o.gatherElements(lp, o.unsqueeze(targets, [2]), 2), [2]);
  if (!withEntropy) return { logprobs };
  const entropy = o.neg(o.sum(o.mul(o.exp(lp), lp), [2]));
  return { logprobs, entropy };
}

/**
 * How many row chunks the score/train programs split the LM head into: one chunk of logits is
 * [B·T / chunks, V]. 1 below a 32k vocabulary; else about one chunk per 16k vocabulary entries
 * (10 at Qwen's 151,936: [2048, V] logits of a 4 × 512 batch are 1.24 GB in float32 at once,
 * 124 MB per chunk).
 */
export function defaultHeadChunks(c: ModelConfig): number {
  return c.vocabSize < 32768 ? 1 : Math.min(32, Math.ceil(c.vocabSize / 16384));
}

/**
 * tokenLogprobsAndEntropy(lmHead(hidden)) without [B, T, V] tensors: the tokens are split into
 * `chunks` row chunks; each chunk's logits → log-softmax → picked logprob (and entropy) is a
 * recompute group, evaluated one chunk after the other in the forward pass (`after`) and
 * recomputed chunk by chunk in the backward pass, so at most one chunk's [rows, V] tensors are
 * alive at a time. Same numbers as the unchunked path (rows are independent). Interpreters
 * without chunk/recompute (tfjs, eager) take the unchunked path. `frozenHead`: the head gets no
 * gradient (frozenHeadLogprobs); `valuesOnly`: the program is never differentiated (scoring). In
 * either case a block-quantized head (Ops.rowPieces) takes onlineHeadLogprobs.
 */
export function headLogprobs<T>(
  o: Ops<T>,
  c: ModelConfig,
  w: Record<string, T>,
  hidden: T,
  targets: T,
  withEntropy: boolean,
  chunks = defaultHeadChunks(c),
  frozenHead = false,
  valuesOnly = false,
): { logprobs: T; entropy?: T } {
  const pieces =
    (frozenHead || valuesOnly) && o.chunk && o.after ? o.rowPieces?.(c.tieWordEmbeddings ? w['model.embed_tokens.weight'] : w['lm_head.weight']) : undefined;
  if (pieces) return onlineHeadLogprobs(o, c, w, pieces, hidden, targets, withEntropy, Math.max(1, chunks), !valuesOnly);
  if (frozenHead && o.chunk && o.after) return frozenHeadLogprobs(o, c, w, hidden, targets, withEntropy, Math.max(1, chunks));
  if (chunks <= 1 || !o.chunk || !o.recompute || !o.after) return tokenLogprobsAndEntropy(o, lmHead(o, c, w, hidden), targets, withEntropy);
  const [B, T] = o.shape(hidden);
  const head = c.tieWordEmbeddings ? w['model.embed_tokens.weight'] : w['lm_head.weight'];
  const headT = o.transpose(head, [1, 0]); // [D, V]
  const hf = o.reshape(hidden, [-1, c.hiddenSize]);
  const tf = o.reshape(targets, [-1, 1]);
  const lps: T[] = [],
    ents: T[] = [];
  let prev: T[] = [];
  for (let i = 0; i < chunks; i++) {
    let h = o.chunk(hf, 0, i, chunks);
    for (const d of prev) h = o.after(h, d); // chunk i's logits only after chunk i−1's are consumed (logprob and entropy)
    const t = o.chunk(tf, 0, i, chunks);
    const [lp, ent] = o.recompute([h], ([hc]) => {
      const lsm = o.logSoftmax(o.matmul(hc, headT), -1); // [rows, V]
      const picked = o.squeeze(o.gatherElements(lsm, t, 1), [1]);
      return [picked, withEntropy ? o.neg(o.sum(o.mul(o.exp(lsm), lsm), [1])) : undefined] as const;
    });
    lps.push(lp);
    if (ent) ents.push(ent);
    prev = ent ? [lp, ent] : [lp];
  }
  const logprobs = o.reshape(o.concat(lps, 0), [B, T]);
  return withEntropy ? { logprobs, entropy: o.reshape(o.concat(ents, 0), [B, T]) } : { logprobs };
}

/**
 * headLogprobs for a block-quantized frozen head read in row pieces (Ops.rowPieces: a quantized
 * base's LM head), with the softmax computed online, as flash attention does: the pieces are the
 * outer loop, so each is dequantized once for all the rows (frozenHeadLogprobs would dequantize
 * every piece twice in each of its row chunks: 180 times at Qwen2.5-0.5B, 10 chunks × 9 pieces),
 * and the rows are cut in ⌈chunks / pieces⌉ chunks, so a [rows, piece] tile is no larger than
 * frozenHeadLogprobs' [rows / chunks, V]. Each row chunk keeps, over the pieces seen so far, the
 * running max m of its logits l, S = Σ e, A = Σ e·W_v and, with entropy, U = Σ e·l and
 * B = Σ e·l·W_v (e = exp(l − m)), rescaled by exp(m_old − m_new) when a piece raises m. Then
 *   lse = m + log S,  logprob(t) = h·W_t − lse,  d logprob / dh = W_t − A/S,
 *   H = lse − U/S,    dH / dh = −(B/S − (U/S)·(A/S)),
 * the gradients carried to h as frozenHeadLogprobs does (`withGrads`; the score program, never
 * differentiated, keeps only m, S and U: one product per tile). The same numbers as the other
 * paths up to the order of the sums.
 */
function onlineHeadLogprobs<T>(
  o: Ops<T>,
  c: ModelConfig,
  w: Record<string, T>,
  pieces: Array<(dep: T) => T>,
  hidden: T,
  targets: T,
  withEntropy: boolean,
  chunks: number,
  withGrads: boolean,
) {
  const [B, T] = o.shape(hidden);
  const head = c.tieWordEmbeddings ? w['model.embed_tokens.weight'] : w['lm_head.weight'];
  const n = Math.max(1, Math.ceil(chunks / pieces.length));
  const hf = o.reshape(hidden, [-1, c.hiddenSize]);
  const tf = o.reshape(targets, [-1]);
  const hs = Array.from({ length: n }, (_, i) => o.stopGradient(n > 1 ? o.chunk!(hf, 0, i, n) : hf));
  type Run = { m: T; s: T; a?: T; u?: T; b?: T };
  const runs: Run[] = [];
  let dep = hf; // piece j is read once piece j − 1's last tile is done: one dequantized piece at a time
  for (const read of pieces) {
    const wp = read(dep); // [rows of the piece, D]
    const wpT = o.transpose(wp, [1, 0]);
    for (let i = 0; i < n; i++) {
      const l = o.matmul(o.after!(hs[i]!, dep), wpT); // [rows, piece]
      const prev = runs[i];
      const mp = o.max(l, [1], true);
      const m = prev ? o.maximum(prev.m, mp) : mp;
      const e = o.exp(o.sub(l, m));
      const el = withEntropy ? o.mul(e, l) : undefined;
      let a: T | undefined, b: T | undefined;
      if (withGrads && el) {
        // A's and B's products in one GEMM: [e; e·l] · W.
        const ab = o.matmul(o.concat([e, el], 0), wp);
        [a, b] = [o.chunk!(ab, 0, 0, 2), o.chunk!(ab, 0, 1, 2)];
      } else if (withGrads) a = o.matmul(e, wp);
      const step: Run = { m, s: o.sum(e, [1], true), a, u: el && o.sum(el, [1], true), b };
      if (prev) {
        const r = o.exp(o.sub(prev.m, m)); // [rows, 1]
        const mix = (x?: T, y?: T) => (x && y ? o.add(o.mul(x, r), y) : undefined);
        runs[i] = { m, s: mix(prev.s, step.s)!, a: mix(prev.a, step.a), u: mix(prev.u, step.u), b: mix(prev.b, step.b) };
      } else runs[i] = step;
      // The next tile (and piece) waits for every running sum of this one: ORT runs depth-first from the outputs, so
      // a sum nothing later waits for would run only at the end, keeping every tile's e alive until then.
      const cur = runs[i]!;
      dep = [cur.a, cur.u, cur.b].reduce<T>((d, x) => (x ? o.after!(d, x) : d), cur.s);
    }
  }
  // value + (s − stop(s)) with s = rowsum(h ⊙ stop(grad)): the value, with gradient grad w.r.t. h (frozenHeadLogprobs).
  const carry = (value: T, h: T, grad: T) => {
    const s = o.sum(o.mul(h, o.stopGradient(grad)), [1]);
    return o.add(value, o.sub(s, o.stopGradient(s)));
  };
  const lps: T[] = [],
    ents: T[] = [];
  for (let i = 0; i < n; i++) {
    const run = runs[i]!;
    const h = n > 1 ? o.chunk!(hf, 0, i, n) : hf;
    const wt = o.gather(head, n > 1 ? o.chunk!(tf, 0, i, n) : tf); // [rows, D]: the targets' rows of the head
    const lse = o.add(run.m, o.log(run.s)); // [rows, 1]
    const lp = o.sub(o.sum(o.mul(hs[i]!, wt), [1]), o.squeeze(lse, [1]));
    const aS = run.a && o.div(run.a, run.s);
    lps.push(aS ? carry(lp, h, o.sub(wt, aS)) : lp);
    if (withEntropy) {
      const uS = o.div(run.u!, run.s);
      const ent = o.squeeze(o.sub(lse, uS), [1]);
      ents.push(aS ? carry(ent, h, o.neg(o.sub(o.div(run.b!, run.s), o.mul(uS, aS)))) : ent);
    }
  }
  const logprobs = o.reshape(n > 1 ? o.concat(lps, 0) : lps[0]!, [B, T]);
  return withEntropy ? { logprobs, entropy: o.reshape(n > 1 ? o.concat(ents, 0) : ents[0]!, [B, T]) } : { logprobs };
}

/**
 * headLogprobs for a frozen LM head (LoRA: the head and tied embedding get no gradient): the
 * gradient with respect to the hidden states is computed in the forward pass, chunk by chunk, in
 * closed form, so the backward pass touches no [rows, V] tensor and the head is not recomputed.
 * With p = softmax(h·Wᵀ) and W the head [V, D]:
 *   d logprob(t) / dh = W[t] − pᵀ·W
 *   d entropy / dh    = −(p ⊙ (log p + H))ᵀ·W
 * (two GEMMs against W per chunk with entropy, one without, besides the logits' GEMM: the same
 * work as the unchunked forward + backward, none of the chunked path's recompute). The outputs
 * carry that gradient through `v + (s − stop(s))`, s = rowsum(h ⊙ stop(grad)): s − stop(s) is
 * exactly 0 (the same tensor), so the values are the forward's, and ∂/∂h of it is grad.
 * Wrong for a trainable head (no gradient reaches W): callers pass frozenHead only when W is not
 * differentiated (PolicyModel.trainStep checks `wrt`).
 */
function frozenHeadLogprobs<T>(o: Ops<T>, c: ModelConfig, w: Record<string, T>, hidden: T, targets: T, withEntropy: boolean, chunks: number) {
  const [B, T] = o.shape(hidden);
  const head = c.tieWordEmbeddings ? w['model.embed_tokens.weight'] : w['lm_head.weight'];
  const headT = o.transpose(head, [1, 0]); // [D, V]
  const hf = o.reshape(hidden, [-1, c.hiddenSize]);
  const tf = o.reshape(targets, [-1, 1]);
  // value + (s − stop(s)) with s = rowsum(h ⊙ stop(grad)): the value, with gradient grad w.r.t. h.
  const carry = (value: T, h: T, grad: T) => {
    const s = o.sum(o.mul(h, o.stopGradient(grad)), [1]);
    return o.add(value, o.sub(s, o.stopGradient(s)));
  };
  const lps: T[] = [],
    ents: T[] = [];
  let prev: T[] = [];
  for (let i = 0; i < chunks; i++) {
    let h = chunks > 1 ? o.chunk!(hf, 0, i, chunks) : hf;
    // Chunk i's [rows, V] tensors only after chunk i−1's are consumed: by its logprob and, with entropy, by its
    // entropy too (else every chunk's log-softmax and probabilities wait for the entropy output: 0.5 GiB at
    // Qwen2.5-1.5B and 512 tokens).
    for (const d of prev) h = o.after!(h, d);
    const t = chunks > 1 ? o.chunk!(tf, 0, i, chunks) : tf;
    const hs = o.stopGradient(h);
    const lsm = o.logSoftmax(o.matmul(hs, headT), -1); // [rows, V]
    const p = o.exp(lsm);
    const picked = o.squeeze(o.gatherElements(lsm, t, 1), [1]);
    const gradLp = o.sub(o.gather(head, o.reshape(t, [-1])), o.matmul(p, head)); // [rows, D]
    const lp = carry(picked, h, gradLp);
    lps.push(lp);
    if (withEntropy) {
      const ent = o.neg(o.sum(o.mul(p, lsm), [1])); // [rows]
      const gradEnt = o.neg(o.matmul(o.mul(p, o.add(lsm, o.unsqueeze(ent, [1]))), head));
      ents.push(carry(ent, h, gradEnt));
    }
    prev = withEntropy ? [lp, ents[ents.length - 1]!] : [lp];
  }
  const logprobs = o.reshape(chunks > 1 ? o.concat(lps, 0) : lps[0], [B, T]);
  return withEntropy ? { logprobs, entropy: o.reshape(chunks > 1 ? o.concat(ents, 0) : ents[0], [B, T]) } : { logprobs };
}
