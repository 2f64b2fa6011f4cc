/**
 * Advantage estimators (the formulas of the session's reference algorithms.md, outside this repository), as pure functions over plain arrays
 * so they can be checked by hand: one entry per episode, per-token arrays aligned with the
 * episode's tokens, `mask` = 1 on model-generated tokens (the only tokens that carry advantage).
 *
 *   grpo / drgrpo / rloo     outcome reward, normalised within each group (prompt)
 *   reinforce_pp             token rewards (−β·KL per token, outcome on the last model token),
 *                            discounted return over model tokens, whitened over the batch
 *   reinforce_pp_baseline    group-mean baseline on the outcome, then whitened over the batch
 *   gae                      PPO with a critic: GAE over model tokens only, whitened; returns = A + V
 *   process rewards          step reward k on the last token of the k-th tool call, normalised by
 *                            the largest |reverse cumulative sum|, added as a return-to-go
 */

export interface EstimatorEpisode {
  /** Outcome reward (after shaping). */
  reward: number;
  /** Group (prompt) index: samples of one prompt share it. */
  group: number;
  /** 1 on model tokens. */
  mask: ArrayLike<number>;
  /** Step (process) rewards at token indices. */
  stepRewards?: { at: number; value: number }[];
}

export type GroupEstimator = 'grpo' | 'drgrpo' | 'rloo';

/**
 * One scalar per episode from its group's rewards. GRPO: (R − mean) / (std + eps) with the
 * unbiased std (torch.std, as verl); Dr.GRPO (or GRPO with normByStd false): R − mean; RLOO:
 * R − mean of the other G − 1 = G/(G−1)·(R − mean). A group of one, or of equal rewards, gives 0.
 */
export function groupOutcomeAdvantages(episodes: EstimatorEpisode[], estimator: GroupEstimator, normByStd = true, eps = 1e-6): number[] {
  const byGroup = new Map<number, number[]>();
  episodes.forEach((e, i) => {
    const g = byGroup.get(e.group) ?? [];
    g.push(i);
    byGroup.set(e.group, g);
  });
  const out = new Array<number>(episodes.length).fill(0);
  for (const idx of byGroup.values()) {
    const rs = idx.map((i) => episodes[i]!.reward);
    const G = rs.length;
    if (G < 2) continue;
    const mean = rs.reduce((a, b) => a + b, 0) / G;
    const std = Math.sqrt(rs.reduce((a, b) => a + (b - mean) ** 2, 0) / (G - 1));
    if (std === 0) continue; // equal rewards carry no signal: exactly 0
    if (estimator === 'rloo') idx.forEach((i, k) => (out[i] = (G / (G - 1)) * (rs[k]! - mean)));
    else {
      const divide = estimator === 'grpo' && normByStd;
      idx.forEach((i, k) => (out[i] = (rs[k]! - mean) / (divide ? std + eps : 1)));
    }
  }
  return out;
}

/** A scalar on every model token (0 elsewhere). */
export function broadcast(mask: ArrayLike<number>, a: number): Float32Array {
  const t = new Float32Array(mask.length);
  for (let i = 0; i < t.length; i++) if (mask[i]) t[i] = a;
  return t;
}

/** Index of the last model token, or −1. */
export function lastModelToken(mask: ArrayLike<number>): number {
  for (let i = mask.length - 1; i >= 0; i--) if (mask[i]) return i;
  return -1;
}

/** Whiten values on masked positions over the whole batch: (x − mean) / (std + eps); others stay 0. */
export function whiten(xs: Float32Array[], masks: ArrayLike<number>[], eps = 1e-8): Float32Array[] {
  let s = 0;
  let n = 0;
  xs.forEach((x, b) => {
    for (let i = 0; i < x.length; i++)
      if (masks[b]![i]) {
        s += x[i]!;
        n++;
      }
  });
  if (n === 0) return xs.map((x) => new Float32Array(x.length));
  const mean = s / n;
  let v = 0;
  xs.forEach((x, b) => {
    for (let i = 0; i < x.length; i++) if (masks[b]![i]) v += (x[i]! - mean) ** 2;
  });
  // torch.var is unbiased (verl's masked_whiten uses the unbiased masked variance).
  const std = Math.sqrt(n > 1 ? v / (n - 1) : 0);
  return xs.map((x, b) => {
    const o = new Float32Array(x.length);
    for (let i = 0; i < x.length; i++) if (masks[b]![i]) o[i] = (x[i]! - mean) / (std + eps);
    return o;
  });
}

/**
 * Discounted return over model tokens only: G_t = r_t + γ·G_{t'} where t' is the next model
 * token (tool/observation tokens are skipped, so they neither break nor discount the chain).
 */
export function returnsOverModelTokens(rewards: ArrayLike<number>, mask: ArrayLike<number>, gamma: number): Float32Array {
  const out = new Float32Array(mask.length);
  let g = 0;
  for (let i = mask.length - 1; i >= 0; i--) {
    if (!mask[i]) continue;
    g = rewards[i]! + gamma * g;
    out[i] = g;
  }
  return out;
}

