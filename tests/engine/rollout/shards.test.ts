import { describe, expect, it } from 'vitest';
import { tinyConfig } from '../../../engine/model/config';
import type { PolicyModel } from '../../../engine/model/runtime';
import { decodeShards, policyDecodeBackend } from '../../../engine/rollout/model-backend';

const tiny = tinyConfig({ vocabSize: 512, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 512, padTokenId: 0 });
const m25 = tinyConfig({
  vocabSize: 8192,
  hiddenSize: 512,
  layers: 7,
  heads: 8,
  kvHeads: 4,
  intermediateSize: 1408,
  maxPositionEmbeddings: 512,
  padTokenId: 0,
});
const big = tinyConfig({ vocabSize: 32000, hiddenSize: 1024, layers: 8, heads: 16, kvHeads: 4, maxPositionEmbeddings: 512, padTokenId: 0 });
// decodeShards reads only the config and the thread count.
const stub = (config: typeof tiny, threads: number) => ({ config, opts: { threads }, backend: 'ort' }) as unknown as PolicyModel;

describe('decodeShards: how many decode sessions a model gets by default', () => {
  it('one session on a quiet machine', () => {
    expect(decodeShards(stub(tiny, 2), 64, 0.5)).toBe(1);
    expect(decodeShards(stub(tiny, 2), 64, 2.9)).toBe(1);
  });
  it('on a busy machine, one session per thread for a small model at a batch of ≥ 8 rows per session', () => {
    expect(decodeShards(stub(tiny, 2), 64, 5)).toBe(2);
    expect(decodeShards(stub(tiny, 2), 16, 5)).toBe(2);
    expect(decodeShards(stub(tiny, 8), 64, 5)).toBe(4);
    expect(decodeShards(stub(tiny, 2), 8, 5)).toBe(1);
    expect(decodeShards(stub(tiny, 1), 64, 5)).toBe(1);
  });
  it('a mid-size model needs ≥ 16 rows per session; a large one always gets one session', () => {
    expect(decodeShards(stub(m25, 2), 64, 5)).toBe(2);
    expect(decodeShards(stub(m25, 2), 8, 5)).toBe(1);
    expect(decodeShards(stub(big, 2), 64, 5)).toBe(1);
  });
  it('refuses a bad shard count, and several sessions without the worker cache', () => {
    expect(() => policyDecodeBackend(stub(tiny, 2), { shards: 0 })).toThrow(/shards must be an integer ≥ 1/);
    expect(() => policyDecodeBackend(stub(tiny, 2), { shards: 2, cache: 'host' })).toThrow(/needs the worker KV cache/);
  });
});
