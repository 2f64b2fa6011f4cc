/**
 * Choosing the next token from a logits row: temperature, top-k, top-p (nucleus), greedy at
 * temperature 0.
 *
 * The recorded log-probability and entropy are those of the policy's sampling distribution
 * softmax(logits / T) before top-k/top-p truncation (T = 1 when greedy), which is what the
 * trainer recomputes as the "old" policy (logits divided by the same temperature).
 */
import type { Rng } from '../base/rng';

export interface SamplingParams {
  /** 0 = greedy (argmax, ties to the lowest id). Default 1. */
  temperature?: number;
  /** Keep the k most likely tokens (0 or undefined = all). */
  topK?: number;
  /** Keep the smallest set of tokens whose probability reaches p (1 or undefined = all). */
  topP?: number;
}

export interface SampledToken {
  id: number;
  logprob: number;
  entropy: number;
}

/** log-softmax statistics of logits/T without allocating: max, log-sum-exp, entropy. */
function softmaxStats(logits: Float32Array, invT: number): { max: number; lse: number; entropy: number } {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! * invT > max) max = logits[i]! * invT;
  let sum = 0;
  let wsum = 0;
  for (let i = 0; i < logits.length; i++) {
    const z = logits[i]! * invT - max;
    const e = Math.exp(z);
    sum += e;
    wsum += e * z;
  }
  const logZ = Math.log(sum);
  // H = -Σ p log p = logZ - Σ p z  (z = shifted logit)
  return { max, lse: max + logZ, entropy: logZ - wsum / sum };
}

export function sampleToken(logits: Float32Array, params: SamplingParams, rng: Rng): SampledToken {
  const V = logits.length;
  if (V === 0) throw new Error('sampleToken: empty logits row');
  const T = params.temperature ?? 1;
  if (!(T >= 0) || !Number.isFinite(T)) throw new Error(`sampling.temperature must be a finite number ≥ 0 (got ${T})`);
  const greedy = T === 0;
  const invT = greedy ? 1 : 1 / T;
  const st = softmaxStats(logits, invT);
  if (!Number.isFinite(st.lse)) throw new Error('sampleToken: logits contain NaN or are all -Infinity');
  let id: number;
  if (greedy) {
    id = 0;
    for (let i = 1; i < V; i++) if (logits[i]! > logits[id]!) id = i;
  } else {
    const k = params.topK && params.topK > 0 ? Math.min(params.topK, V) : V;
    const p = params.topP ?? 1;
    if (!(p > 0 && p <= 1)) throw new Error(`sampling.topP must be in (0, 1] (got ${p})`);
    if (k === V && p >= 1) {
      // Inverse-CDF over the full distribution.
      const u = rng.next();
      let sum = 0;
      for (let i = 0; i < V; i++) sum += Math.exp(logits[i]! * invT - st.max);
      let target = u * sum;
      id = V - 1;
      for (let i = 0; i < V; i++) {
        target -= Math.exp(logits[i]! * invT - st.max);
        if (target < 0) {
          id = i;
          break;
        }
      }
    } else {
      // Candidates in descending logit order (stable: ties by id), truncated by k then p.
      const idx = Array.from({ length: V }, (_, i) => i);
      idx.sort((a, b) => logits[b]! - logits[a]! || a - b);
      const cand = idx.slice(0, k);
      const probs = cand.map((i) => Math.exp(logits[i]! * invT - st.lse));
      const kept: number[] = [];
      let mass = 0;
      for (let j = 0; j < cand.length; j++) {
        kept.push(j);
        mass += probs[j]!;
        if (mass >= p) break;
      }
      let target = rng.next() * mass;
      id = cand[kept[kept.length - 1]!]!;
      for (const j of kept) {
        target -= probs[j]!;
        if (target < 0) {
          id = cand[j]!;
          break;
        }
      }
    }
  }
  return { id, logprob: logits[id]! * invT - st.lse, entropy: st.entropy };
}

/** The k most likely ids of softmax(logits · invT), with their log-probabilities (ties to the lower id). */
export function topLogprobs(logits: Float32Array, invT: number, k: number): { id: number; logprob: number }[] {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! * invT > max) max = logits[i]! * invT;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! * invT - max);
  const lse = max + Math.log(sum);
  const best: number[] = [];
  for (let i = 0; i < logits.length; i++) {
    if (best.length < k) {
      best.push(i);
      best.sort((a, b) => logits[b]! - logits[a]! || a - b);
    } else if (logits[i]! > logits[best[k - 1]!]!) {
      best[k - 1] = i;
      best.sort((a, b) => logits[b]! - logits[a]! || a - b);
    }
  }
  return best.map((id) => ({ id, logprob: logits[id]! * invT - lse }));
}
