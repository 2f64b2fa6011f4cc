import { describe, expect, it } from 'vitest';
import { KvSlotBackend, type KvDecodeFn, type KvDecodeInput } from '../../../engine/rollout/kv-slots';
import { RecomputeBackend } from '../../../engine/rollout/recompute';
import { Rng } from '../../../engine/base/rng';

/**
 * A one-layer, two-kv-head causal self-attention LM written directly in JS with the HF decode
 * signature (past K/V in, present K/V out, attention mask, position ids with sinusoidal
 * encodings), so packing, left padding and unpacking can be checked against full recomputation.
 */
function attentionLm(V = 11, H = 2, D = 4, seed = 3): KvDecodeFn {
  const r = new Rng(seed);
  const C = H * D;
  const g = (n: number) => Float32Array.from({ length: n }, () => r.next() * 2 - 1);
  const E = g(V * C),
    Wq = g(C * C),
    Wk = g(C * C),
    Wv = g(C * C),
    U = g(C * V);
  const embed = (t: number, pos: number) => Float32Array.from({ length: C }, (_, i) => E[t * C + i]! + Math.sin((pos + 1) * (i + 1) * 0.37));
  const mv = (W: Float32Array, x: Float32Array) => Float32Array.from({ length: C }, (_, i) => x.reduce((a, xj, j) => a + W[i * C + j]! * xj, 0));
  return async (x: KvDecodeInput) => {
    const { batch: B, newLength: T, pastLength: P } = x;
    const S = P + T;
    const pk = new Float32Array(B * H * S * D);
    const pv = new Float32Array(B * H * S * D);
    const logits = new Float32Array(B * V);
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++)
        for (let s = 0; s < P; s++)
          for (let d = 0; d < D; d++) {
            pk[((b * H + h) * S + s) * D + d] = (x.past[0]!.k as Float32Array)[((b * H + h) * P + s) * D + d]!;
            pv[((b * H + h) * S + s) * D + d] = (x.past[0]!.v as Float32Array)[((b * H + h) * P + s) * D + d]!;
          }
      let last = new Float32Array(C);
      for (let t = 0; t < T; t++) {
        const e = embed(x.inputIds[b * T + t]!, x.positionIds[b * T + t]!);
        const q = mv(Wq, e),
          k = mv(Wk, e),
          v = mv(Wv, e);
        for (let h = 0; h < H; h++)
          for (let d = 0; d < D; d++) {
            pk[((b * H + h) * S + P + t) * D + d] = k[h * D + d]!;
            pv[((b * H + h) * S + P + t) * D + d] = v[h * D + d]!;
          }
        const out = new Float32Array(C);
        for (let h = 0; h < H; h++) {
          const sc: number[] = [];
          for (let s = 0; s <= P + t; s++) {
            if (!x.attentionMask[b * S + s]) {
              sc.push(-Infinity);
              continue;
            }
            let a = 0;
            for (let d = 0; d < D; d++) a += q[h * D + d]! * pk[((b * H + h) * S + s) * D + d]!;
            sc.push(a / Math.sqrt(D));
          }
          const m = Math.max(...sc);
          const w = sc.map((z) => (z === -Infinity ? 0 : Math.exp(z - m)));
          const Z = w.reduce((a, c) => a + c, 0);
          for (let s = 0; s <= P + t; s++) for (let d = 0; d < D; d++) out[h * D + d] += (w[s]! / Z) * pv[((b * H + h) * S + s) * D + d]!;
        }
        last = Float32Array.from(out, (o, i) => o + e[i]!);
      }
      for (let v = 0; v < V; v++) logits[b * V + v] = last.reduce((a, c, i) => a + c * U[i * V + v]!, 0);
    }
    return { logits, present: [{ k: pk, v: pv }] };
  };
}

