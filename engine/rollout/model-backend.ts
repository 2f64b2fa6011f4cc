/**
 * DecodeBackends over engine/model's PolicyModel: the KV-cache decode graph with continuous
 * batching (KvSlotBackend over `model.decode`), and the no-cache baseline (full recompute).
 */
import type { PolicyModel } from '../model/runtime';
import type { ModelConfig } from '../model/config';
import { KvSlotBackend } from './kv-slots';
import { WorkerKvBackend } from './worker-kv';
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
}

export function policyDecodeBackend(model: PolicyModel, o: ModelBackendOptions = {}): DecodeBackend {
  const c = model.config;
  if (o.cache === 'worker' && model.backend !== 'ort')
    throw new Error(`policyDecodeBackend: cache 'worker' needs the ORT backend (the model runs on ${model.backend})`);
  if (model.backend === 'ort' && (o.cache ?? 'worker') === 'worker' && (o.keepPacked ?? true))
    return new WorkerKvBackend(model.decodeRunner, {
      layers: c.numLayers,
      kvHeads: c.numKvHeads,
      headDim: c.headDim,
      vocabSize: c.vocabSize,
      maxBatch: o.maxBatch ?? 16,
      maxLength: o.maxLength ?? c.maxPositionEmbeddings,
      padId: c.padTokenId ?? 0,
    });
  return new KvSlotBackend(
    model.decode,
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
