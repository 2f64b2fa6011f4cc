/**
 * The CPU decode path's own cache extension (engine/rollout/worker-kv.ts): the decode graph gives
 * back only the new tokens' keys/values and the worker appends them to each row of the past, into
 * buffers reused from dropped caches.
 */
import { describe, expect, it } from 'vitest';
import { appendKv, KvBufferPool } from '../../../engine/rollout/worker-kv';

const seq = (n: number, from: number) => Float32Array.from({ length: n }, (_, i) => from + i);

describe('appendKv', () => {
  it('puts each row’s new positions after its past ([R, P, hd] + [R, T, hd] → [R, P + T, hd])', () => {
    for (const [R, P, T, hd] of [
      [3, 4, 1, 2],
      [2, 5, 3, 4],
      [1, 1, 2, 1],
    ] as const) {
      const past = seq(R * P * hd, 0);
      const fresh = seq(R * T * hd, 1000);
      const want: number[] = [];
      for (let r = 0; r < R; r++) want.push(...past.subarray(r * P * hd, (r + 1) * P * hd), ...fresh.subarray(r * T * hd, (r + 1) * T * hd));
      expect(Array.from(appendKv(past, fresh, R, P, T, hd))).toEqual(want);
    }
  });
  it('without a past the new keys are the cache', () => {
    const fresh = seq(8, 1);
    expect(appendKv(undefined, fresh, 2, 0, 2, 2)).toBe(fresh);
  });
});

describe('KvBufferPool', () => {
  it('reuses a dropped buffer for a request it holds (up to twice the size) and makes a new one otherwise', () => {
    const pool = new KvBufferPool();
    const a = pool.take(4096);
    expect(a.length).toBe(4096);
    expect(a.buffer.byteLength).toBeGreaterThan(4096 * 4); // headroom for the next steps' growth
    pool.give([a]);
    const b = pool.take(4100); // one more position: fits the headroom
    expect(b.buffer).toBe(a.buffer);
    expect(b.length).toBe(4100);
    pool.give([b]);
    const c = pool.take(1024); // far smaller: a buffer of its own
    expect(c.buffer).not.toBe(a.buffer);
    const d = pool.take(4096);
    expect(d.buffer).toBe(a.buffer);
  });
  it('takes back only buffers it made, and each once', () => {
    const pool = new KvBufferPool();
    const foreign = new Float32Array(8192); // e.g. an ORT output, whose buffer may hold other outputs too
    pool.give([foreign]);
    expect(pool.take(8192).buffer).not.toBe(foreign.buffer);
    const a = pool.take(8192);
    pool.give([a, a]);
    expect(pool.take(8192).buffer).toBe(a.buffer);
    expect(pool.take(8192).buffer).not.toBe(a.buffer);
  });
});
