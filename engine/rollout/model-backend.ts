/**
 * DecodeBackends over engine/model's PolicyModel: the KV-cache decode graph with continuous
 * batching (KvSlotBackend over `model.decode`), and the no-cache baseline (full recompute).
 */
import type { PolicyModel } from '../model/runtime';
import { parameterCount, type ModelConfig } from '../model/config';
import { defaultThreads } from '../tensor/ort';
import { hostPast, KvSlotBackend } from './kv-slots';
import { ShardedKvBackend, WorkerKvBackend } from './worker-kv';
import type { DecodeBackend } from './ports';
import { RecomputeBackend } from './recompute';

export interface ModelBackendOptions {
  /** Largest number of sequences decoded together (default 16). */
  maxBatch?: number;
  /** Context per sequence (default: the model's max_position_embeddings). */
  maxLength?: number;
  /** Keep the batch KV cache packed between steps (default true; false only to measure its effect). */
  keepPacked?: boolean;
  /**
   * Where the KV cache lives: 'worker' (default with the ORT backend: next to the decode session,
   * sampling in the graph; see worker-kv.ts) or 'host' (this thread: the cache crosses to the
   * worker every step and the engine samples from logits; the tfjs backend always uses it).
   */
  cache?: 'worker' | 'host';
  /**
   * Decode sessions working side by side (worker cache only), each in its own worker with
   * `threads / shards` intra-op threads (at least 1). Default 1 on every machine: sessions of
   * other row counts and thread counts round differently, so the layout would change the sampled
   * tokens and a run's results (see decodeShards for a count that suits a busy machine).
   */
  shards?: number;
  /**
   * Sample with the model's quantized decode session (PolicyModel option `quantize`,
   * `rollout.quantize`): the training rollouts; evaluation and serving keep float32. Default false.
   */
  quantized?: boolean;
}

/** Models up to this many parameters may decode data-parallel (see decodeShards). */
export const SHARD_MAX_PARAMS = 32e6;
/** Up to this many parameters (weights within a core's caches) sessions may hold as few as 8 rows; above, 16. */
const SHARD_SMALL_PARAMS = 4e6;

/**
 * A number of decode sessions a caller may ask for (ModelBackendOptions.shards) to decode a small
 * model data-parallel on a busy machine: one single-threaded session per thread (at most 4) for a
 * model of ≤ SHARD_MAX_PARAMS parameters without LoRA, when each session gets enough rows (≥ 8 for
 * ≤ 4M parameters, whose weights stay in cache; ≥ 16 above, where a few rows per session would
 * mostly re-read the weights once per session); else 1. Not the default: each layout rounds
 * differently (other GEMM row counts per session), so a run's sampled tokens, and so its results,
 * would depend on it; the default is one session on every machine, whatever its load (issue 38:
 * the same demo seed gave 47.3 on a quiet machine, 55.5 on a loaded one that decoded in two). Measured (bench:rollout
 * `--shards`, docs/BENCHMARKS.md): at load 9–21 on 2 cores, two sessions decoded 1.2–2.8× as fast
 * as one two-threaded session at batch 64 (a busy machine deschedules the pool's second thread and
 * every op waits for it); at load 4–5, 0.7–0.9×.
 */
export function decodeShards(model: PolicyModel, maxBatch: number): number {
  const threads = model.opts.threads ?? defaultThreads();
  const params = parameterCount(model.config);
  // Under LoRA the frozen base lives only in the model's own worker (PolicyModel keepHostBase).
  // On the WebGPU device one session decodes (runs on it are serialised: one queue per process).
  // A quantized base's codes live in the model's worker only (PolicyModel quantizeBase).
  if (params > SHARD_MAX_PARAMS || model.lora || model.baseQuant || model.onDevice) return 1;
  const minRows = params <= SHARD_SMALL_PARAMS ? 8 : 16;
  return Math.max(1, Math.min(threads, 4, Math.floor(maxBatch / minRows)));
}

export function policyDecodeBackend(model: PolicyModel, o: ModelBackendOptions = {}): DecodeBackend {
  const c = model.config;
  if (o.cache === 'worker' && model.backend !== 'ort')
    throw new Error(`policyDecodeBackend: cache 'worker' needs the ORT backend (the model runs on ${model.backend})`);
  if (o.shards !== undefined && (!Number.isInteger(o.shards) || o.shards < 1))
    throw new Error(`policyDecodeBackend: shards must be an integer ≥ 1 (got ${o.shards})`);
  if (model.backend === 'ort' && (o.cache ?? 'worker') === 'worker' && (o.keepPacked ?? true)) {
    const spec = {
      layers: c.numLayers,
      kvHeads: c.numKvHeads,
      headDim: c.headDim,
      vocabSize: c.vocabSize,
      maxBatch: o.maxBatch ?? 16,
      maxLength: o.maxLength ?? c.maxPositionEmbeddings,
      padId: c.padTokenId ?? 0,
    };
    const shards = o.shards ?? 1;
    const q = !!o.quantized;
    if (shards === 1) return new WorkerKvBackend(() => model.decodeRunner(0, undefined, q), spec);
    const threads = Math.max(1, Math.floor((model.opts.threads ?? defaultThreads()) / shards));
    return new ShardedKvBackend(Array.from({ length: shards }, (_, k) => new WorkerKvBackend(() => model.decodeRunner(k, threads, q), spec)));
  }
  if (o.shards !== undefined && o.shards !== 1)
    throw new Error(
      `policyDecodeBackend: shards ${o.shards} needs the worker KV cache on the ORT backend (got ${model.backend}, cache '${o.cache ?? 'worker'}')`,
    );
  return new KvSlotBackend(
    (x) => model.decode({ ...x, past: hostPast(x.past) }, !!o.quantized),
    { layers: c.numLayers, kvHeads: c.numKvHeads, headDim: c.headDim, vocabSize: c.vocabSize },
    o.maxBatch ?? 16,
    o.maxLength ?? c.maxPositionEmbeddings,
    c.padTokenId ?? 0,
    o.keepPacked ?? true,
  );
}

export function policyRecomputeBackend(model: PolicyModel, o: ModelBackendOptions = {}): RecomputeBackend {
  const c = model.config;
  return new RecomputeBackend((seqs) => model.lastLogits(seqs), c.vocabSize, o.maxBatch ?? 16, o.maxLength ?? c.maxPositionEmbeddings);
}

/** The config's EOS id(s) as stop tokens. */
export function eosTokenIds(c: ModelConfig): number[] {
  return c.eosTokenId === null ? [] : Array.isArray(c.eosTokenId) ? c.eosTokenId : [c.eosTokenId];
}
