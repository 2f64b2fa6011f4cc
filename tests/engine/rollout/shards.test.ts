import { describe, expect, it, vi } from 'vitest';

// A machine loaded far beyond its cores (the load at which sessions used to be split by default).
vi.mock('node:os', async (importOriginal) => ({ ...(await importOriginal<typeof import('node:os')>()), loadavg: () => [100, 100, 100] }));
import { tinyConfig } from '../../../engine/model/config';
import type { PolicyModel } from '../../../engine/model/runtime';
import { decodeShards, policyDecodeBackend } from '../../../engine/rollout/model-backend';
import { ShardedKvBackend, WorkerKvBackend } from '../../../engine/rollout/worker-kv';

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

describe('decode sessions: one by default, several only when asked for', () => {
  it('the default backend is one session on every machine (the layout changes rounding, so results)', () => {
    // Under the mocked load of 100: a tiny model at batch 64 on 2 threads, which decodeShards would split, still gets one session.
    expect(decodeShards(stub(tiny, 2), 64)).toBe(2);
    expect(policyDecodeBackend(stub(tiny, 2), { maxBatch: 64 })).toBeInstanceOf(WorkerKvBackend);
    expect(policyDecodeBackend(stub(tiny, 2), { maxBatch: 64, shards: 2 })).toBeInstanceOf(ShardedKvBackend);
  });
  it('decodeShards: one session per thread for a small model at a batch of ≥ 8 rows per session', () => {
    expect(decodeShards(stub(tiny, 2), 64)).toBe(2);
    expect(decodeShards(stub(tiny, 2), 16)).toBe(2);
    expect(decodeShards(stub(tiny, 8), 64)).toBe(4);
    expect(decodeShards(stub(tiny, 2), 8)).toBe(1);
    expect(decodeShards(stub(tiny, 1), 64)).toBe(1);
  });
  it('decodeShards: a mid-size model needs ≥ 16 rows per session; a large one always gets one session', () => {
    expect(decodeShards(stub(m25, 2), 64)).toBe(2);
    expect(decodeShards(stub(m25, 2), 8)).toBe(1);
    expect(decodeShards(stub(big, 2), 64)).toBe(1);
  });
  it('refuses a bad shard count, and several sessions without the worker cache', () => {
    expect(() => policyDecodeBackend(stub(tiny, 2), { shards: 0 })).toThrow(/shards must be an integer ≥ 1/);
    expect(() => policyDecodeBackend(stub(tiny, 2), { shards: 2, cache: 'host' })).toThrow(/needs the worker KV cache/);
  });
});
