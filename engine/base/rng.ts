/**
 * Arbor's seeded random numbers, all of them: `Rng` (sfc32) and `mixSeed` for sampling, and
 * `mulberry32` + `shuffled` for everything else (world generation, demonstrations, shuffles in
 * the trainer, weight and adapter initialisation). Seeded pseudo-random numbers for sampling. Every sequence owns its own stream derived from
 * (seed, group, sample), so what a sequence samples does not depend on which other sequences
 * share its batch or on the order tools finish in: batched and one-at-a-time rollouts agree.
 */

/** splitmix32-style mixing of several integers into one 32-bit seed. */
export function mixSeed(...parts: number[]): number {
  let h = 0x9e3779b9 >>> 0;
  for (const p of parts) {
    let z = (h ^ Math.imul((p >>> 0) + 0x7f4a7c15, 0x85ebca6b)) >>> 0;
    z = Math.imul(z ^ (z >>> 16), 0x7feb352d) >>> 0;
    z = Math.imul(z ^ (z >>> 15), 0x846ca68b) >>> 0;
    h = (z ^ (z >>> 16)) >>> 0;
  }
  return h;
}

/** A deterministic uniform [0, 1) generator (sfc32, 128-bit state) seeded from one integer. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  constructor(readonly seed: number) {
    this.a = mixSeed(seed, 1);
    this.b = mixSeed(seed, 2);
    this.c = mixSeed(seed, 3);
    this.d = 1;
    for (let i = 0; i < 12; i++) this.nextUint32();
  }
  nextUint32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t >>> 0;
  }
  /** Uniform in [0, 1) with 32 bits of resolution. */
  next(): number {
    return this.nextUint32() / 4294967296;
  }
  /** The generator's state (to draw ahead and rewind: several decode steps per call, engine.ts). */
  state(): RngState {
    return [this.a, this.b, this.c, this.d];
  }
  /** Go back to a state taken with state(): the next draws repeat the ones made after it. */
  restore(s: RngState): void {
    [this.a, this.b, this.c, this.d] = s;
  }
}

export type RngState = readonly [number, number, number, number];

/** mulberry32: a small seeded uniform [0, 1) generator (32-bit state). */
export function mulberry32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A shuffled copy (Fisher–Yates from the last element down). */
export function shuffled<T>(xs: readonly T[], rand: () => number): T[] {
  const a = xs.slice();
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}
