/**
 * Named model shapes: the released models' config.json widths, depths, heads, vocabularies and
 * embedding tying (random weights are generated in-process where a shape is run), plus the two
 * small shapes of the decode benchmarks. One list for the benchmarks' `--shape`
 * (scripts/bench/shapes.ts re-exports it) and `arbor plan --shape`.
 */
import { tinyConfig, type ModelConfig } from './config';

const QWEN = { rmsNormEps: 1e-6, ropeTheta: 1000000, bosTokenId: 151643, padTokenId: null } as const;
/** What the Qwen3 releases share (their config.json): vocabulary, GQA with 8 KV heads of 128, QK-norm, no attention bias, 40K positions. */
const QWEN3 = {
  ...QWEN,
  architecture: 'Qwen3ForCausalLM',
  vocabSize: 151936,
  numKvHeads: 8,
  headDim: 128,
  attentionBias: false,
  qkNorm: true,
  maxPositionEmbeddings: 40960,
  eosTokenId: 151645,
} as const;
/** What the Llama 3 releases share (their config.json): vocabulary, GQA with 8 KV heads, no bias or QK-norm, 128K positions. */
const LLAMA3 = {
  architecture: 'LlamaForCausalLM',
  vocabSize: 128256,
  numKvHeads: 8,
  rmsNormEps: 1e-5,
  ropeTheta: 500000,
  attentionBias: false,
  qkNorm: false,
  maxPositionEmbeddings: 131072,
  bosTokenId: 128000,
  eosTokenId: 128001,
  padTokenId: null,
} as const;

/** Published shapes (config.json of the released models). */
export const SHAPES: Record<string, ModelConfig> = {
  'qwen2.5-0.5b': {
    ...QWEN,
    architecture: 'Qwen2ForCausalLM',
    vocabSize: 151936,
    hiddenSize: 896,
    intermediateSize: 4864,
    numLayers: 24,
    numHeads: 14,
    numKvHeads: 2,
    headDim: 64,
    tieWordEmbeddings: true,
    attentionBias: true,
    qkNorm: false,
    maxPositionEmbeddings: 32768,
    eosTokenId: 151643,
  },
  'qwen3-0.6b': {
    ...QWEN3,
    hiddenSize: 1024,
    intermediateSize: 3072,
    numLayers: 28,
    numHeads: 16,
    tieWordEmbeddings: true,
  },
  'llama3.2-1b': {
    ...LLAMA3,
    hiddenSize: 2048,
    intermediateSize: 8192,
    numLayers: 16,
    numHeads: 32,
    headDim: 64,
    tieWordEmbeddings: true,
    ropeScaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
  },
  // Qwen/Qwen2.5-1.5B config.json: 1.54B parameters.
  'qwen2.5-1.5b': {
    ...QWEN,
    architecture: 'Qwen2ForCausalLM',
    vocabSize: 151936,
    hiddenSize: 1536,
    intermediateSize: 8960,
    numLayers: 28,
    numHeads: 12,
    numKvHeads: 2,
    headDim: 128,
    tieWordEmbeddings: true,
    attentionBias: true,
    qkNorm: false,
    maxPositionEmbeddings: 131072,
    eosTokenId: 151643,
  },
  // Qwen/Qwen3-4B config.json: 4.02B parameters.
  'qwen3-4b': {
    ...QWEN3,
    hiddenSize: 2560,
    intermediateSize: 9728,
    numLayers: 36,
    numHeads: 32,
    tieWordEmbeddings: true,
  },
  // Qwen/Qwen3-8B config.json: 8.19B parameters (untied LM head).
  'qwen3-8b': {
    ...QWEN3,
    hiddenSize: 4096,
    intermediateSize: 12288,
    numLayers: 36,
    numHeads: 32,
    tieWordEmbeddings: false,
  },
  // meta-llama/Llama-3.1-8B config.json: 8.03B parameters (untied LM head, llama3 RoPE scaling).
  'llama3.1-8b': {
    ...LLAMA3,
    hiddenSize: 4096,
    intermediateSize: 14336,
    numLayers: 32,
    numHeads: 32,
    headDim: 128,
    tieWordEmbeddings: false,
    ropeScaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
  },
};

/** The decode benchmarks' two small sizes (bench:rollout, bench:quant): the tiny task model and the 25M shape of issue #29. */
export const SMALL_SHAPES: Record<'tiny' | '25m', ModelConfig> = {
  tiny: tinyConfig({ vocabSize: 512, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 512, padTokenId: 0 }),
  '25m': tinyConfig({ vocabSize: 8192, hiddenSize: 512, layers: 7, heads: 8, kvHeads: 4, intermediateSize: 1408, maxPositionEmbeddings: 512, padTokenId: 0 }),
};

/** Every named shape, small ones first. */
export const ALL_SHAPES: Record<string, ModelConfig> = { ...SMALL_SHAPES, ...SHAPES };

/** A named shape, or an error listing the known names. */
export function shapeByName(name: string, flag = '--shape'): ModelConfig {
  const c = ALL_SHAPES[name.toLowerCase()];
  if (!c) throw new Error(`${flag}: unknown shape '${name}' (known: ${Object.keys(ALL_SHAPES).join(', ')})`);
  return c;
}
