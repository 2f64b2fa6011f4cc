/**
 * Model configuration for the Llama / Qwen2 / Qwen3 family, read from and written to an HF
 * `config.json`.
 */
export const SUPPORTED_ARCHITECTURES = ['LlamaForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM'] as const;
export type Architecture = (typeof SUPPORTED_ARCHITECTURES)[number];

export interface ModelConfig {
  architecture: Architecture;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  tieWordEmbeddings: boolean;
  /** Bias on q/k/v projections (Qwen2). */
  attentionBias: boolean;
  /** RMSNorm on q and k per head (Qwen3). */
  qkNorm: boolean;
  maxPositionEmbeddings: number;
  bosTokenId: number | null;
  eosTokenId: number | number[] | null;
  padTokenId: number | null;
}

function req(json: Record<string, unknown>, key: string, file: string): number {
  const v = json[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error(`${file}: field '${key}' must be a number, got ${JSON.stringify(v)}`);
  return v;
}

export function parseHfConfig(json: Record<string, unknown>, file = 'config.json'): ModelConfig {
  const archs = json.architectures;
  const arch = Array.isArray(archs) ? archs[0] : undefined;
  if (typeof arch !== 'string' || !(SUPPORTED_ARCHITECTURES as readonly string[]).includes(arch)) {
    throw new Error(`${file}: unsupported architecture ${JSON.stringify(arch ?? null)}; supported: ${SUPPORTED_ARCHITECTURES.join(', ')}`);
  }
  const hidden = req(json, 'hidden_size', file);
  const heads = req(json, 'num_attention_heads', file);
  const kvHeads = typeof json.num_key_value_heads === 'number' ? json.num_key_value_heads : heads;
  if (heads % kvHeads !== 0) throw new Error(`${file}: num_attention_heads (${heads}) must be a multiple of num_key_value_heads (${kvHeads})`);
  const a = arch as Architecture;
  return {
    architecture: a,
    vocabSize: req(json, 'vocab_size', file),
    hiddenSize: hidden,
    intermediateSize: req(json, 'intermediate_size', file),
    numLayers: req(json, 'num_hidden_layers', file),
    numHeads: heads,
    numKvHeads: kvHeads,
    headDim: typeof json.head_dim === 'number' ? json.head_dim : hidden / heads,
    rmsNormEps: typeof json.rms_norm_eps === 'number' ? json.rms_norm_eps : 1e-6,
    ropeTheta: typeof json.rope_theta === 'number' ? json.rope_theta : 10000,
    tieWordEmbeddings: json.tie_word_embeddings === true,
    attentionBias: typeof json.attention_bias === 'boolean' ? json.attention_bias : a === 'Qwen2ForCausalLM',
    qkNorm: a === 'Qwen3ForCausalLM',
    maxPositionEmbeddings: typeof json.max_position_embeddings === 'number' ? json.max_position_embeddings : 4096,
    bosTokenId: typeof json.bos_token_id === 'number' ? json.bos_token_id : null,
    eosTokenId: typeof json.eos_token_id === 'number' || Array.isArray(json.eos_token_id) ? (json.eos_token_id as number | number[]) : null,
    padTokenId: typeof json.pad_token_id === 'number' ? json.pad_token_id : null,
  };
}

export function toHfConfig(c: ModelConfig): Record<string, unknown> {
  const modelType = c.architecture === 'LlamaForCausalLM' ? 'llama' : c.architecture === 'Qwen2ForCausalLM' ? 'qwen2' : 'qwen3';
  return {
    architectures: [c.architecture],
    model_type: modelType,
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    rms_norm_eps: c.rmsNormEps,
    rope_theta: c.ropeTheta,
    tie_word_embeddings: c.tieWordEmbeddings,
    attention_bias: c.attentionBias,
    max_position_embeddings: c.maxPositionEmbeddings,
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenId,
    pad_token_id: c.padTokenId,
    hidden_act: 'silu',
    torch_dtype: 'float32',
  };
}

export interface TinyConfigOptions {
  vocabSize: number;
  hiddenSize?: number;
  layers?: number;
  heads?: number;
  kvHeads?: number;
  intermediateSize?: number;
  maxPositionEmbeddings?: number;
  architecture?: Architecture;
  tieWordEmbeddings?: boolean;
  bosTokenId?: number | null;
  eosTokenId?: number | null;
  padTokenId?: number | null;
}

/** A small Qwen2-style config for built-in tiny models. */
export function tinyConfig(o: TinyConfigOptions): ModelConfig {
  const hidden = o.hiddenSize ?? 64;
  const heads = o.heads ?? 4;
  const arch = o.architecture ?? 'Qwen2ForCausalLM';
  return {
    architecture: arch,
    vocabSize: o.vocabSize,
    hiddenSize: hidden,
    intermediateSize: o.intermediateSize ?? hidden * 3,
    numLayers: o.layers ?? 2,
    numHeads: heads,
    numKvHeads: o.kvHeads ?? Math.max(1, heads / 2),
    headDim: hidden / heads,
    rmsNormEps: 1e-6,
    ropeTheta: 10000,
    tieWordEmbeddings: o.tieWordEmbeddings ?? true,
    attentionBias: arch === 'Qwen2ForCausalLM',
    qkNorm: arch === 'Qwen3ForCausalLM',
    maxPositionEmbeddings: o.maxPositionEmbeddings ?? 1024,
    bosTokenId: o.bosTokenId ?? null,
    eosTokenId: o.eosTokenId ?? null,
    padTokenId: o.padTokenId ?? null,
  };
}

/** Every weight tensor's HF name and shape. */
export function weightShapes(c: ModelConfig): Record<string, number[]> {
  const s: Record<string, number[]> = {};
  const D = c.hiddenSize, hd = c.headDim, H = c.numHeads, Hkv = c.numKvHeads, F = c.intermediateSize;
  s['model.embed_tokens.weight'] = [c.vocabSize, D];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}`;
    s[`${p}.input_layernorm.weight`] = [D];
    s[`${p}.self_attn.q_proj.weight`] = [H * hd, D];
    s[`${p}.self_attn.k_proj.weight`] = [Hkv * hd, D];
    s[`${p}.self_attn.v_proj.weight`] = [Hkv * hd, D];
    if (c.attentionBias) {
      s[`${p}.self_attn.q_proj.bias`] = [H * hd];
      s[`${p}.self_attn.k_proj.bias`] = [Hkv * hd];
      s[`${p}.self_attn.v_proj.bias`] = [Hkv * hd];
    }
    if (c.qkNorm) {
      s[`${p}.self_attn.q_norm.weight`] = [hd];
      s[`${p}.self_attn.k_norm.weight`] = [hd];
    }
    s[`${p}.self_attn.o_proj.weight`] = [D, H * hd];
    s[`${p}.post_attention_layernorm.weight`] = [D];
    s[`${p}.mlp.gate_proj.weight`] = [F, D];
    s[`${p}.mlp.up_proj.weight`] = [F, D];
    s[`${p}.mlp.down_proj.weight`] = [D, F];
  }
  s['model.norm.weight'] = [D];
  if (!c.tieWordEmbeddings) s['lm_head.weight'] = [c.vocabSize, D];
  return s;
}

export function parameterCount(c: ModelConfig): number {
  return Object.values(weightShapes(c)).reduce((a, s) => a + s.reduce((p, q) => p * q, 1), 0);
}
