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
 *   gigpo                    GiGPO: episode advantage (outcome normalised in the group, one value per
 *                            trajectory) + ω × step advantage (discounted step return normalised within
 *                            its step group: steps of one group that saw the same observation)
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
  /** The model turns (GiGPO's steps) and what the model saw before each (its anchor state). */
  steps?: EpisodeStep[];
}

/** One model turn: tokens [start, end) and the raw observation before it (the prompt for the first turn, else the tool/env output since the previous turn; no history). */
export interface EpisodeStep {
  start: number;
  end: number;
  observation: string;
}

/** How a group's outcome advantage is formed: divide by the group's std (GRPO), or leave one out (RLOO). */
export interface GroupBaseline {
  /** R − mean of the other G − 1 = G/(G−1)·(R − mean) (RLOO); the std is then not used. */
  leaveOneOut?: boolean;
  /** (R − mean) / (std + eps) (GRPO); false: R − mean (Dr.GRPO). */
  normByStd?: boolean;
}

/**
 * One scalar per episode from its group's rewards. GRPO: (R − mean) / (std + eps) with the
 * unbiased std (torch.std, as verl); Dr.GRPO (normByStd false): R − mean; RLOO (leaveOneOut):
 * R − mean of the other G − 1 = G/(G−1)·(R − mean). A group of one, or of equal rewards, gives 0.
 */
export function groupOutcomeAdvantages(episodes: EstimatorEpisode[], baseline: GroupBaseline, eps = 1e-6): number[] {
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
    if (baseline.leaveOneOut) idx.forEach((i, k) => (out[i] = (G / (G - 1)) * (rs[k]! - mean)));
    else idx.forEach((i, k) => (out[i] = (rs[k]! - mean) / (baseline.normByStd ? std + eps : 1)));
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
  return whiten(
    returns,
    episodes.map((e) => e.mask),
  );
}

