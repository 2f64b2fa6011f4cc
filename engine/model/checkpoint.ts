/**
 * Checkpoints are HF model folders: config.json, model.safetensors (or shards with
 * model.safetensors.index.json), generation_config.json, and the tokenizer files, so a trained
 * Arbor model opens in any HF tool and any HF Llama/Qwen folder opens in Arbor.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseHfConfig, toHfConfig, weightShapes, type ModelConfig } from './config';
import { readSafetensors, writeSafetensors, type SafeTensor } from './safetensors';

export const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.json', 'merges.txt', 'chat_template.jinja'];

export type Weights = Map<string, Float32Array>;

export interface LoadedCheckpoint {
  folder: string;
  config: ModelConfig;
  weights: Weights;
}

/**
 * Allocate a weight array. (Not a SharedArrayBuffer: onnxruntime-node 1.30 rejects
 * SharedArrayBuffer-backed inputs with "Invalid argument", measured; weights are sent to the
 * model worker once per update instead, see PolicyModel.markWeightsUpdated.)
 */
export function allocWeight(n: number): Float32Array {
  return new Float32Array(n);
}

export function readModelConfig(folder: string): ModelConfig {
  const file = join(folder, 'config.json');
  if (!existsSync(file)) throw new Error(`model folder ${folder}: config.json not found`);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: invalid JSON (${(e as Error).message})`);
  }
  return parseHfConfig(json, file);
}

export function loadCheckpoint(folder: string): LoadedCheckpoint {
  const config = readModelConfig(folder);
  const tensors = new Map<string, SafeTensor>();
  const single = join(folder, 'model.safetensors');
  const index = join(folder, 'model.safetensors.index.json');
  if (existsSync(single)) {
    for (const [k, v] of readSafetensors(single)) tensors.set(k, v);
  } else if (existsSync(index)) {
    let map: Record<string, string>;
    try {
      map = (JSON.parse(readFileSync(index, 'utf8')) as { weight_map: Record<string, string> }).weight_map;
    } catch (e) {
      throw new Error(`${index}: invalid index (${(e as Error).message})`);
    }
    for (const shard of new Set(Object.values(map))) {
      for (const [k, v] of readSafetensors(join(folder, shard))) tensors.set(k, v);
    }
  } else {
    throw new Error(`model folder ${folder}: neither model.safetensors nor model.safetensors.index.json found`);
  }
  const weights: Weights = new Map();
  for (const [name, shape] of Object.entries(weightShapes(config))) {
    const t = tensors.get(name);
    if (!t) throw new Error(`${folder}: missing tensor '${name}' (expected shape [${shape}])`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new Error(`${folder}: tensor '${name}' has shape [${t.shape}], expected [${shape}]`);
    }
    const w = allocWeight(t.data.length);
    w.set(t.data);
    weights.set(name, w);
  }
  return { folder, config, weights };
}

export function saveCheckpoint(folder: string, config: ModelConfig, weights: Weights, opts: { tokenizerFrom?: string; generationConfig?: Record<string, unknown> } = {}): void {
  mkdirSync(folder, { recursive: true });
  const shapes = weightShapes(config);
  const tensors = new Map<string, SafeTensor>();
  for (const [name, shape] of Object.entries(shapes)) {
    const w = weights.get(name);
    if (!w) throw new Error(`saveCheckpoint: missing weight '${name}'`);
    tensors.set(name, { shape, data: w });
  }
  writeSafetensors(join(folder, 'model.safetensors'), tensors);
  writeFileSync(join(folder, 'config.json'), JSON.stringify(toHfConfig(config), null, 2) + '\n');
  const gen = opts.generationConfig ?? { bos_token_id: config.bosTokenId, eos_token_id: config.eosTokenId, pad_token_id: config.padTokenId };
  writeFileSync(join(folder, 'generation_config.json'), JSON.stringify(gen, null, 2) + '\n');
  if (opts.tokenizerFrom && opts.tokenizerFrom !== folder) {
    for (const f of TOKENIZER_FILES) {
      const src = join(opts.tokenizerFrom, f);
      if (existsSync(src)) copyFileSync(src, join(folder, f));
    }
  }
}

/** Seeded initialisation: N(0, 0.02) for matrices (mulberry32 + Box-Muller), ones for norms, zeros for biases. */
export function initWeights(config: ModelConfig, seed: number): Weights {
  let s = seed >>> 0;
  const rand = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const weights: Weights = new Map();
  for (const [name, shape] of Object.entries(weightShapes(config))) {
    const n = shape.reduce((p, q) => p * q, 1);
    const w = allocWeight(n);
    if (name.endsWith('norm.weight')) w.fill(1);
    else if (!name.endsWith('.bias')) for (let i = 0; i < n; i++) w[i] = 0.02 * normal();
    weights.set(name, w);
  }
  return weights;
}
