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
  /**
   * HF `rope_scaling` as it came in (types linear, dynamic, yarn, llama3; validated by
   * parseHfConfig, applied by rope.ts, written back by toHfConfig). Absent/null: plain RoPE.
   */
  ropeScaling?: RopeScaling | null;
  /** The dtype the weights came in and are saved in (default float32). */
  dtype?: WeightDType;
  /**
   * config.json fields Arbor does not model but that are safe to carry (e.g. transformers_version,
   * initializer_range, use_sliding_window: false): written back on save so the folder stays the same model.
   */
  extra?: Record<string, unknown>;
}

export type WeightDType = 'float32' | 'float16' | 'bfloat16';
export const WEIGHT_DTYPES: readonly WeightDType[] = ['float32', 'float16', 'bfloat16'];

/** The RoPE scaling types transformers implements for Llama 3.x and Qwen2.5/3, with their fields (HF names). */
export const ROPE_SCALING_TYPES = ['linear', 'dynamic', 'yarn', 'llama3'] as const;
export type RopeScaling = { rope_type: (typeof ROPE_SCALING_TYPES)[number]; factor: number } & Record<string, unknown>;

const ROPE_FIELDS: Record<string, { required: string[]; optional: string[] }> = {
  linear: { required: ['factor'], optional: [] },
  dynamic: { required: ['factor'], optional: ['original_max_position_embeddings'] },
  yarn: {
    required: ['factor'],
    optional: ['attention_factor', 'beta_fast', 'beta_slow', 'mscale', 'mscale_all_dim', 'original_max_position_embeddings', 'truncate'],
  },
  llama3: { required: ['factor', 'low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings'], optional: [] },
};

/** Validate an HF rope_scaling / rope_parameters dict; null for plain RoPE. Unknown types and fields are refused. */
export function parseRopeScaling(raw: unknown, file: string, field = 'rope_scaling'): RopeScaling | null {
  if (raw === null || raw === undefined) return null;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new Error(`${file}: field '${field}' must be an object, got ${JSON.stringify(raw)}`);
  const r = raw as Record<string, unknown>;
  const type = r.rope_type ?? r.type ?? 'default';
  if (type === 'default') return null;
  if (typeof type !== 'string' || !(type in ROPE_FIELDS)) {
    throw new Error(`${file}: ${field}.rope_type ${JSON.stringify(type)} is not supported (supported: default, ${ROPE_SCALING_TYPES.join(', ')})`);
  }
  const spec = ROPE_FIELDS[type];
  for (const k of spec.required) {
    if (typeof r[k] !== 'number' || !Number.isFinite(r[k] as number))
      throw new Error(`${file}: ${field}.${k} is required for rope_type '${type}' and must be a number, got ${JSON.stringify(r[k])}`);
  }
  // rope_theta / partial_rotary_factor live in rope_parameters (transformers ≥ 5) and are read from there.
  const known = new Set(['rope_type', 'type', 'rope_theta', 'partial_rotary_factor', ...spec.required, ...spec.optional]);
  for (const k of Object.keys(r)) {
    if (!known.has(k))
      throw new Error(
        `${file}: ${field}.${k} is not a field of rope_type '${type}' (known: ${[...spec.required, ...spec.optional].join(', ')}); refusing to guess its effect`,
      );
  }
  for (const k of spec.optional) {
    const v = r[k];
    if (v !== undefined && v !== null && (k === 'truncate' ? typeof v !== 'boolean' : typeof v !== 'number')) {
      throw new Error(`${file}: ${field}.${k} must be a ${k === 'truncate' ? 'boolean' : 'number'}, got ${JSON.stringify(v)}`);
    }
  }
  if ((r.factor as number) < 1) throw new Error(`${file}: ${field}.factor must be ≥ 1, got ${r.factor}`);
  if (type === 'llama3' && !((r.high_freq_factor as number) > (r.low_freq_factor as number))) {
    throw new Error(`${file}: ${field}.high_freq_factor (${r.high_freq_factor}) must be greater than low_freq_factor (${r.low_freq_factor})`);
  }
  const out: Record<string, unknown> = { ...r, rope_type: type };
  delete out.type;
  delete out.rope_theta;
  delete out.partial_rotary_factor;
  return out as RopeScaling;
}

