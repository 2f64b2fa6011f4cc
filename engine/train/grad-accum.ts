/**
 * The pieces of one optimizer step shared by the policy trainer (./model-port.ts) and the critic
 * (./critic-port.ts): per-episode rows → the train graph's shifted [B, T] feeds, gradient
 * accumulation over micro-batches, global-norm clipping, and the optimizer step.
 */
import type { Weights } from '../model/checkpoint';
import { packSequences, type PackedBatch } from '../model/graphs';
import type { OptimizerPort } from '../rl/optimizer';

/** A micro-batch packed for a train step, with its loss mask shifted like every per-token feed. */
export function packMicroBatch(
  rows: { tokens: ArrayLike<number>; lossMask: ArrayLike<number> }[],
  padTokenId: number,
): { batch: PackedBatch; mask: Float32Array } {
  const batch = packSequences(
    rows.map((r) => Array.from(r.tokens)),
    padTokenId,
  );
  return {
    batch,
    mask: shifted(
      batch,
      rows.map((r) => r.lossMask),
    ),
  };
}

/** Per-episode arrays (indexed by token) → [B, T] feed aligned to "position t predicts token t+1". */
export function shifted(batch: PackedBatch, rows: ArrayLike<number>[]): Float32Array {
  const T = batch.length;
  const out = new Float32Array(batch.batch * T);
  rows.forEach((r, b) => {
    for (let t = 0; t < T && t + 1 < r.length; t++) out[b * T + t] = r[t + 1]!;
  });
  return out;
}

export function globalNorm(g: Weights): number {
  let s = 0;
  for (const v of g.values()) for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!;
  return Math.sqrt(s);
}

/** acc += w · grads (tensors created on first use). */
export function accumulate(acc: Weights, grads: Weights, w: number): void {
  for (const [k, g] of grads) {
    let a = acc.get(k);
    if (!a) {
      a = new Float32Array(g.length);
      acc.set(k, a);
    }
    for (let i = 0; i < g.length; i++) a[i]! += w * g[i]!;
  }
}

/**
 * Clip the accumulated gradient to global norm `clip` (0 disables), step the optimizer on the
 * model's weights and tell the model they changed; returns the norm before clipping.
 */
export function clipAndStep(model: { weights: Weights; markWeightsUpdated(): void }, optimizer: OptimizerPort, acc: Weights, clip: number, lr: number): number {
  const norm = globalNorm(acc);
  if (clip > 0 && norm > clip) {
    const s = clip / norm;
    for (const g of acc.values()) for (let i = 0; i < g.length; i++) g[i]! *= s;
  }
  optimizer.step(model.weights, acc, lr);
  model.markWeightsUpdated();
  return norm;
}

/** Number of model tokens (loss-mask ones) in some episodes. */
export function maskedTokens(rows: { lossMask: ArrayLike<number> }[]): number {
  let n = 0;
  for (const r of rows) for (let i = 0; i < r.lossMask.length; i++) n += r.lossMask[i]!;
  return n;
}
