/**
 * How many decode steps one backend call runs (the scheduler's multi-step decode, ./scheduler.ts):
 * the default cap, the turn-length record each backend keeps, and the choice of K from it.
 */
import type { DecodeBackend } from './ports';

/**
 * Default most decode steps per backend call. With the KV cache in the decode session's worker a
 * call is one message there and back; K steps per message pay those hops once per K tokens, but
 * the steps a row runs after its turn ended (a stop token or stop string) are wasted. A call's K
 * (see chooseDecodeSteps) is at most this, at most the tokens any of its sequences may still generate
 * in its turn (max_new_tokens, max_total_length; for a branching sample, the end of its entropy
 * window), and, within that, the K that maximises the expected accepted tokens per unit of cost
 * (K steps + HOP_STEPS) given how long the backend's turns have been (TurnLengths). Measured in
 * docs/BENCHMARKS.md (bench:rollout, third pass).
 */
export const DECODE_STEPS = 8;
/** The cost of a call's two message hops, in decode steps (chooseDecodeSteps' cost model: K + HOP_STEPS per call). */
export const HOP_STEPS = 1;

/**
 * How model turns ended, by length, over this backend's recent rollouts: the hazard h(m) that a
 * turn which generated m tokens ended there by a stop token or stop string (turns cut by a limit
 * count as reaching m only). Halved at each rollout's start, so recent rollouts (the current
 * policy) dominate. Only the choice of K depends on it, never a token.
 */
export class TurnLengths {
  private ended: number[] = [];
  private reached: number[] = [];
  /** A turn of `length` tokens ended (by a stop when `stopped`). */
  record(length: number, stopped: boolean): void {
    for (let m = 1; m <= length; m++) this.reached[m] = (this.reached[m] ?? 0) + 1;
    if (stopped && length > 0) this.ended[length] = (this.ended[length] ?? 0) + 1;
  }
  decay(f = 0.5): void {
    this.ended = this.ended.map((x) => x * f);
    this.reached = this.reached.map((x) => x * f);
  }
  hazard(m: number): number {
    const r = this.reached[m] ?? 0;
    return r > 0 ? (this.ended[m] ?? 0) / r : 0;
  }
}
const turnLengths = new WeakMap<DecodeBackend, TurnLengths>();

/** How this backend's turns ended in its earlier rollouts (the trainer reuses one backend across steps), decayed once per rollout. */
export function turnLengthsFor(backend: DecodeBackend): TurnLengths {
  const lengths = turnLengths.get(backend) ?? new TurnLengths();
  if (turnLengths.has(backend)) lengths.decay();
  else turnLengths.set(backend, lengths);
  return lengths;
}

/**
 * Steps for one call: rows[i] = tokens already in row i's turn; every row may generate at least
 * `maxK` more. The k-th token of this call is kept if the turn did not end at any earlier one
 * (probability Π (1 − h(m)) over those positions); returns the K ≤ maxK maximising the expected
 * kept tokens per (K + HOP_STEPS), the largest on ties.
 */
export function chooseDecodeSteps(rows: number[], maxK: number, stats: TurnLengths): number {
  if (maxK <= 1) return 1;
  const alive = rows.map(() => 1);
  let kept = 0;
  let best = 1;
  let bestRate = -1;
  for (let k = 1; k <= maxK; k++) {
    rows.forEach((n, i) => {
      if (k > 1) alive[i]! *= 1 - stats.hazard(n + k - 1);
      kept += alive[i]!;
    });
    const rate = kept / (k + HOP_STEPS);
    if (rate >= bestRate * (1 + 1e-9)) {
      best = k;
      bestRate = rate;
    }
  }
  return best;
}