/** config.json fields Arbor reads (or checks) itself; everything else goes to `extra`. */
const MODELLED_FIELDS = new Set([
  'architectures',
  'model_type',
  'vocab_size',
  'hidden_size',
  'intermediate_size',
  'num_hidden_layers',
  'num_attention_heads',
  'num_key_value_heads',
  'head_dim',
  'rms_norm_eps',
  'rope_theta',
  'rope_scaling',
  'rope_parameters',
  'tie_word_embeddings',
  'attention_bias',
  'max_position_embeddings',
  'bos_token_id',
  'eos_token_id',
  'pad_token_id',
  'hidden_act',
  'torch_dtype',
  'dtype',
  'mlp_bias',
  'partial_rotary_factor',
  'layer_types',
]);

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
  const layers = req(json, 'num_hidden_layers', file);
  const maxPos = typeof json.max_position_embeddings === 'number' ? json.max_position_embeddings : 4096;
  // Refuse what would change results rather than run a different model without a word.
  const act = json.hidden_act ?? 'silu';
  if (act !== 'silu' && act !== 'swish') throw new Error(`${file}: hidden_act ${JSON.stringify(act)} is not supported (supported: silu)`);
  if (json.mlp_bias === true) throw new Error(`${file}: mlp_bias: true is not supported (the MLP projections have no bias in Arbor's model)`);
  if (json.attention_bias === true && a !== 'Qwen2ForCausalLM') {
    throw new Error(`${file}: attention_bias: true is not supported for ${a} (it adds a bias to o_proj too; only Qwen2's q/k/v biases are implemented)`);
  }
  if (json.quantization_config !== undefined && json.quantization_config !== null) {
    throw new Error(
      `${file}: quantization_config is set (${JSON.stringify((json.quantization_config as Record<string, unknown>)?.quant_method ?? 'unknown')}); quantized weights are not supported, use an unquantized folder`,
    );
  }
  const ropeParams = json.rope_parameters as Record<string, unknown> | undefined;
  const prf = json.partial_rotary_factor ?? ropeParams?.partial_rotary_factor;
  if (prf !== undefined && prf !== null && prf !== 1)
    throw new Error(`${file}: partial_rotary_factor ${JSON.stringify(prf)} is not supported (only 1: RoPE over the whole head)`);
  if (json.rope_scaling != null && ropeParams != null) throw new Error(`${file}: both rope_scaling and rope_parameters are set; expected one`);
  const ropeScaling = ropeParams != null ? parseRopeScaling(ropeParams, file, 'rope_parameters') : parseRopeScaling(json.rope_scaling, file);
  // Sliding-window attention (Qwen2/Qwen3 configs carry the fields, usually switched off).
  const layerTypes = json.layer_types;
  if (layerTypes !== undefined && layerTypes !== null) {
    if (!Array.isArray(layerTypes)) throw new Error(`${file}: field 'layer_types' must be a list, got ${JSON.stringify(layerTypes)}`);
    const other = layerTypes.findIndex((t) => t !== 'full_attention');
    const window = typeof json.sliding_window === 'number' ? json.sliding_window : null;
    if (other >= 0 && !(layerTypes[other] === 'sliding_attention' && window !== null && window >= maxPos)) {
      throw new Error(
        `${file}: layer_types[${other}] is ${JSON.stringify(layerTypes[other])}${layerTypes[other] === 'sliding_attention' ? ` with sliding_window ${window}` : ''}; only full attention is supported`,
      );
    }
  }
  if (a !== 'LlamaForCausalLM' && json.use_sliding_window === true) {
    const window = typeof json.sliding_window === 'number' ? json.sliding_window : null;
    const firstSliding = typeof json.max_window_layers === 'number' ? json.max_window_layers : 0;
    if (window !== null && window < maxPos && firstSliding < layers) {
      throw new Error(
        `${file}: use_sliding_window: true with sliding_window ${window} < max_position_embeddings ${maxPos} (layers ${firstSliding}..${layers - 1}) is not supported; only full attention is implemented`,
      );
    }
  }
  const torchDtype = json.torch_dtype ?? json.dtype;
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(json)) if (!MODELLED_FIELDS.has(k)) extra[k] = v;
  const theta = typeof ropeParams?.rope_theta === 'number' ? ropeParams.rope_theta : typeof json.rope_theta === 'number' ? json.rope_theta : 10000;
  return {
    architecture: a,
    vocabSize: req(json, 'vocab_size', file),
    hiddenSize: hidden,
    intermediateSize: req(json, 'intermediate_size', file),
    numLayers: layers,
    numHeads: heads,
    numKvHeads: kvHeads,
    headDim: typeof json.head_dim === 'number' ? json.head_dim : hidden / heads,
    rmsNormEps: typeof json.rms_norm_eps === 'number' ? json.rms_norm_eps : 1e-6,
    ropeTheta: theta,
    tieWordEmbeddings: json.tie_word_embeddings === true,
    // Qwen2 always has q/k/v biases (Qwen2Config has no switch); other architectures' attention_bias: true is refused above.
    attentionBias: a === 'Qwen2ForCausalLM',
    qkNorm: a === 'Qwen3ForCausalLM',
    maxPositionEmbeddings: maxPos,
    bosTokenId: typeof json.bos_token_id === 'number' ? json.bos_token_id : null,
    eosTokenId: typeof json.eos_token_id === 'number' || Array.isArray(json.eos_token_id) ? (json.eos_token_id as number | number[]) : null,
    padTokenId: typeof json.pad_token_id === 'number' ? json.pad_token_id : null,
    ropeScaling,
    dtype: typeof torchDtype === 'string' && (WEIGHT_DTYPES as readonly string[]).includes(torchDtype) ? (torchDtype as WeightDType) : 'float32',
    extra,
  };
}

export function toHfConfig(c: ModelConfig): Record<string, unknown> {
  const modelType = c.architecture === 'LlamaForCausalLM' ? 'llama' : c.architecture === 'Qwen2ForCausalLM' ? 'qwen2' : 'qwen3';
  return {
    ...(c.extra ?? {}),
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
    rope_scaling: c.ropeScaling ?? null,
    tie_word_embeddings: c.tieWordEmbeddings,
    attention_bias: c.attentionBias,
    max_position_embeddings: c.maxPositionEmbeddings,
    bos_token_id: c.bosTokenId,
    eos_token_id: c.eosTokenId,
    pad_token_id: c.padTokenId,
    hidden_act: 'silu',
    mlp_bias: false,
    torch_dtype: c.dtype ?? 'float32',
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
  const D = c.hiddenSize,
    hd = c.headDim,
    H = c.numHeads,
    Hkv = c.numKvHeads,
    F = c.intermediateSize;
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
