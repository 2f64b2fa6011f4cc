/**
 * PolicyModel: a model's config and weights plus lazily built sessions for its programs.
 *
 * backend 'ort' (default): each program is recorded once into a graph (train graphs get our
 * autodiff), exported to ONNX and run by ONNX Runtime in a worker thread. Weights are graph
 * inputs, so one session serves every step and policy / old policy / reference share a session
 * with different weight feeds. The policy's own weights are sent to each worker once per
 * update (call markWeightsUpdated() after changing them in place); other weights (a frozen
 * reference) travel with the call. backend 'tfjs': the same programs run eagerly in tfjs.
 */
import { availableParallelism, loadavg } from 'node:os';
import { traceGraph, type Graph, type InputSpec, type Program } from '../tensor/graph';
import { withGradients } from '../tensor/autodiff';
import { OrtRunner, OrtWorker, defaultProviders, emptyRunnerStats, type RunnerStats } from '../tensor/ort';
import type { HostTensor } from '../tensor/host';
import type { TfProgram } from '../tensor/tfjs';
import { parameterCount, weightShapes, type ModelConfig } from './config';
import { copyFileSync, mkdirSync, writeFileSync, existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { initWeights, loadCheckpoint, readModelConfig, saveCheckpoint, allocWeight, TOKENIZER_FILES, type Weights } from './checkpoint';
import {
  batchFeeds,
  buildAttentionBias,
  decodeInputSpecs,
  decodeProgram,
  LORA_SEED_INPUT,
  packSequences,
  programWeightShapes,
  sampleFeeds,
  scoreInputSpecs,
  scoreProgram,
  trainInputSpecs,
  trainProgram,
  type LossSpec,
  type PackedBatch,
} from './graphs';
import { adapterShapes, initAdapters, type LoraSpec } from './lora';
import { recomputedBlocks } from './transformer';
import { toOnnx, type OnnxInitializer } from '../tensor/onnx';
import {
  QUANT_ACCURACY_LEVEL,
  QUANT_BITS,
  externalQuantizedInitializers,
  quantizedFeedNames,
  QUANT_BLOCK,
  quantizeBlockwise,
  quantizedInitializers,
  quantizedOps,
  quantizedWeightNames,
  bakedInitializers,
  transposeWeight,
  baseQuantLayout,
  quantizedBaseSpecs,
  quantizedFeeds,
  withQuantizedBase,
  type BaseQuantSpec,
  type QuantMode,
  type QuantizedMatrix,
} from './quantize';
import { isAdapterFolder, readPeftAdapter, readPeftConfig, savePeftAdapter } from './peft';

export type Backend = 'ort' | 'tfjs';

export interface PolicyModelOptions {
  backend?: Backend;
  /** ORT intra-op threads. */
  threads?: number;
  /** ORT execution providers, e.g. ['cuda', 'cpu']. */
  providers?: string[];
  /** Folder whose tokenizer files are copied when saving. */
  tokenizerFolder?: string;
  /**
   * Profile every ORT session with ONNX Runtime's profiler: the session of graph `key` writes
   * `<profilePrefix>-<key>_<timestamp>.json` at `endProfiling()` (benchmarks only; it slows runs).
   */
  profilePrefix?: string;
  /**
   * LoRA adapters on the base weights (engine/model/lora.ts): the programs take the adapter
   * tensors as extra inputs, gradients are computed for them only (trainableNames), and save()
   * writes a PEFT adapter folder. Missing adapter tensors in `weights` are initialised (B = 0).
   */
  lora?: LoraSpec;
  /** Seed of fresh adapters' A matrices and of the dropout masks. */
  loraSeed?: number;
  /** The base model's folder (named in saved adapters); absent for a built-in model, whose base is then saved with each adapter. */
  baseFolder?: string;
  /**
   * Row chunks of the LM head in the score/train programs (transformer.ts headLogprobs): the
   * [B·T, V] logits, log-softmax and their gradients exist one chunk at a time. Default
   * defaultHeadChunks(config): 1 below a 32k vocabulary, 10 at 151,936.
   */
  headChunks?: number;
  /**
   * Keep the frozen base's arrays on this thread under LoRA (default false: with the ORT
   * backend and a base folder they are moved to the model's ORT worker, which then holds the
   * only copy; baseWeights() reads them back from the folder).
   */
  keepHostBase?: boolean;
  /**
   * Train graphs recompute each transformer block's activations in the backward pass (activation
   * checkpointing): peak memory of a step no longer grows with the layer count (only the blocks'
   * inputs are kept), at the cost of one more forward pass of the blocks. Default false. A number
   * k recomputes the first k blocks only (a memory budget: the others keep their activations and
   * cost no extra compute); an integer in [0, numLayers].
   */
  recomputeLayers?: boolean | number;
  /**
   * Quantized decoding (`rollout.quantize`, ./quantize.ts): decode sessions asked for it
   * (decodeRunner / decode with `quantized`) sample with an int8 or int4 block-quantized copy of
   * the linear weights (ORT MatMulNBits), rebuilt when the weights change; scoring, training and
   * the other decode sessions stay float32. ORT backend on the CPU provider only. Default 'none'.
   */
  quantize?: QuantMode;
  /**
   * The frozen base of a LoRA model block-quantized (`model.quantize_base`, ./quantize.ts): every
   * layer's linear weights are quantized once here, their float32 arrays dropped, and every
   * program (score, train forward and backward, decode) reads them as codes + scales through
   * MatMulNBits, the LM head at 8 bits (quantize.ts HEAD_QUANT_BITS) and an untied embedding table
   * too. Norms, biases and adapters stay float32. Backend 'ort'; without
   * `lora` the model only runs inference (`arbor generate --quantize-base`: trainStep and save refuse). An adapter folder saved by such a model records it (PolicyModel.load applies it unless
   * this option is given; null: the float32 base).
   */
  quantizeBase?: BaseQuantSpec | null;
  /**
   * The quantized base's codes, already made (quantized while a folder was read: PolicyModel.load;
   * or generated, for benchmarks of shapes whose float32 base would not fit): `weights` need not
   * hold these tensors. Each must match quantizeBase.
   */
  quantizedBaseMats?: Map<string, QuantizedMatrix>;
  /**
   * With quantizeBase: the largest float32 bytes of a quantized weight dequantized at once in the
   * score and train programs (quantize.ts QUANT_PIECE_BYTES, the default); a larger weight is read
   * in row pieces. For tests of the pieces on small models.
   */
  quantPieceBytes?: number;
  /**
   * Float32 decode sessions on the CPU provider hold the linear weights as initializers (Wᵀ, which
   * ORT pre-packs once) instead of taking them as inputs on every call; the session is rebuilt in
   * place when the weights change (as the quantized one is). Default: on for ORT on the CPU from
   * BAKE_MIN_PARAMS to BAKE_MAX_PARAMS parameters. Below, the weights sit in the core's caches,
   * packing them per call is cheap, and a rebuild (~45 ms for the 0.1M tiny model, mostly ORT's
   * graph optimisation) costs as much as a training step's decoding gains; above, the baked copy
   * would be a second copy of the weights in memory (the score and train sessions keep theirs as
   * inputs), which HF-sized models cannot spare. Measured: docs/BENCHMARKS.md, "Baked decode
   * weights". WebGPU sessions keep their device-resident weight inputs.
   */
  bakeDecodeWeights?: boolean;
}

/** Load average per core from which decode sessions are made with sleeping pool threads (decodeSpins). */
export const DECODE_SPIN_MAX_LOAD_PER_CORE = 2;

/**
 * Whether a decode session made now lets ORT's pool threads spin between ops (its default): for
 * models from BAKE_MIN_PARAMS parameters on a quiet machine. Measured (bench:rollout, 2 threads,
 * docs/BENCHMARKS.md "Baked decode weights"): 25M on a quiet machine decoded 1.2–1.5× as fast
 * spinning (batch 1: 154–171 vs 107–110 tok/s); at load 5–9 on 2 cores sleeping threads did
 * (batch 8: 518 vs 400), as the spinning pool kept the engine's thread off the cores between
 * calls; the 0.1M tiny model, whose steps are mostly the worker's own work between short runs,
 * decoded slower spinning even on a quiet machine (batch 1: 1397 vs 1839). Decided when the
 * session is made; it changes how pool threads wait, never the numbers (docs/areas/rollout.md).
 */
export function decodeSpins(params: number, loadPerCore = loadavg()[0]! / availableParallelism()): boolean {
  return params >= BAKE_MIN_PARAMS && loadPerCore < DECODE_SPIN_MAX_LOAD_PER_CORE;
}

/** From this many parameters float32 decode sessions bake the weights in by default (PolicyModelOptions.bakeDecodeWeights). */
export const BAKE_MIN_PARAMS = 4e6;
/** Up to this many parameters by default: above, a baked copy would double the weights' memory (PolicyModelOptions.bakeDecodeWeights). */
export const BAKE_MAX_PARAMS = 200e6;

/** Arbor's own state saved next to a PEFT adapter (the dropout mask counter, so a resume draws the same masks). */
const LORA_STATE = 'arbor_lora_state.json';

/**
 * The rows of one decode-graph call, also the continuous batcher's (engine/rollout/kv-slots.ts
 * KvDecodeInput, whose pasts `Kv` may be device tensors).
 */
export interface DecodeRows<Kv = Float32Array> {
  batch: number;
  /** New tokens per row (T); rows are left-padded. */
  newLength: number;
  /** Past length per row (P); pasts are left-padded. */
  pastLength: number;
  inputIds: Int32Array; // [B, T]
  attentionMask: Int32Array; // [B, P + T]
  positionIds: Int32Array; // [B, T]
  past: { k: Kv; v: Kv }[]; // per layer [B, Hkv, P, hd]
}

export interface DecodeInput extends DecodeRows {
  /** Sampling-head inputs per row (default: u 0, 1/T 1, not greedy). */
  sample?: { u: Float32Array; invTemp: Float32Array; greedy: Float32Array };
}

export interface DecodeOutput {
  logits: Float32Array; // [B, V]
  present: { k: Float32Array; v: Float32Array }[]; // per layer [B, Hkv, P + T, hd]
  /** The sampling head's token, logprob and entropy per row. */
  sampled: { ids: Int32Array; logprobs: Float32Array; entropy: Float32Array };
}

export interface TrainStepResult {
  loss: number;
  metrics: Record<string, number>;
  grads: Weights;
  /** log π of every target under the weights the step ran with, [B, T] as the packed batch (train graph output `token_logprobs`). */
  logprobs?: Float32Array;
}

/** The quantized base an adapter folder was trained on (arbor_lora_state.json: quantize_base, quantize_block), or null. */
export function savedBaseQuant(folder: string): BaseQuantSpec | null {
  const f = join(folder, LORA_STATE);
  if (!existsSync(f)) return null;
  const st = JSON.parse(readFileSync(f, 'utf8')) as { quantize_base?: string; quantize_block?: number };
  if (st.quantize_base !== 'int4' && st.quantize_base !== 'int8') return null;
  return { bits: st.quantize_base === 'int4' ? 4 : 8, blockSize: st.quantize_block ?? QUANT_BLOCK };
}

/** A model folder, its base's linear weights quantized tensor by tensor as they are read when `q` is given (model.quantize_base). */
function loadQuantizing(folder: string, q: BaseQuantSpec | null | undefined) {
  if (!q) return loadCheckpoint(folder);
  const config = readModelConfig(folder);
  return loadCheckpoint(folder, { quantize: baseQuantLayout(config, q) });
}

function saveCheckpointTokenizer(from: string, to: string): void {
  for (const f of TOKENIZER_FILES) if (existsSync(join(from, f)) && resolve(from) !== resolve(to)) copyFileSync(join(from, f), join(to, f));
}

export class PolicyModel {
  readonly backend: Backend;
  private runners = new Map<string, Promise<OrtRunner>>();
  /**
   * The worker thread hosting every ORT session of this model (score, decode, train; policy,
   * old policy and reference alike): the weights are sent to it once and held there once.
   */
  private ortWorker: OrtWorker | null = null;
  /** Workers of the extra decode sessions (decodeRunner(shard > 0)) and the weights version each holds. */
  private shardWorkers = new Map<number, { worker: OrtWorker; sent: number }>();
  private sentVersion = -1;
  private weightsVersion = 0;
  /** Bumped when non-trainable weights change too (setWeights), so the worker gets every tensor again. */
  private fullVersion = 0;
  private sentFull = -1;
  /** The frozen base's arrays were moved to the ORT worker (LoRA with a base folder; see keepHostBase). */
  private baseMoved = false;
  private disposed = false;
  private decodeBuildMs = 0;
  readonly lora?: LoraSpec;
  /** LoRA dropout: training calls so far (each draws fresh masks from it). */
  private dropoutCalls = 0;

  constructor(
    readonly config: ModelConfig,
    public weights: Weights,
    readonly opts: PolicyModelOptions = {},
  ) {
    this.backend = opts.backend ?? 'ort';
    this.lora = opts.lora;
    recomputedBlocks(config, opts.recomputeLayers); // refuses a budget outside [0, numLayers] here, not at the first step
    if ((opts.quantize ?? 'none') !== 'none' && this.backend !== 'ort')
      throw new Error(`rollout.quantize "${opts.quantize}": quantized decoding runs on backend "ort" (ONNX Runtime's MatMulNBits), not "${this.backend}"`);
    if (opts.quantizeBase) {
      if (this.backend !== 'ort') throw new Error(`model.quantize_base: the quantized base runs on backend "ort" (MatMulNBits), not "${this.backend}"`);
      if ((opts.quantize ?? 'none') !== 'none')
        throw new Error('rollout.quantize: with model.quantize_base the base is already quantized in every phase; remove rollout.quantize');
    }
    if (this.lora) {
      const fresh = initAdapters(config, this.lora, opts.loraSeed ?? 0);
      for (const [k, v] of fresh) if (!weights.has(k)) weights.set(k, v);
    }
    const given = opts.quantizeBase ? opts.quantizedBaseMats : undefined;
    const layout = opts.quantizeBase ? baseQuantLayout(config, opts.quantizeBase) : undefined;
    for (const [name, m] of given ?? []) {
      const want = layout!.get(name);
      if (!want) throw new Error(`PolicyModel: quantized weight '${name}' is not part of the quantized base`);
      if (m.bits !== want.bits || m.blockSize !== want.blockSize)
        throw new Error(
          `PolicyModel: quantized weight '${name}' is ${m.bits}-bit in blocks of ${m.blockSize}, quantizeBase asks for ${want.bits} / ${want.blockSize}`,
        );
    }
    for (const [name, shape] of Object.entries(programWeightShapes(config, this.lora))) {
      const q = given?.get(name);
      if (q) {
        if (q.N !== shape[0] || q.K !== shape[1]) throw new Error(`PolicyModel: quantized weight '${name}' is [${q.N}, ${q.K}], shape [${shape}] expected`);
        continue;
      }
      const w = weights.get(name);
      const n = shape.reduce((p, q) => p * q, 1);
      if (!w) throw new Error(`PolicyModel: missing weight '${name}'`);
      if (w.length !== n) throw new Error(`PolicyModel: weight '${name}' has ${w.length} values, shape [${shape}] needs ${n}`);
    }
    if (opts.quantizeBase) this.quantizeBaseNow();
  }

  /** The quantized base's spec (model.quantize_base), or undefined for a float32 base. */
  get baseQuant(): BaseQuantSpec | undefined {
    return this.opts.quantizeBase ?? undefined;
  }
  /** The quantized base linear weights (model.quantize_base), by weight name. */
  private baseMats: Map<string, QuantizedMatrix> | null = null;
  /** The float32 arrays of the quantized weights were dropped (read from the base folder when needed). */
  private baseDropped = false;

  /** The codes of the quantized base were moved to the model's ORT worker (syncWeights). */
  private codesMoved = false;

  /**
   * The quantized base's codes and scales by weight name (model.quantize_base; empty for a float32
   * base). Once they live in the ORT worker, quantized again from the base (the same codes).
   */
  quantizedBase(): Map<string, QuantizedMatrix> {
    if (!this.baseMats) return new Map();
    if (!this.codesMoved) return this.baseMats;
    const base = this.baseWeights();
    const out = new Map<string, QuantizedMatrix>();
    for (const [name, m] of this.baseMats) out.set(name, quantizeBlockwise(base.get(name)!, m.N, m.K, m.bits, m.blockSize));
    return out;
  }

  /**
   * Quantize the base's linear weights (once at load, again after setWeights) and drop their
   * float32 arrays when the base folder can give them back (a built-in model keeps them: save()
   * writes its base next to the adapters).
   */
  private quantizeBaseNow(): void {
    const shapes = weightShapes(this.config);
    const mats = new Map<string, QuantizedMatrix>();
    const given = this.baseMats ? undefined : this.opts.quantizedBaseMats;
    let dropped = !!this.opts.baseFolder;
    for (const [name, spec] of baseQuantLayout(this.config, this.opts.quantizeBase!)) {
      const w = this.weights.get(name);
      const [N, K] = shapes[name]!;
      if (w) mats.set(name, quantizeBlockwise(w, N!, K!, spec.bits, spec.blockSize));
      else if (given?.has(name)) {
        mats.set(name, given.get(name)!);
        dropped = true; // no float32 array here to keep
        continue;
      } else throw new Error(`PolicyModel: missing weight '${name}'`);
      if (this.opts.baseFolder) this.weights.delete(name);
    }
    this.baseMats = mats;
    this.baseDropped = dropped;
    this.codesMoved = false;
  }

  /** Trace a program (score, train, decode with weight inputs) with the quantized base read from its codes and scales inputs. */
  private trace(specs: InputSpec[], program: Program): Graph {
    const q = this.baseQuant;
    if (!q) return traceGraph(specs, program);
    const layout = baseQuantLayout(this.config, q);
    return traceGraph(quantizedBaseSpecs(specs, layout), withQuantizedBase(program, layout, weightShapes(this.config), 'input', 0, this.opts.quantPieceBytes));
  }

  /**
   * An HF model folder, or a PEFT LoRA adapter folder (adapter_config.json): then its base
   * model (base_model_name_or_path) is loaded and the adapters are put on it.
   */
  static load(folder: string, opts: PolicyModelOptions = {}): PolicyModel {
    if (isAdapterFolder(folder) && !existsSync(join(folder, 'config.json'))) {
      const { baseModel } = readPeftConfig(folder);
      if (!baseModel)
        throw new Error(
          `${join(folder, 'adapter_config.json')}: field 'base_model_name_or_path' is empty; merge it onto its base with \`arbor merge <base> ${folder} <out>\``,
        );
      if (!existsSync(join(baseModel, 'config.json')))
        throw new Error(`${join(folder, 'adapter_config.json')}: base model folder '${baseModel}' (base_model_name_or_path) not found`);
      const quantizeBase = opts.quantizeBase !== undefined ? opts.quantizeBase : savedBaseQuant(folder);
      const ck = loadQuantizing(baseModel, quantizeBase);
      const ad = readPeftAdapter(folder, ck.config);
      const want = opts.lora;
      if (want && (want.rank !== ad.spec.rank || want.alpha !== ad.spec.alpha || want.targets.join() !== ad.spec.targets.join()))
        throw new Error(
          `${join(folder, 'adapter_config.json')}: adapter r=${ad.spec.rank} alpha=${ad.spec.alpha} on ${ad.spec.targets.join(',')} does not match model.lora (rank ${want.rank}, alpha ${want.alpha}, ${want.targets.join(',')})`,
        );
      for (const [k, v] of ad.adapters) ck.weights.set(k, v);
      const tok = existsSync(join(folder, 'tokenizer.json')) ? folder : baseModel;
      const m = new PolicyModel(ck.config, ck.weights, {
        tokenizerFolder: tok,
        baseFolder: resolve(baseModel),
        ...opts,
        quantizeBase,
        ...(ck.quantized ? { quantizedBaseMats: ck.quantized } : {}),
        lora: { ...ad.spec, dropout: want?.dropout ?? ad.spec.dropout },
      });
      m.readLoraState(folder);
      return m;
    }
    const ck = loadQuantizing(folder, opts.quantizeBase);
    return new PolicyModel(ck.config, ck.weights, {
      tokenizerFolder: folder,
      baseFolder: resolve(folder),
      ...opts,
      ...(ck.quantized ? { quantizedBaseMats: ck.quantized } : {}),
    });
  }

  static init(config: ModelConfig, seed: number, opts: PolicyModelOptions = {}): PolicyModel {
    return new PolicyModel(config, initWeights(config, seed), opts);
  }

  /** Full model: an HF folder. LoRA: a PEFT adapter folder naming the base (plus the tokenizer files, and the base itself under base/ when it has no folder). */
  save(folder: string): void {
    if (!this.lora && this.baseQuant)
      throw new Error('PolicyModel.save: a full model with a quantized base (quantizeBase without lora) has no float32 weights to save; its folder holds them');
    if (!this.lora) {
      saveCheckpoint(folder, this.config, this.weights, { tokenizerFrom: this.opts.tokenizerFolder });
      return;
    }
    mkdirSync(folder, { recursive: true });
    let base = this.opts.baseFolder ?? null;
    if (!base) {
      saveCheckpoint(join(folder, 'base'), this.config, this.baseWeights(), { tokenizerFrom: this.opts.tokenizerFolder });
      base = 'base';
    }
    savePeftAdapter(folder, this.config, this.lora, this.weights, base);
    if (this.opts.tokenizerFolder) saveCheckpointTokenizer(this.opts.tokenizerFolder, folder);
    const q = this.baseQuant;
    writeFileSync(
      join(folder, LORA_STATE),
      JSON.stringify({ dropout_calls: this.dropoutCalls, ...(q ? { quantize_base: q.bits === 4 ? 'int4' : 'int8', quantize_block: q.blockSize } : {}) }) + '\n',
    );
  }

  /**
   * The base model's tensors (without adapters), shared, not copied; read from the base folder
   * when the frozen base lives only in the ORT worker (keepHostBase).
   */
  baseWeights(): Weights {
    const source = this.baseMoved || this.baseDropped ? loadCheckpoint(this.opts.baseFolder!).weights : this.weights;
    const out: Weights = new Map();
    for (const name of Object.keys(weightShapes(this.config))) out.set(name, source.get(name)!);
    return out;
  }

  /** The tensors training updates: the adapters under LoRA, else every weight. */
  trainableNames(): string[] {
    return this.lora ? Object.keys(adapterShapes(this.config, this.lora)) : Object.keys(weightShapes(this.config));
  }

  /**
   * The trainable tensors stored in a checkpoint folder (PEFT adapters under LoRA, else the HF
   * model's weights), checked against this model's layout.
   */
  readTrainable(folder: string): Weights {
    if (!this.lora) {
      if (isAdapterFolder(folder) && !existsSync(join(folder, 'config.json')))
        throw new Error(`checkpoint ${folder} holds a LoRA adapter, but this run has no model.lora`);
      return loadCheckpoint(folder).weights;
    }
    if (!isAdapterFolder(folder))
      throw new Error(`checkpoint ${folder}: no adapter_config.json, but this run trains LoRA adapters (model.lora); a full-model checkpoint cannot resume it`);
    const ad = readPeftAdapter(folder, this.config);
    const a = ad.spec,
      b = this.lora;
    if (a.rank !== b.rank || a.alpha !== b.alpha || a.targets.join() !== b.targets.join())
      throw new Error(
        `checkpoint ${folder}: adapter r=${a.rank} alpha=${a.alpha} on ${a.targets.join(',')} does not match model.lora (rank ${b.rank}, alpha ${b.alpha}, ${b.targets.join(',')})`,
      );
    return ad.adapters;
  }

  /** Load a checkpoint's trainable tensors (and LoRA's dropout counter) into this model. */
  loadTrainable(folder: string): void {
    for (const [k, v] of this.readTrainable(folder)) this.weights.get(k)!.set(v);
    if (this.lora) this.readLoraState(folder);
    this.markWeightsUpdated();
  }

  private readLoraState(folder: string): void {
    const f = join(folder, LORA_STATE);
    if (existsSync(f)) this.dropoutCalls = Number((JSON.parse(readFileSync(f, 'utf8')) as { dropout_calls?: number }).dropout_calls ?? 0);
  }

  /** Call after changing `weights` in place (an optimizer step) so sessions see the new values. */
  markWeightsUpdated(): void {
    this.weightsVersion += 1;
  }

  /** Replace all weights (e.g. loaded from a checkpoint). */
  setWeights(weights: Weights): void {
    this.weights = weights;
    this.baseMoved = false;
    if (this.baseQuant) this.quantizeBaseNow();
    this.fullVersion += 1;
    this.markWeightsUpdated();
  }

  /**
   * A deep copy of the trainable weights (e.g. a frozen reference policy): every weight for a
   * full model; under LoRA only the adapters, since the base is frozen and shared (a reference
   * passed to score() overrides just these).
   */
  cloneWeights(): Weights {
    const out: Weights = new Map();
    const keep = new Set(this.trainableNames());
    for (const [k, v] of this.weights) {
      if (!keep.has(k)) continue;
      const c = allocWeight(v.length);
      c.set(v);
      out.set(k, c);
    }
    return out;
  }

  /** Feeds of the program's weight inputs: `only` = just those names; `override` replaces the live tensors of the names it holds. */
  private weightFeeds(override?: Weights, only?: Set<string>): Record<string, HostTensor> {
    const shapes = programWeightShapes(this.config, this.lora);
    const f: Record<string, HostTensor> = {};
    for (const [name, m] of this.baseMats ?? []) if (!only || only.has(name)) Object.assign(f, quantizedFeeds(name, m));
    for (const [name, shape] of Object.entries(shapes)) {
      if (only && !only.has(name)) continue;
      if (this.baseMats?.has(name)) continue;
      const data = override?.get(name) ?? this.weights.get(name);
      if (!data) throw new Error(`PolicyModel: weight '${name}' is not on this thread (the frozen base lives in the ORT worker; keepHostBase keeps it here)`);
      f[name] = { dtype: 'float32', shape, data };
    }
    return f;
  }

  /** A session of this model: in the model's ORT worker, or in `worker` (a decode shard's own). */
  private runner(
    key: string,
    build: () => Graph | Uint8Array,
    threads = this.opts.threads,
    worker?: OrtWorker,
    outputLocation?: Record<string, 'cpu' | 'gpu-buffer'>,
    externalFeeds?: string[],
  ): Promise<OrtRunner> {
    if (this.disposed) throw new Error('PolicyModel: used after dispose()');
    let r = this.runners.get(key);
    if (!r) {
      const profilePrefix = this.opts.profilePrefix && `${this.opts.profilePrefix}-${key.replace(/[^A-Za-z0-9]+/g, '_')}`;
      const w = worker ?? (this.ortWorker ??= OrtWorker.create());
      // Train and score graphs without ORT's memory pattern: its per-shape block would sit beside the arena's chunks (RunnerOptions.memPattern).
      const memPattern = !(key.startsWith('train') || key.startsWith('score'));
      // On a busy machine decode sessions' pool threads sleep between ops (RunnerOptions.spin): the
      // engine's thread needs a core after every call. On a quiet one spinning is faster.
      const spin = key.startsWith('decode') ? decodeSpins(this.parameters) : undefined;
      r = OrtRunner.create(build(), { threads, providers: this.opts.providers, profilePrefix, worker: w, memPattern, outputLocation, spin, externalFeeds });
      this.runners.set(key, r);
    }
    return r;
  }

  /** Send the weights to the model's ORT worker when they changed (once for all its sessions). */
  private syncWeights(r: Pick<OrtRunner, 'setPersistentFeeds'>): void {
    if (this.sentVersion === this.weightsVersion) return;
    // Under LoRA the frozen base goes to the worker once; later updates send only the adapters.
    const trainable = new Set(this.trainableNames());
    const full = this.sentFull !== this.fullVersion || !this.lora;
    let move =
      full && this.lora && this.backend === 'ort' && this.opts.baseFolder && !this.opts.keepHostBase
        ? new Set(Object.keys(weightShapes(this.config)).filter((n) => !this.baseMats?.has(n)))
        : undefined;
    // A quantized base's codes and scales are moved too (the worker holds the only copy; the CPU
    // decode session reads them there as external initializers). quantizedBase() re-quantizes on request.
    const codes = full && this.lora && this.baseMats && !this.opts.keepHostBase ? quantizedFeedNames(this.baseMats) : [];
    if (codes.length) move = new Set([...(move ?? []), ...codes]);
    // A staging buffer is kept only for tensors sent again (updates), not after the first send.
    r.setPersistentFeeds(this.weightFeeds(undefined, full ? undefined : trainable), { move, keepStaging: this.sentVersion < 0 ? new Set() : trainable });
    if (move) {
      // Moved, not copied: the worker holds the only copy of the frozen base.
      for (const name of move) this.weights.delete(name);
      this.baseMoved = !!this.opts.baseFolder;
      if (codes.length) this.codesMoved = true;
    }
    this.sentVersion = this.weightsVersion;
    this.sentFull = this.fullVersion;
  }

  /**
   * The decode program's runner (ORT backend) with the current weights sent: for a KV cache
   * hosted in its worker (engine/rollout/worker-kv.ts). Call before every use.
   * `threads`: a decode session with that many intra-op threads; `shard` > 0: another decode
   * session, in a worker of its own, for data-parallel decoding (engine/rollout/worker-kv.ts
   * ShardedKvBackend; shard 0 runs in the model's worker).
   */
  decodeRunner = async (shard = 0, threads?: number, quantized = false): Promise<OrtRunner> => {
    if (this.backend !== 'ort') throw new Error('PolicyModel.decodeRunner: only the ORT backend runs decode in a worker');
    const c = this.config;
    const q = quantized && this.quantizeMode !== 'none';
    if (q && this.onDevice)
      throw new Error(
        `rollout.quantize "${this.quantizeMode}": quantized decoding runs on the CPU provider (MatMulNBits pre-packed for the CPU), not on WebGPU`,
      );
    // On the CPU the worker's KV host extends its cache itself from the new tokens' keys and values (DecodeVariant.kvOut).
    const kvOut = this.onDevice ? 'present' : 'new';
    const baked = this.bakedBits(q);
    if (baked !== null) return this.bakedRunner(baked, shard, threads, kvOut);
    const build = () => this.trace(decodeInputSpecs(c, this.lora), decodeProgram(c, this.lora, { kvOut }));
    if (this.onDevice) {
      // WebGPU: the KV cache and the logits stay on the device (engine/rollout/worker-kv.ts reads
      // ids, logprobs and entropies only); a session of its own, as PolicyModel.decode reads presents.
      if (shard !== 0) throw new Error('PolicyModel.decodeRunner: one decode session on the WebGPU device (runs on it are serialised)');
      const loc: Record<string, 'gpu-buffer'> = { logits: 'gpu-buffer' };
      for (let i = 0; i < c.numLayers; i++) loc[`present_k_${i}`] = loc[`present_v_${i}`] = 'gpu-buffer';
      const r = await this.runner('decode:device', build, this.opts.threads, undefined, loc);
      this.syncWeights(r);
      return r;
    }
    if (shard === 0) {
      // The first decode session lives in the model's worker, next to its weights.
      const r = await this.runner(`decode#kv0:${threads ?? ''}`, build, threads ?? this.opts.threads);
      this.syncWeights(r);
      return r;
    }
    // Further decode shards each run in a worker of their own (sessions sharing a worker would
    // take turns), which holds its own copy of the weights, sent again after each update.
    if (this.lora) throw new Error('PolicyModel.decodeRunner: extra decode sessions are not supported under LoRA (the frozen base lives in one worker)');
    let sw = this.shardWorkers.get(shard);
    if (!sw) {
      sw = { worker: OrtWorker.create(), sent: -1 };
      this.shardWorkers.set(shard, sw);
    }
    const r = await this.runner(`decode#kv${shard}:${threads ?? ''}`, build, threads ?? this.opts.threads, sw.worker);
    if (sw.sent !== this.weightsVersion) {
      r.setPersistentFeeds(this.weightFeeds());
      sw.sent = this.weightsVersion;
    }
    return r;
  };

  /** Whether float32 decode sessions bake the linear weights in (option bakeDecodeWeights; CPU provider only; never with a quantized base). */
  get bakesDecode(): boolean {
    const p = this.parameters;
    return this.backend === 'ort' && !this.onDevice && !this.baseQuant && (this.opts.bakeDecodeWeights ?? (p >= BAKE_MIN_PARAMS && p <= BAKE_MAX_PARAMS));
  }

  /**
   * The weights a decode session bakes in: 4 / 8 the quantized codes (rollout.quantize when
   * `quantized`; a quantized base on the CPU, always: MatMulNBits pre-packs constant codes, where
   * codes as inputs are dequantized on every call), 32 float32 Wᵀ (bakesDecode), null none (the
   * weights are inputs: WebGPU, or small models on the CPU).
   */
  private bakedBits(quantized: boolean): 4 | 8 | 32 | null {
    if (this.baseQuant) return this.onDevice ? null : this.baseQuant.bits;
    if (quantized && this.quantizeMode !== 'none') return QUANT_BITS[this.quantizeMode as Exclude<QuantMode, 'none'>];
    return this.bakesDecode ? 32 : null;
  }

  /** The model's parameter count (its config is fixed; decodeRunner asks on every call). */
  private get parameters(): number {
    return (this.paramCount ??= parameterCount(this.config));
  }
  private paramCount?: number;

  /** The model's `quantize` option ('none' when not given). */
  get quantizeMode(): QuantMode {
    return this.opts.quantize ?? 'none';
  }

  /** Weight version a quantized session is built for: the adapters never enter it (they stay float32 inputs), so under LoRA only a new base counts. */
  private quantVersion(): number {
    return this.lora ? this.fullVersion : this.weightsVersion;
  }
  private quantCache: { version: number; mats: Map<string, QuantizedMatrix> } | null = null;
  /** Per baked runner key: the weight version its session holds, and its pending rebuild. */
  private bakedBuilt = new Map<string, { version: number; pending: Promise<void> }>();

  /** The quantized copy of the current weights (./quantize.ts), computed once per weight version. */
  quantizedWeights(): Map<string, QuantizedMatrix> {
    const v = this.quantVersion();
    if (this.quantCache?.version === v) return this.quantCache.mats;
    const bits = QUANT_BITS[this.quantizeMode as Exclude<QuantMode, 'none'>];
    if (!bits) throw new Error('PolicyModel.quantizedWeights: the model has no quantize mode');
    const src = this.lora ? this.baseWeights() : this.weights;
    const shapes = weightShapes(this.config);
    const mats = new Map<string, QuantizedMatrix>();
    for (const name of quantizedWeightNames(this.config)) {
      const [N, K] = shapes[name]!;
      mats.set(name, quantizeBlockwise(src.get(name)!, N!, K!, bits, QUANT_BLOCK));
    }
    this.quantCache = { version: v, mats };
    return mats;
  }

  /** The linear weights transposed for a baked float32 decode session (not kept: ORT holds the baked copy). */
  private bakedWeights(): Map<string, { N: number; K: number; wT: Float32Array }> {
    const src = this.lora ? this.baseWeights() : this.weights;
    const shapes = weightShapes(this.config);
    const mats = new Map<string, { N: number; K: number; wT: Float32Array }>();
    for (const name of quantizedWeightNames(this.config)) {
      const [N, K] = shapes[name]!;
      mats.set(name, { N: N!, K: K!, wT: transposeWeight(src.get(name)!, N!, K!) });
    }
    return mats;
  }

  /** The quantized decode program as an ONNX model: MatMulNBits nodes over initializers holding the current weights' codes. */
  quantizedDecodeModel(): Uint8Array {
    return this.bakedDecodeModel(QUANT_BITS[this.quantizeMode as Exclude<QuantMode, 'none'>], 'present');
  }

  /** The decode program with the linear weights baked in: quantized codes (bits 8 / 4) or float32 Wᵀ (bits 32). */
  private bakedDecodeModel(bits: 4 | 8 | 32, kvOut: 'present' | 'new'): Uint8Array {
    const c = this.config;
    if (this.baseQuant) {
      // The quantized base: codes and scales as initializers, the other weights (embeddings, norms, head, adapters) persistent feeds.
      const layout = baseQuantLayout(c, this.baseQuant);
      const specs = decodeInputSpecs(c, this.lora).filter((s) => !layout.has(s.name));
      // int8 activations (accuracy level 4) for every weight: MLAS's pre-packed int4 kernel with int8 activations is 2× its
      // float32-products one at batch 8 (level 0), and for 8 bits (an int8 base, the LM head of any quantized base:
      // HEAD_QUANT_BITS) level 4 is the only path that is not a dequantization per call on AVX2 (measured:
      // docs/areas/model.md). So the sampler's logits differ from the learner's by the activations' rounding.
      // Whole weights, never pieces: ORT pre-packs constant codes once (no dequantization per call to split).
      const program = withQuantizedBase(decodeProgram(c, this.lora, { kvOut }), layout, weightShapes(c), 'initializer', QUANT_ACCURACY_LEVEL, Infinity);
      // The codes are the worker's persistent feeds, read by ORT at session creation (RunnerOptions.externalFeeds): no copy in the model.
      return toOnnx(traceGraph(specs, program), { initializers: externalQuantizedInitializers(this.baseMats!) });
    }
    let plan: Map<string, { bits: 4 | 8 | 32; blockSize: number }>;
    let initializers: Record<string, OnnxInitializer>;
    if (bits === 32) {
      const mats = this.bakedWeights();
      plan = new Map([...mats.keys()].map((n) => [n, { bits: 32, blockSize: 0 }] as const));
      initializers = bakedInitializers(mats);
    } else {
      const mats = this.quantizedWeights();
      plan = new Map([...mats].map(([n, m]) => [n, { bits: m.bits, blockSize: m.blockSize }] as const));
      initializers = quantizedInitializers(mats);
    }
    const program = decodeProgram(c, this.lora, { kvOut });
    const g = traceGraph(decodeInputSpecs(c, this.lora), (o, x) => program(quantizedOps(o, plan), x));
    return toOnnx(g, { initializers });
  }

  /**
   * A decode session with the linear weights baked in (quantized: rollout.quantize; float32:
   * bakeDecodeWeights), shard 0 in the model's worker, others in their own, rebuilt in place
   * (OrtRunner.reload: the KV cache host bound to it keeps its slots) when the weights changed
   * since it was built. Its other inputs (embeddings, norms, adapters) are the worker's persistent
   * feeds, as for the session with weight inputs.
   */
  private async bakedRunner(bits: 4 | 8 | 32, shard: number, threads: number | undefined, kvOut: 'present' | 'new'): Promise<OrtRunner> {
    const key = `decode#${bits === 32 ? 'w' : 'q'}${kvOut === 'new' ? 'kv' : ''}${shard}:${threads ?? ''}`;
    const build = () => {
      this.bakedBuilt.set(key, { version: this.quantVersion(), pending: Promise.resolve() });
      return this.bakedDecodeModel(bits, kvOut);
    };
    let r: OrtRunner;
    if (shard === 0 && this.baseQuant) {
      // The codes must be in the worker before the session that reads them as external initializers is made.
      this.syncWeights((this.ortWorker ??= OrtWorker.create()));
      r = await this.runner(key, build, threads ?? this.opts.threads, undefined, undefined, quantizedFeedNames(this.baseMats!));
    } else if (shard === 0) {
      r = await this.runner(key, build, threads ?? this.opts.threads);
      this.syncWeights(r);
    } else {
      if (this.baseQuant) throw new Error("PolicyModel.decodeRunner: one decode session with a quantized base (its codes live in the model's worker)");
      if (this.lora) throw new Error('PolicyModel.decodeRunner: extra decode sessions are not supported under LoRA (the frozen base lives in one worker)');
      let sw = this.shardWorkers.get(shard);
      if (!sw) {
        sw = { worker: OrtWorker.create(), sent: -1 };
        this.shardWorkers.set(shard, sw);
      }
      r = await this.runner(key, build, threads ?? this.opts.threads, sw.worker);
      if (sw.sent !== this.weightsVersion) {
        r.setPersistentFeeds(this.weightFeeds());
        sw.sent = this.weightsVersion;
      }
    }
    const b = this.bakedBuilt.get(key)!;
    const v = this.quantVersion();
    if (b.version !== v) {
      b.version = v;
      b.pending = b.pending.then(() => r.reload(this.bakedDecodeModel(bits, kvOut)));
    }
    await b.pending;
    return r;
  }

  /** Sessions run on the WebGPU provider (weights and the decode KV cache resident on the device). */
  get onDevice(): boolean {
    return this.backend === 'ort' && (this.opts.providers ?? defaultProviders())[0] === 'webgpu';
  }

  /** Run a program; `weights` overrides the policy's own weights for this call only. */
  private async run(
    key: string,
    specs: () => Graph,
    program: TfProgram,
    feeds: Record<string, HostTensor>,
    weights?: Weights,
    grad?: { loss: string; wrt: string[] },
  ): Promise<Record<string, HostTensor>> {
    if (this.backend === 'tfjs') {
      // tfjs (a second or more of CPU to load) only when a policy runs on it: not for every CLI command or test that loads the runtime.
      const { initTfjs, runTfjs } = await import('../tensor/tfjs');
      await initTfjs();
      return runTfjs(program, { ...this.weightFeeds(weights), ...feeds }, grad);
    }
    const r = await this.runner(key, specs);
    this.syncWeights(r);
    return r.run(weights ? { ...this.weightFeeds(weights, new Set(weights.keys())), ...feeds } : feeds);
  }

  /**
   * Per-token logprobs (and entropy) of each sequence's tokens given its prefix; `temperature`:
   * of the scored policy, softmax(logits / T) (default 1; the RL update's is rollout.temperature).
   */
  async score(
    input: number[][] | PackedBatch,
    opts: { weights?: Weights; entropy?: boolean; temperature?: number } = {},
  ): Promise<{ batch: PackedBatch; logprobs: Float32Array; entropy?: Float32Array }> {
    const batch = Array.isArray(input) ? packSequences(input, this.config.padTokenId ?? 0) : input;
    const withEntropy = !!opts.entropy;
    const temperature = opts.temperature ?? 1;
    const program = scoreProgram(this.config, withEntropy, this.lora, this.opts.headChunks, temperature);
    const out = await this.run(
      `score:${withEntropy}${temperature === 1 ? '' : `:T${temperature}`}`,
      () => this.trace(scoreInputSpecs(this.config, this.lora), program),
      program as TfProgram,
      batchFeeds(batch),
      opts.weights,
    );
    return { batch, logprobs: out.logprobs.data as Float32Array, entropy: out.entropy?.data as Float32Array | undefined };
  }

  /**
   * Loss, metrics and gradients for one (micro-)batch. `lossMask` [B, T] selects the tokens
   * the loss sees; `lossFeeds` are the loss program's extra inputs. `wrt` limits gradients to
   * a subset of weights (default: trainableNames(), i.e. the adapters under LoRA, else all);
   * `temperature`: of the trained policy, as for score (default 1: SFT).
   */
  async trainStep(
    batch: PackedBatch,
    loss: LossSpec,
    lossMask: Float32Array,
    lossFeeds: Record<string, HostTensor> = {},
    wrt?: string[],
    temperature = 1,
  ): Promise<TrainStepResult> {
    if (this.baseQuant && !this.lora) throw new Error('model.quantize_base: the quantized weights are frozen codes; train LoRA adapters on them (model.lora)');
    const names = wrt ?? this.trainableNames();
    // A head nobody differentiates (LoRA) takes the closed-form head gradient (transformer.ts frozenHeadLogprobs).
    const frozenHead = this.backend === 'ort' && !names.includes(this.config.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
    const program = trainProgram(this.config, loss, this.lora, this.opts.headChunks, this.opts.recomputeLayers, frozenHead, temperature);
    const key = `train:${loss.key}:${wrt ? names.join(',') : 'trainable'}${temperature === 1 ? '' : `:T${temperature}`}`;
    const build = () => withGradients(this.trace(trainInputSpecs(this.config, loss, this.lora), program), 'loss', names, { weightsFirst: !!this.lora });
    const feeds: Record<string, HostTensor> = {
      ...batchFeeds(batch),
      loss_mask: { dtype: 'float32', shape: [batch.batch, batch.length], data: lossMask },
      ...lossFeeds,
    };
    if (this.lora && this.lora.dropout > 0) {
      // A fresh seed per training call (counted, saved with the adapter, so a resume continues the sequence).
      const seed = ((this.opts.loraSeed ?? 0) * 7919 + ++this.dropoutCalls * 104729) % 1048573;
      feeds[LORA_SEED_INPUT] = { dtype: 'float32', shape: [], data: Float32Array.of(seed) };
    }
    const out = await this.run(key, build, program as TfProgram, feeds, undefined, { loss: 'loss', wrt: names });
    const grads: Weights = new Map();
    const metrics: Record<string, number> = {};
    for (const [k, v] of Object.entries(out)) {
      if (k.startsWith('grad.')) grads.set(k.slice(5), v.data as Float32Array);
      else if (v.shape.length === 0) metrics[k] = Number(v.data[0]);
    }
    return { loss: metrics.loss, metrics, grads, logprobs: out.token_logprobs?.data as Float32Array | undefined };
  }

  /** One call of the KV-cache decode program (the rollout engine's KvDecodeFn); `quantized`: on the quantized session (quantize option). */
  decode = async (x: DecodeInput, quantized = false): Promise<DecodeOutput> => {
    const c = this.config;
    const t0 = performance.now();
    const B = x.batch,
      T = x.newLength,
      P = x.pastLength,
      S = P + T;
    const feeds: Record<string, HostTensor> = {
      input_ids: { dtype: 'int32', shape: [B, T], data: x.inputIds },
      position_ids: { dtype: 'int32', shape: [B, T], data: x.positionIds },
      attn_bias: { dtype: 'float32', shape: [B, 1, T, S], data: buildAttentionBias(x.attentionMask, B, T, S) },
      ...sampleFeeds(B, x.sample),
    };
    for (let i = 0; i < c.numLayers; i++) {
      const kvShape = [B, c.numKvHeads, P, c.headDim];
      feeds[`past_k_${i}`] = { dtype: 'float32', shape: kvShape, data: x.past[i]?.k ?? new Float32Array(0) };
      feeds[`past_v_${i}`] = { dtype: 'float32', shape: kvShape, data: x.past[i]?.v ?? new Float32Array(0) };
    }
    const program = decodeProgram(c, this.lora);
    this.decodeBuildMs += performance.now() - t0;
    const baked = this.bakedBits(quantized);
    const out =
      baked !== null
        ? await (await this.bakedRunner(baked, 0, undefined, 'present')).run(feeds)
        : await this.run('decode', () => this.trace(decodeInputSpecs(c, this.lora), program), program as TfProgram, feeds);
    return {
      logits: out.logits.data as Float32Array,
      sampled: { ids: out.token.data as Int32Array, logprobs: out.token_logprob.data as Float32Array, entropy: out.token_entropy.data as Float32Array },
      present: Array.from({ length: c.numLayers }, (_, i) => ({
        k: out[`present_k_${i}`].data as Float32Array,
        v: out[`present_v_${i}`].data as Float32Array,
      })),
    };
  };

  /**
   * Cumulative timing of the decode program's calls (ORT backend): the runner's split (see
   * RunnerStats) plus `buildMs`, building the feeds (attention bias) on this thread. For benchmarks.
   */
  async decodeStats(reset = false): Promise<RunnerStats & { buildMs: number }> {
    // Every decode session (shards of a ShardedKvBackend too: their times are summed).
    const out: RunnerStats & { buildMs: number } = { ...emptyRunnerStats(), buildMs: this.decodeBuildMs };
    for (const [key, r] of this.runners) {
      if (key !== 'decode' && !key.startsWith('decode#') && key !== 'decode:device') continue;
      const runner = await r;
      for (const k of Object.keys(runner.stats) as (keyof RunnerStats)[]) out[k] += runner.stats[k];
      if (reset) runner.stats = emptyRunnerStats();
    }
    if (reset) this.decodeBuildMs = 0;
    return out;
  }

  /**
   * Summed RunnerStats of this model's sessions whose key starts with `prefix` ('train', 'score',
   * 'decode'): time split and the bytes that crossed to and from a device. For benchmarks.
   */
  async runnerStats(prefix: string): Promise<RunnerStats> {
    const out = emptyRunnerStats();
    for (const [key, r] of this.runners) {
      if (!key.startsWith(prefix)) continue;
      const runner = await r;
      for (const k of Object.keys(runner.stats) as (keyof RunnerStats)[]) out[k] += runner.stats[k];
    }
    return out;
  }

  /** Full-sequence logits of the last position for each sequence (no cache): the reference for decode. */
  async lastLogits(seqs: number[][]): Promise<Float32Array[]> {
    const res: Float32Array[] = [];
    for (const s of seqs) {
      const T = s.length;
      const out = await this.decode({
        batch: 1,
        newLength: T,
        pastLength: 0,
        inputIds: Int32Array.from(s),
        attentionMask: new Int32Array(T).fill(1),
        positionIds: Int32Array.from({ length: T }, (_, i) => i),
        past: [],
      });
      res.push(out.logits);
    }
    return res;
  }

  /** Ends ORT profiling in every session opened so far (see `profilePrefix`). */
  async endProfiling(): Promise<void> {
    for (const r of this.runners.values()) await (await r).endProfiling();
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    for (const r of this.runners.values()) await (await r).dispose();
    this.runners.clear();
    await this.ortWorker?.dispose();
    this.ortWorker = null;
    for (const sw of this.shardWorkers.values()) await sw.worker.dispose();
    this.shardWorkers.clear();
  }
}