/**
 * REINFORCE++: token reward −β·KL_t on every model token (`klPerToken`, KL in the reward) plus
 * the outcome on the last model token; discounted return; whitened over the batch.
 */
export function reinforcePlusPlus(episodes: EstimatorEpisode[], opts: { gamma: number; klCoef?: number; klPerToken?: ArrayLike<number>[] }): Float32Array[] {
  const returns = episodes.map((e, b) => {
    const r = new Float32Array(e.mask.length);
    const kl = opts.klPerToken?.[b];
    if (kl && opts.klCoef) for (let i = 0; i < r.length; i++) if (e.mask[i]) r[i] = -opts.klCoef * kl[i]!;
    const last = lastModelToken(e.mask);
    if (last >= 0) r[last]! += e.reward;
    return returnsOverModelTokens(r, e.mask, opts.gamma);
  });
  return whiten(returns, episodes.map((e) => e.mask));
}

/** REINFORCE++-baseline: outcome minus its group mean, broadcast to model tokens, whitened over the batch. */
export function reinforcePlusPlusBaseline(episodes: EstimatorEpisode[]): Float32Array[] {
  const byGroup = new Map<number, number[]>();
  for (const e of episodes) byGroup.set(e.group, [...(byGroup.get(e.group) ?? []), e.reward]);
  const mean = new Map([...byGroup].map(([g, rs]) => [g, rs.reduce((a, b) => a + b, 0) / rs.length]));
  const raw = episodes.map((e) => broadcast(e.mask, e.reward - mean.get(e.group)!));
  return whiten(raw, episodes.map((e) => e.mask));
}

/**
 * GAE over model tokens only: δ_t = r_t + γ·V_{t'} − V_t with t' the next model token (V = 0
 * after the last), A_t = δ_t + γλ·A_{t'}; token rewards = outcome on the last model token
 * (minus β·KL_t when KL is in the reward). Advantages are whitened over the batch; returns = A + V
 * (before whitening), the critic's targets.
 */
export function gae(
  episodes: EstimatorEpisode[],
  values: ArrayLike<number>[],
  opts: { gamma: number; lam: number; klCoef?: number; klPerToken?: ArrayLike<number>[]; whitenAdvantages?: boolean },
): { advantages: Float32Array[]; returns: Float32Array[] } {
  const advs: Float32Array[] = [];
  const rets: Float32Array[] = [];
  episodes.forEach((e, b) => {
    const n = e.mask.length;
    const v = values[b]!;
    const kl = opts.klPerToken?.[b];
    const r = new Float32Array(n);
    if (kl && opts.klCoef) for (let i = 0; i < n; i++) if (e.mask[i]) r[i] = -opts.klCoef * kl[i]!;
    const last = lastModelToken(e.mask);
    if (last >= 0) r[last]! += e.reward;
    const a = new Float32Array(n);
    const ret = new Float32Array(n);
    let nextV = 0;
    let nextA = 0;
    for (let i = n - 1; i >= 0; i--) {
      if (!e.mask[i]) continue;
      const delta = r[i]! + opts.gamma * nextV - v[i]!;
      nextA = delta + opts.gamma * opts.lam * nextA;
      a[i] = nextA;
      ret[i] = nextA + v[i]!;
      nextV = v[i]!;
    }
    advs.push(a);
    rets.push(ret);
  });
  return { advantages: opts.whitenAdvantages === false ? advs : whiten(advs, episodes.map((e) => e.mask)), returns: rets };
}

/**
 * Process rewards as Agent-R1 (legacy use_process_rewards): step rewards on their tokens,
 * normalised as r ← r / (max|reverse_cumsum(r)| + 1e-6), then the return-to-go over model tokens
 * (γ = 1) — the amount added to each token's outcome-based advantage.
 */
export function processRewardReturns(e: EstimatorEpisode, eps = 1e-6): Float32Array {
  const n = e.mask.length;
  const r = new Float32Array(n);
  for (const s of e.stepRewards ?? []) if (s.at >= 0 && s.at < n) r[s.at]! += s.value;
  let cum = 0;
  let maxAbs = 0;
  for (let i = n - 1; i >= 0; i--) {
    cum += r[i]!;
    maxAbs = Math.max(maxAbs, Math.abs(cum));
  }
  if (maxAbs === 0) return new Float32Array(n);
  for (let i = 0; i < n; i++) r[i]! /= maxAbs + eps;
  // Return-to-go on model tokens; a step reward sitting on a non-model token counts for the
  // model tokens before it.
  const out = new Float32Array(n);
  let g = 0;
  for (let i = n - 1; i >= 0; i--) {
    g += r[i]!;
    if (e.mask[i]) out[i] = g;
  }
  return out;
}