/** REINFORCE++-baseline: outcome minus its group mean, broadcast to model tokens, whitened over the batch. */
export function reinforcePlusPlusBaseline(episodes: EstimatorEpisode[]): Float32Array[] {
  const byGroup = new Map<number, number[]>();
  for (const e of episodes) byGroup.set(e.group, [...(byGroup.get(e.group) ?? []), e.reward]);
  const mean = new Map([...byGroup].map(([g, rs]) => [g, rs.reduce((a, b) => a + b, 0) / rs.length]));
  const raw = episodes.map((e) => broadcast(e.mask, e.reward - mean.get(e.group)!));
  return whiten(
    raw,
    episodes.map((e) => e.mask),
  );
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
  return {
    advantages:
      opts.whitenAdvantages === false
        ? advs
        : whiten(
            advs,
            episodes.map((e) => e.mask),
          ),
    returns: rets,
  };
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

/**
 * Steps from the loss mask when a rollout did not record its turns: each maximal run of model
 * tokens is a step, its observation the ids of the non-model tokens since the previous run.
 */
export function stepsFromMask(tokens: ArrayLike<number>, mask: ArrayLike<number>): EpisodeStep[] {
  const steps: EpisodeStep[] = [];
  let obsStart = 0;
  for (let i = 0; i < mask.length;) {
    if (!mask[i]) {
      i++;
      continue;
    }
    let j = i;
    while (j < mask.length && mask[j]) j++;
    steps.push({ start: i, end: j, observation: Array.from({ length: i - obsStart }, (_, k) => tokens[obsStart + k]).join(',') });
    obsStart = j;
    i = j;
  }
  return steps;
}

export interface GigpoOptions {
  /** ω: weight of the step advantage. */
  stepWeight: number;
  /** Discount of the step returns. */
  gamma: number;
  /** Divide by the (unbiased) std of the group / step group as well as subtracting the mean (verl-agent mode mean_std_norm); default mean only (mean_norm). */
  normByStd: boolean;
  /** Put steps whose observations are at least this similar (0–1, `similarity`) in one step group; undefined = exact match. */
  similarity?: { threshold: number; ratio: (a: string, b: string) => number };
  eps?: number;
}

/**
 * GiGPO (Feng et al. 2025; verl-agent compute_gigpo_outcome_advantage), per token of step k of
 * trajectory i: A = A_episode(i) + ω·A_step(i, k).
 *  - A_episode: the outcome reward minus its group's mean (÷ std with normByStd), the statistics
 *    over the group's trajectories (each counted once, whatever its number of steps); a group of
 *    one, or of equal rewards under normByStd, gives 0.
 *  - Step returns: r_k = the step rewards on the turn's tokens (+ the outcome on the last turn),
 *    R_k = r_k + γ·R_{k+1}.
 *  - Step groups: within one group, steps whose observations are identical (or similar enough);
 *    A_step = R_k − mean of its step group's returns (÷ std with normByStd); a step group of one
 *    gives 0.
 * `stepGroupSizes` lists the size of every step group (logged as metrics).
 */
export function gigpo(episodes: EstimatorEpisode[], o: GigpoOptions): { advantages: Float32Array[]; stepGroupSizes: number[] } {
  const eps = o.eps ?? 1e-6;
  const normalise = (xs: number[]): number[] => {
    const n = xs.length;
    if (n < 2) return xs.map(() => 0);
    const mean = xs.reduce((a, b) => a + b, 0) / n;
    if (!o.normByStd) return xs.map((x) => x - mean);
    const std = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1));
    return xs.map((x) => (std === 0 ? 0 : (x - mean) / (std + eps)));
  };
  const steps = episodes.map((e, i) => {
    if (!e.steps) throw new Error(`algorithm.adv_estimator: gigpo needs the steps (model turns and observations) of every episode; episode ${i} has none`);
    return e.steps;
  });
  // Episode advantages: one value per trajectory.
  const byGroup = new Map<number, number[]>();
  episodes.forEach((e, i) => byGroup.set(e.group, [...(byGroup.get(e.group) ?? []), i]));
  const episodeAdv = new Array<number>(episodes.length).fill(0);
  for (const idx of byGroup.values()) normalise(idx.map((i) => episodes[i]!.reward)).forEach((a, k) => (episodeAdv[idx[k]!] = a));
  // Discounted step returns.
  const returns = episodes.map((e, i) => {
    const st = steps[i]!;
    const r = st.map((s) => (e.stepRewards ?? []).filter((x) => x.at >= s.start && x.at < s.end).reduce((a, x) => a + x.value, 0));
    if (r.length) r[r.length - 1]! += e.reward;
    const ret = new Array<number>(r.length);
    let g = 0;
    for (let k = r.length - 1; k >= 0; k--) ret[k] = g = r[k]! + o.gamma * g;
    return ret;
  });
  // Step groups within each group, by observation.
  const stepAdv = episodes.map((_, i) => new Array<number>(steps[i]!.length).fill(0));
  const stepGroupSizes: number[] = [];
  for (const idx of byGroup.values()) {
    const clusters: { rep: string; members: [number, number][] }[] = [];
    const exact = new Map<string, [number, number][]>();
    for (const i of idx)
      steps[i]!.forEach((s, k) => {
        if (!o.similarity) {
          const m = exact.get(s.observation);
          if (m) m.push([i, k]);
          else {
            const members: [number, number][] = [[i, k]];
            exact.set(s.observation, members);
            clusters.push({ rep: s.observation, members });
          }
          return;
        }
        const c = clusters.find((c) => o.similarity!.ratio(s.observation, c.rep) >= o.similarity!.threshold);
        if (c) c.members.push([i, k]);
        else clusters.push({ rep: s.observation, members: [[i, k]] });
      });
    for (const c of clusters) {
      stepGroupSizes.push(c.members.length);
      normalise(c.members.map(([i, k]) => returns[i]![k]!)).forEach((a, m) => {
        const [i, k] = c.members[m]!;
        stepAdv[i]![k] = a;
      });
    }
  }
  const advantages = episodes.map((e, i) => {
    const out = new Float32Array(e.mask.length);
    steps[i]!.forEach((s, k) => {
      const a = episodeAdv[i]! + o.stepWeight * stepAdv[i]![k]!;
      for (let t = s.start; t < s.end && t < out.length; t++) if (e.mask[t]) out[t] = a;
    });
    return out;
  });
  return { advantages, stepGroupSizes };
}
