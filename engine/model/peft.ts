/**
 * LoRA adapters in Hugging Face PEFT's on-disk format, so transformers/PEFT
 * (`PeftModel.from_pretrained(base, folder)`) and vLLM (`LoRARequest`) load what Arbor trains:
 *
 *   adapter_config.json        PEFT's LoraConfig fields (peft_type LORA, r, lora_alpha,
 *                              lora_dropout, target_modules as the resolved module list, …)
 *   adapter_model.safetensors  `base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight`
 *                              [r, in] and `…lora_B.weight` [out, r], float32 (PEFT strips the
 *                              adapter name "default" when saving; so does this)
 *
 * `base_model_name_or_path` names the base model folder: absolute when the base came from a
 * folder; "base" (a `base/` folder inside the adapter folder, resolved against the adapter
 * folder by Arbor) when the base is the built-in tiny model, which exists on no disk otherwise.
 * Reading refuses what Arbor's adapters cannot represent (DoRA, rsLoRA, per-module rank or
 * alpha patterns, trained biases, extra saved modules), each naming the field.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { ModelConfig } from './config';
import type { Weights } from './checkpoint';
import { adapterShapes, LORA_TARGETS, type LoraSpec, type LoraTarget } from './lora';
import { readSafetensors, writeSafetensors, type SafeTensor } from './safetensors';

export const ADAPTER_CONFIG = 'adapter_config.json';
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';
/** PEFT's prefix of a causal LM's saved adapter keys (PeftModel → LoraModel → the HF model). */
export const PEFT_PREFIX = 'base_model.model.';

export const isAdapterFolder = (folder: string): boolean => existsSync(join(folder, ADAPTER_CONFIG));

/** PEFT's LoraConfig as saved by `save_pretrained` (PEFT 0.13–0.17 field set). */
export function peftAdapterConfig(spec: LoraSpec, baseModel: string | null): Record<string, unknown> {
  return {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: baseModel,
    bias: 'none',
    corda_config: null,
    eva_config: null,
    exclude_modules: null,
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layer_replication: null,
    layers_pattern: null,
    layers_to_transform: null,
    loftq_config: {},
    lora_alpha: spec.alpha,
    lora_bias: false,
    lora_dropout: spec.dropout,
    megatron_config: null,
    megatron_core: 'megatron.core',
    modules_to_save: null,
    peft_type: 'LORA',
    r: spec.rank,
    rank_pattern: {},
    revision: null,
    target_modules: [...spec.targets],
    task_type: 'CAUSAL_LM',
    use_dora: false,
    use_rslora: false,
  };
}

export function savePeftAdapter(folder: string, config: ModelConfig, spec: LoraSpec, adapters: Weights, baseModel: string | null): void {
  const tensors = new Map<string, SafeTensor>();
  for (const [name, shape] of Object.entries(adapterShapes(config, spec))) {
    const w = adapters.get(name);
    if (!w) throw new Error(`savePeftAdapter: missing adapter tensor '${name}'`);
    tensors.set(PEFT_PREFIX + name, { shape, data: w });
  }
  writeSafetensors(join(folder, ADAPTER_WEIGHTS), tensors);
  writeFileSync(join(folder, ADAPTER_CONFIG), JSON.stringify(peftAdapterConfig(spec, baseModel), null, 2) + '\n');
}

export interface PeftAdapter {
  folder: string;
  spec: LoraSpec;
  /** The base model folder, resolved (relative names against the adapter folder); null when the config names none. */
  baseModel: string | null;
  /** Adapter tensors under Arbor's names (`model.layers.N.….lora_A.weight`). */
  adapters: Weights;
}

