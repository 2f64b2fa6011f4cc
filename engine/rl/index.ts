/**
 * The advantage-estimator registry, keyed by the experiment config's `algorithm.adv_estimator`.
 * Each entry says whether it needs a critic and computes per-token advantages (and, for GAE,
 * the critic's return targets) for a batch. Process rewards (Agent-R1) add a normalised
 * return-to-go of the step rewards on top of any estimator.
 */
import {
  broadcast,
  gae,
  gigpo,
  groupOutcomeAdvantages,
  processRewardReturns,
  reinforcePlusPlus,
  reinforcePlusPlusBaseline,
  type EstimatorEpisode,
} from './estimators';

export * from './estimators';

export interface EstimatorOptions {
  /** GRPO: divide by the group std (false = Dr.GRPO behaviour). */
  normByStd: boolean;
  gamma: number;
  lam: number;
  /** β when the KL to the reference is subtracted from the reward (kl_in: reward); 0 otherwise. */
  klRewardCoef: number;
  /** Per-token KL estimate to the reference (old − ref logprob on model tokens), when β > 0. */
  klPerToken?: ArrayLike<number>[];
  /** Critic values per token (GAE). */
  values?: ArrayLike<number>[];
  /** Add Agent-R1 process-reward returns to the advantages. */
  processRewards: boolean;
  /** GiGPO's knobs (algorithm.gigpo). */
  gigpo?: { stepWeight: number; gamma: number; normByStd: boolean; similarity?: { threshold: number; ratio: (a: string, b: string) => number } };
}

export interface EstimatorResult {
  advantages: Float32Array[];
  /** Targets for the critic (GAE only). */
  returns?: Float32Array[];
  /** The estimator's own per-step metrics (e.g. GiGPO's step-group sizes). */
  metrics?: Record<string, number>;
}

export interface Estimator {
  needsCritic: boolean;
  compute(episodes: EstimatorEpisode[], o: EstimatorOptions): EstimatorResult;
}

/** Outcome rewards with the KL penalty of the whole response subtracted (KL in the reward, as verl's use_kl_in_reward). */
function klPenalised(eps: EstimatorEpisode[], o: EstimatorOptions): EstimatorEpisode[] {
  if (!o.klRewardCoef || !o.klPerToken) return eps;
  return eps.map((e, b) => {
    let kl = 0;
    const k = o.klPerToken![b]!;
    for (let i = 0; i < e.mask.length; i++) if (e.mask[i]) kl += k[i]!;
    return { ...e, reward: e.reward - o.klRewardCoef * kl };
  });
}

const group = (name: 'grpo' | 'drgrpo' | 'rloo'): Estimator => ({
  needsCritic: false,
  compute: (eps, o) => {
    const a = groupOutcomeAdvantages(klPenalised(eps, o), name, o.normByStd);
    return { advantages: eps.map((e, i) => broadcast(e.mask, a[i]!)) };
  },
});

export const ESTIMATORS = {
  grpo: group('grpo'),
  drgrpo: group('drgrpo'),
  rloo: group('rloo'),
  reinforce_pp: {
    needsCritic: false,
    compute: (eps, o) => ({ advantages: reinforcePlusPlus(eps, { gamma: o.gamma, klCoef: o.klRewardCoef, klPerToken: o.klPerToken }) }),
  },
  reinforce_pp_baseline: {
    needsCritic: false,
    compute: (eps, o) => ({ advantages: reinforcePlusPlusBaseline(klPenalised(eps, o)) }),
  },
  gae: {
    needsCritic: true,
    compute: (eps, o) => {
      if (!o.values) throw new Error('algorithm.adv_estimator: gae needs critic values for every episode');
      return gae(eps, o.values, { gamma: o.gamma, lam: o.lam, klCoef: o.klRewardCoef, klPerToken: o.klPerToken });
    },
  },
  gigpo: {
    needsCritic: false,
    compute: (eps, o) => {
      const g = o.gigpo ?? { stepWeight: 1, gamma: 0.95, normByStd: false };
      const r = gigpo(klPenalised(eps, o), g);
      return { advantages: r.advantages, metrics: stepGroupMetrics(r.stepGroupSizes) };
    },
  },
} as const satisfies Record<string, Estimator>;

export type EstimatorName = keyof typeof ESTIMATORS;

/** GiGPO's step groups as metrics: how many, their mean and largest size, and the share of steps alone in theirs (advantage 0). */
export function stepGroupMetrics(sizes: number[]): Record<string, number> {
  const steps = sizes.reduce((a, b) => a + b, 0);
  return {
    'advantage/step_groups': sizes.length,
    'advantage/step_group_size_mean': sizes.length ? steps / sizes.length : 0,
    'advantage/step_group_size_max': sizes.length ? Math.max(...sizes) : 0,
    'advantage/singleton_step_fraction': steps ? sizes.filter((n) => n === 1).length / steps : 0,
  };
}

export function estimatorNames(): string[] {
  return Object.keys(ESTIMATORS);
}

export function getEstimator(name: string): Estimator {
  const e = (ESTIMATORS as Record<string, Estimator>)[name];
  if (!e) throw new Error(`algorithm.adv_estimator: unknown estimator "${name}"; available: ${estimatorNames().join(', ')}`);
  return e;
}

/** Advantages for a batch under the named estimator, plus process-reward returns when enabled. */
export function computeAdvantages(name: string, episodes: EstimatorEpisode[], o: EstimatorOptions): EstimatorResult {
  const res = getEstimator(name).compute(episodes, o);
  if (o.processRewards)
    episodes.forEach((e, b) => {
      const p = processRewardReturns(e);
      const a = res.advantages[b]!;
      for (let i = 0; i < a.length; i++) a[i]! += p[i]!;
    });
  return res;
}
