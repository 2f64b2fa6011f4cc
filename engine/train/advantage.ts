/**
 * The loop's AdvantagePort over engine/rl's estimator registry: episodes → per-token advantages
 * (zero on tool/env tokens), with the KL-in-reward term and process rewards from the config.
 */
import { computeAdvantages, getEstimator, stepsFromMask, type EstimatorEpisode } from '../rl';
import { klValue } from '../rl/kl';
import { distillAdvantages, distillMetrics } from './distill';
import type { Episode } from './episode';
import type { AdvantagePort } from './loop';

const asEstimatorEpisode = (e: Episode): EstimatorEpisode => ({
  reward: e.reward,
  group: e.group,
  mask: e.lossMask,
  stepRewards: e.stepRewards,
  // GiGPO's steps: the rollout's turns, or (episodes that did not record them) runs of model tokens.
  steps: e.steps ?? stepsFromMask(e.tokens, e.lossMask),
});

/**
 * ARPO's hard advantage attribution: a model token that several trajectories of a group share
 * (a branch's copy of its parent's prefix, recursively) gets the mean advantage of all the
 * trajectories that contain it, in each of them; tokens of one trajectory keep their own.
 * (Soft attribution, the default, leaves each copy with its own trajectory's advantage.)
 */
export function hardAttribution(episodes: Episode[], advantages: Float32Array[]): Float32Array[] {
  const bySample = new Map<string, Episode>(episodes.map((e) => [`${e.group}:${e.sample}`, e] as const));
  // The trajectory that generated position x of e: follow branch points while x is in the shared prefix.
  const owner = (e: Episode, x: number): Episode => {
    let o = e;
    while (o.branch && x < o.branch.tokens) {
      const p = bySample.get(`${o.group}:${o.branch.parent}`);
      if (!p) break;
      o = p;
    }
    return o;
  };
  const sums = new Map<string, { s: number; n: number }>();
  const keys = episodes.map((e, k) => {
    const ks: (string | null)[] = [];
    for (let x = 0; x < e.lossMask.length; x++) {
      if (!e.lossMask[x] || !e.branch || x >= e.branch.tokens) {
        // Positions no one else shares are keyed by their own trajectory; only shared ones need a mean.
        ks.push(null);
        if (e.lossMask[x]) {
          const key = `${e.group}:${e.sample}:${x}`;
          const a = sums.get(key) ?? { s: 0, n: 0 };
          a.s += advantages[k]![x]!;
          a.n++;
          sums.set(key, a);
        }
        continue;
      }
      const o = owner(e, x);
      const key = `${o.group}:${o.sample}:${x}`;
      ks.push(key);
      const a = sums.get(key) ?? { s: 0, n: 0 };
      a.s += advantages[k]![x]!;
      a.n++;
      sums.set(key, a);
    }
    return ks;
  });
  return episodes.map((e, k) => {
    const out = advantages[k]!.slice();
    const ks = keys[k]!;
    for (let x = 0; x < out.length; x++) {
      if (!e.lossMask[x]) continue;
      const key = ks[x] ?? `${e.group}:${e.sample}:${x}`;
      const a = sums.get(key)!;
      out[x] = a.s / a.n;
    }
    return out;
  });
}

/** Each episode's group reward statistics: mean, unbiased std (torch.std, as GRPO normalises) and size. */
export function groupStats(episodes: Episode[]): Map<Episode, { mean: number; std: number; n: number }> {
  const by = new Map<number, number[]>();
  for (const e of episodes) by.set(e.group, [...(by.get(e.group) ?? []), e.reward]);
  const stats = new Map<number, { mean: number; std: number; n: number }>();
  for (const [g, rs] of by) {
    const mean = rs.reduce((x, y) => x + y, 0) / rs.length;
    const std = rs.length > 1 ? Math.sqrt(rs.reduce((x, y) => x + (y - mean) ** 2, 0) / (rs.length - 1)) : 0;
    stats.set(g, { mean, std, n: rs.length });
  }
  return new Map(episodes.map((e) => [e, stats.get(e.group)!] as const));
}

/**
 * What the advantage port reads of the experiment config; `algorithm` also carries the
 * estimator's own options under its name (algorithm.<adv_estimator>, e.g. algorithm.gigpo).
 */
