import { describe, expect, it } from 'vitest';
import { Rng, mixSeed } from '../../../engine/base/rng';
import { sampleToken } from '../../../engine/rollout/sampling';

const logits = Float32Array.from([2.0, 1.0, 0.5, -1.0, 3.0, 0.0]);

function softmax(x: Float32Array, T: number): number[] {
  const m = Math.max(...x);
  const e = Array.from(x, (v) => Math.exp((v - m) / T));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

describe('sampling', () => {
  it('greedy at temperature 0 picks the argmax (ties to the lowest id) with its T=1 logprob', () => {
    const r = sampleToken(logits, { temperature: 0 }, new Rng(1));
    expect(r.id).toBe(4);
    expect(r.logprob).toBeCloseTo(Math.log(softmax(logits, 1)[4]!), 5);
    expect(sampleToken(Float32Array.from([1, 5, 5]), { temperature: 0 }, new Rng(1)).id).toBe(1);
  });

  it('logprob and entropy are those of softmax(logits / T)', () => {
    const p = softmax(logits, 0.7);
    const H = -p.reduce((a, q) => a + q * Math.log(q), 0);
    const r = sampleToken(logits, { temperature: 0.7 }, new Rng(3));
    expect(r.logprob).toBeCloseTo(Math.log(p[r.id]!), 5);
    expect(r.entropy).toBeCloseTo(H, 5);
  });

  it('empirical frequencies match the distribution; top-k and top-p restrict the support', () => {
    const rng = new Rng(42);
    const N = 20000;
    const counts = new Array(6).fill(0);
    for (let i = 0; i < N; i++) counts[sampleToken(logits, { temperature: 1 }, rng).id]++;
    const p = softmax(logits, 1);
    counts.forEach((c, i) => expect(Math.abs(c / N - p[i]!)).toBeLessThan(0.015));
    const k2 = new Set<number>();
    for (let i = 0; i < 2000; i++) k2.add(sampleToken(logits, { temperature: 1, topK: 2 }, rng).id);
    expect([...k2].sort()).toEqual([0, 4]);
    // p(4) ≈ 0.61, p(0) ≈ 0.22: top-p 0.7 keeps {4, 0}; top-p 0.5 keeps {4}.
    const p7 = new Set<number>();
    for (let i = 0; i < 2000; i++) p7.add(sampleToken(logits, { temperature: 1, topP: 0.7 }, rng).id);
    expect([...p7].sort()).toEqual([0, 4]);
    for (let i = 0; i < 200; i++) expect(sampleToken(logits, { temperature: 1, topP: 0.5 }, rng).id).toBe(4);
  });

  it('PRNG streams are reproducible and distinct per seed', () => {
    const a = new Rng(mixSeed(1, 0, 0));
    const b = new Rng(mixSeed(1, 0, 0));
    const c = new Rng(mixSeed(1, 0, 1));
    const xs = Array.from({ length: 5 }, () => a.next());
    expect(Array.from({ length: 5 }, () => b.next())).toEqual(xs);
    expect(Array.from({ length: 5 }, () => c.next())).not.toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
  });

  it('names the bad parameter', () => {
    expect(() => sampleToken(logits, { temperature: -1 }, new Rng(1))).toThrow(/temperature/);
    expect(() => sampleToken(logits, { temperature: 1, topP: 0 }, new Rng(1))).toThrow(/topP/);
  });
});