/** The adapter config alone (spec and base folder), validated. */
export function readPeftConfig(folder: string): { spec: LoraSpec; baseModel: string | null } {
  const file = join(folder, ADAPTER_CONFIG);
  if (!existsSync(file)) throw new Error(`adapter folder ${folder}: ${ADAPTER_CONFIG} not found`);
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: invalid JSON (${(e as Error).message})`);
  }
  const bad = (field: string, why: string): never => {
    throw new Error(`${file}: field '${field}' ${why}`);
  };
  if (j.peft_type !== 'LORA') bad('peft_type', `must be "LORA", got ${JSON.stringify(j.peft_type)}`);
  const r = j.r;
  if (typeof r !== 'number' || !Number.isInteger(r) || r <= 0) bad('r', `must be a positive integer, got ${JSON.stringify(r)}`);
  const alpha = j.lora_alpha ?? 8;
  if (typeof alpha !== 'number' || !(alpha > 0)) bad('lora_alpha', `must be a positive number, got ${JSON.stringify(alpha)}`);
  const dropout = typeof j.lora_dropout === 'number' ? j.lora_dropout : 0;
  if (j.use_dora === true) bad('use_dora', 'is true: DoRA adapters are not supported');
  if (j.use_rslora === true) bad('use_rslora', 'is true: rank-stabilised scaling (alpha/√r) is not supported');
  if (j.fan_in_fan_out === true) bad('fan_in_fan_out', 'is true: only [out, in] Linear layers are supported');
  if (j.bias !== undefined && j.bias !== 'none') bad('bias', `is ${JSON.stringify(j.bias)}: trained biases are not supported (only "none")`);
  if (j.lora_bias === true) bad('lora_bias', 'is true: LoRA biases are not supported');
  for (const f of ['rank_pattern', 'alpha_pattern'] as const)
    if (j[f] && typeof j[f] === 'object' && Object.keys(j[f] as object).length) bad(f, 'sets per-module values, which are not supported');
  for (const f of ['modules_to_save', 'layers_to_transform', 'layer_replication', 'target_parameters'] as const)
    if (j[f] !== undefined && j[f] !== null && !(Array.isArray(j[f]) && (j[f] as unknown[]).length === 0)) bad(f, `is ${JSON.stringify(j[f])}: not supported`);
  let targets: LoraTarget[];
  const tm = j.target_modules;
  if (tm === 'all-linear') targets = [...LORA_TARGETS];
  else if (Array.isArray(tm) && tm.every((t) => typeof t === 'string')) {
    const unknown = (tm as string[]).filter((t) => !(LORA_TARGETS as readonly string[]).includes(t));
    if (unknown.length) bad('target_modules', `names ${unknown.map((u) => JSON.stringify(u)).join(', ')}; supported: ${LORA_TARGETS.join(', ')}`);
    targets = LORA_TARGETS.filter((t) => (tm as string[]).includes(t));
    if (!targets.length) bad('target_modules', 'is empty');
  } else bad('target_modules', `must be a list of module names or "all-linear", got ${JSON.stringify(tm)}`);
  const base = typeof j.base_model_name_or_path === 'string' && j.base_model_name_or_path ? j.base_model_name_or_path : null;
  const baseModel = base === null ? null : isAbsolute(base) ? base : existsSync(resolve(folder, base)) ? resolve(folder, base) : base;
  return { spec: { rank: r as number, alpha: alpha as number, dropout, targets: targets! }, baseModel };
}

/** Read an adapter folder, checking every tensor's name and shape against the base model's config. */
export function readPeftAdapter(folder: string, config: ModelConfig): PeftAdapter {
  const { spec, baseModel } = readPeftConfig(folder);
  const file = join(folder, ADAPTER_WEIGHTS);
  if (!existsSync(file)) throw new Error(`adapter folder ${folder}: ${ADAPTER_WEIGHTS} not found`);
  const tensors = readSafetensors(file);
  const shapes = adapterShapes(config, spec);
  const adapters: Weights = new Map();
  for (const [key, t] of tensors) {
    // Some writers keep PEFT's adapter name ("….lora_A.default.weight"); accept and drop it.
    const name = key.replace(/\.lora_([AB])\.default\.weight$/, '.lora_$1.weight');
    if (!name.startsWith(PEFT_PREFIX)) throw new Error(`${file}: tensor '${key}' does not start with '${PEFT_PREFIX}'`);
    const inner = name.slice(PEFT_PREFIX.length);
    const shape = shapes[inner];
    if (!shape) throw new Error(`${file}: unexpected tensor '${key}' (not an adapter of ${spec.targets.join(', ')} on this ${config.numLayers}-layer model)`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i]))
      throw new Error(`${file}: tensor '${key}' has shape [${t.shape}], expected [${shape}]`);
    adapters.set(inner, Float32Array.from(t.data));
  }
  for (const name of Object.keys(shapes)) if (!adapters.has(name)) throw new Error(`${file}: missing tensor '${PEFT_PREFIX}${name}'`);
  return { folder, spec, baseModel, adapters };
}