export interface AdvantageSettings {
  algorithm: {
    adv_estimator: string;
    norm_adv_by_std: boolean;
    gamma: number;
    lam: number;
    kl_in: string;
    kl_coef: number;
    kl_type: string;
    process_rewards: boolean;
    distill?: { coef: number; mix_with_reward: boolean } | null;
  };
  rollout: { branching: { attribution: 'soft' | 'hard' } };
}

/**
 * @param critic for estimators that need one (GAE): the critic's per-token values.
 */
export function advantagePort(cfg: AdvantageSettings, critic?: { values(episodes: Episode[]): Promise<Float32Array[]> }): AdvantagePort {
  const a = cfg.algorithm;
  const est = getEstimator(a.adv_estimator);
  /** The estimator's own section (algorithm.<name>, e.g. algorithm.gigpo), when it has options. */
  const options = est.options ? (a as Record<string, unknown>)[a.adv_estimator] : undefined;
  if (est.needsCritic && !critic)
    throw new Error(`algorithm.adv_estimator: "${a.adv_estimator}" needs a critic (value model), which this task session does not provide`);
  const klInReward = a.kl_in === 'reward' && a.kl_coef > 0;
  return {
    values: est.needsCritic ? (eps) => critic!.values(eps) : undefined,
    compute({ episodes, refLogprobs, oldLogprobs, values, teacherLogprobs }) {
      const klPerToken =
        klInReward && refLogprobs
          ? episodes.map((e) => {
              const old = oldLogprobs.get(e)!;
              const ref = refLogprobs.get(e)!;
              const kl = new Float32Array(e.lossMask.length);
              for (let i = 0; i < kl.length; i++) if (e.lossMask[i]) kl[i] = klValue(a.kl_type, old[i]!, ref[i]!);
              return kl;
            })
          : undefined;
      const estOpts = {
        normByStd: a.norm_adv_by_std,
        gamma: a.gamma,
        lam: a.lam,
        klRewardCoef: klInReward ? a.kl_coef : 0,
        klPerToken,
        values: values ? episodes.map((e) => values.get(e)!) : undefined,
        processRewards: a.process_rewards,
      };
      const res = computeAdvantages(a.adv_estimator, episodes.map(asEstimatorEpisode), estOpts, options);
      const adv = cfg.rollout.branching.attribution === 'hard' ? hardAttribution(episodes, res.advantages) : res.advantages;
      // The outcome's part: the estimator without process rewards (and without its own step term, e.g. GiGPO's); the process part is the rest.
      const outcomeOptions = est.outcomeOnly ? est.outcomeOnly(options) : options;
      const outcomeOnly =
        a.process_rewards || JSON.stringify(outcomeOptions) !== JSON.stringify(options)
          ? computeAdvantages(a.adv_estimator, episodes.map(asEstimatorEpisode), { ...estOpts, processRewards: false }, outcomeOptions).advantages
          : adv;
      const outcome = cfg.rollout.branching.attribution === 'hard' && outcomeOnly !== adv ? hardAttribution(episodes, outcomeOnly) : outcomeOnly;
      if (a.distill) {
        // On-policy distillation (./distill.ts): the teacher's per-token reverse-KL advantage, alone or added to the reward's.
        if (!teacherLogprobs) throw new Error('algorithm.distill: no teacher scored this batch');
        const d = distillAdvantages(episodes, oldLogprobs, teacherLogprobs, a.distill.coef);
        return {
          advantages: new Map(episodes.map((e, i) => [e, a.distill!.mix_with_reward ? adv[i]!.map((x, k) => x + d.get(e)![k]!) : d.get(e)!] as const)),
          returns: res.returns ? new Map(episodes.map((e, i) => [e, res.returns![i]!] as const)) : undefined,
          metrics: { ...(a.distill.mix_with_reward ? res.metrics : {}), ...distillMetrics(episodes, oldLogprobs, teacherLogprobs) },
        };
      }
      return {
        parts: {
          outcome: new Map(episodes.map((e, i) => [e, outcome[i]!] as const)),
          process: new Map(episodes.map((e, i) => [e, adv[i]!.map((x, k) => x - outcome[i]![k]!)] as const)),
          group: groupStats(episodes),
        },
        advantages: new Map(episodes.map((e, i) => [e, adv[i]!] as const)),
        returns: res.returns ? new Map(episodes.map((e, i) => [e, res.returns![i]!] as const)) : undefined,
        metrics: res.metrics,
      };
    },
  };
}