describe('KvSlotBackend', () => {
  it('reproduces full-recompute logits while slots join, leave and extend by chunks of different lengths', async () => {
    const fn = attentionLm();
    const kv = new KvSlotBackend(fn, { layers: 1, kvHeads: 2, headDim: 4, vocabSize: 11 }, 3, 64);
    const full = new RecomputeBackend(
      async (seqs) => {
        const out: Float32Array[] = [];
        for (const s of seqs) {
          const T = s.length;
          const r = await fn({
            batch: 1,
            newLength: T,
            pastLength: 0,
            inputIds: Int32Array.from(s),
            attentionMask: new Int32Array(T).fill(1),
            positionIds: Int32Array.from(s, (_, i) => i),
            past: [{ k: new Float32Array(0), v: new Float32Array(0) }],
          });
          out.push(r.logits);
        }
        return out;
      },
      11,
      3,
      64,
    );
    const script: { slot: number; tokens: number[] }[][] = [
      [
        { slot: 0, tokens: [1, 2, 3, 4, 5] },
        { slot: 2, tokens: [7] },
      ],
      [
        { slot: 0, tokens: [6] },
        { slot: 2, tokens: [8, 9, 10] },
        { slot: 1, tokens: [3, 3] },
      ],
      [{ slot: 1, tokens: [4] }],
      'release 0' as never,
      [
        { slot: 0, tokens: [9, 8] },
        { slot: 1, tokens: [5, 6, 7, 1] },
        { slot: 2, tokens: [2] },
      ],
      [
        { slot: 0, tokens: [1] },
        { slot: 1, tokens: [2] },
        { slot: 2, tokens: [3] },
      ],
      // Steady state (same slots, one token each) reuses the packed batch cache...
      [
        { slot: 0, tokens: [4] },
        { slot: 1, tokens: [5] },
        { slot: 2, tokens: [6] },
      ],
      [
        { slot: 0, tokens: [7] },
        { slot: 1, tokens: [8] },
        { slot: 2, tokens: [9] },
      ],
      // ...then a slot leaves and comes back with a fresh sequence while the others go on.
      'release 0' as never,
      [
        { slot: 1, tokens: [1] },
        { slot: 2, tokens: [2] },
      ],
      [
        { slot: 0, tokens: [3, 4, 5] },
        { slot: 1, tokens: [6] },
        { slot: 2, tokens: [7, 8] },
      ],
      [
        { slot: 0, tokens: [9] },
        { slot: 1, tokens: [10] },
        { slot: 2, tokens: [1] },
      ],
      [
        { slot: 2, tokens: [2] },
        { slot: 0, tokens: [3] },
      ],
      [
        { slot: 2, tokens: [4] },
        { slot: 0, tokens: [5] },
      ],
    ];
    let steps = 0;
    for (const step of script) {
      if ((step as unknown) === 'release 0') {
        kv.release(0);
        full.release(0);
        continue;
      }
      const a = await kv.extend(step);
      const b = await full.extend(step);
      a.forEach((row, i) => row.forEach((x, j) => expect(x).toBeCloseTo(b[i]![j]!, 4)));
      steps++;
    }
    expect(steps).toBe(script.length - 2);
  });

  it("truncate keeps a slot's first tokens (packed or not), leaves a fork's source intact, and refuses lengths beyond the cache", async () => {
    const shape = { layers: 1, kvHeads: 2, headDim: 4, vocabSize: 11 };
    const kv = new KvSlotBackend(attentionLm(), shape, 3, 64);
    const ref = new KvSlotBackend(attentionLm(), shape, 3, 64);
    await kv.extend([
      { slot: 0, tokens: [1, 2, 3, 4, 5] },
      { slot: 1, tokens: [6, 7] },
    ]);
    await kv.extend([
      { slot: 0, tokens: [8] },
      { slot: 1, tokens: [9] },
    ]); // steady state: the batch cache stays packed
    kv.fork(0, 2);
    kv.truncate(0, 4); // cut inside the packed batch
    kv.truncate(1, 3); // nothing to cut
    expect(() => kv.truncate(1, 4)).toThrow(/length 4 out of range \(slot 1 holds 3 tokens\)/);
    const got = await kv.extend([
      { slot: 0, tokens: [10] },
      { slot: 1, tokens: [2] },
      { slot: 2, tokens: [3] },
    ]);
    const want = await ref.extend([
      { slot: 0, tokens: [1, 2, 3, 4, 10] },
      { slot: 1, tokens: [6, 7, 9, 2] },
      { slot: 2, tokens: [1, 2, 3, 4, 5, 8, 3] },
    ]);
    got.forEach((row, i) => row.forEach((x, j) => expect(x).toBeCloseTo(want[i]![j]!, 4)));
  });
});
