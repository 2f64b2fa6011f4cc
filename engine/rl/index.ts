/**
 * The advantage-estimator registry, keyed by the experiment config's `algorithm.adv_estimator`.
 * Each entry says whether it needs a critic, owns the schema of its own knobs (`options`: a zod
 * object the config composes in as `algorithm.<name>`, e.g. algorithm.gigpo) and computes
 * per-token advantages (and, for GAE, the critic's return targets) for a batch. Process rewards
 * (Agent-R1) add a normalised return-to-go of the step rewards on top of any estimator.
 * `registerEstimator` adds one (a config's `plugins:` file calls it; README "Write your own
 * estimator").
 */
import { z } from 'zod';
import { NamedRegistry } from '../base/registry';
import { sequenceMatcherRatio } from './similarity';
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
}

export interface EstimatorResult {
  advantages: Float32Array[];
  /** Targets for the critic (GAE only). */
  returns?: Float32Array[];
  /** The estimator's own per-step metrics (e.g. GiGPO's step-group sizes). */
  metrics?: Record<string, number>;
}

export interface Estimator<O = unknown> {
  needsCritic: boolean;
  /** The estimator's own knobs, `algorithm.<name>` in the config (a zod object whose fields all have defaults; refused unless this estimator is chosen). */
  options?: z.ZodType<O, Record<string, unknown>>;
  /** The options without the estimator's step-level term, for the outcome part of the advantages reported beside them (GiGPO: step_weight 0). */
  outcomeOnly?: (options: O) => O;
  /** `options`: the parsed `algorithm.<name>` section (undefined without an options schema). */
  compute(episodes: EstimatorEpisode[], o: EstimatorOptions, options: O): EstimatorResult;
}

/** An estimator whatever its options' type (the registry's entries). */
type AnyEstimator = Estimator<any>;

/** Outcome rewards with the KL penalty of the whole response subtracted (KL in the reward, as verl's use_kl_in_reward). */
export function klPenalised(eps: EstimatorEpisode[], o: EstimatorOptions): EstimatorEpisode[] {
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
    /** GiGPO: A = episode advantage + step_weight × step advantage. */
    options: z.strictObject({
      /** ω, the weight of the step-level advantage. */
      step_weight: z.number().nonnegative().default(1),
      /** Discount of the step returns R_k = r_k + γ·R_{k+1} (0.95 in the paper's runs). */
      gamma: z.number().min(0).max(1).default(0.95),
      /** mean_norm: subtract the group / step-group mean (default); mean_std_norm: also divide by the std (verl-agent's modes). */
      mode: z.enum(['mean_norm', 'mean_std_norm']).default('mean_norm'),
      /** Also group steps whose observations are this similar (difflib ratio, as verl-agent's enable_similarity; 0.95 there); null = exact match only. */
      similarity_threshold: z.number().gt(0).lt(1).nullable().default(null),
    }),
    outcomeOnly: (g) => ({ ...g, step_weight: 0 }),
    compute: (eps, o, g) => {
      const r = gigpo(klPenalised(eps, o), {
        stepWeight: g.step_weight,
        gamma: g.gamma,
        normByStd: g.mode === 'mean_std_norm',
        similarity: g.similarity_threshold === null ? undefined : { threshold: g.similarity_threshold, ratio: sequenceMatcherRatio },
      });
      return { advantages: r.advantages, metrics: stepGroupMetrics(r.stepGroupSizes) };
    },
  } satisfies Estimator<{ step_weight: number; gamma: number; mode: 'mean_norm' | 'mean_std_norm'; similarity_threshold: number | null }>,
} as const satisfies Record<string, AnyEstimator>;

export type EstimatorName = keyof typeof ESTIMATORS;

/** Every estimator: the built-in ones and those registered since. */
const registry = new NamedRegistry<AnyEstimator>(ESTIMATORS, ['registerEstimator', 'an advantage estimator', 'algorithm.adv_estimator', 'estimator']);

/**
 * Add an advantage estimator under `name` (the config's `algorithm.adv_estimator`); its `options`
 * become `algorithm.<name>`. A name already taken is refused.
 */
export function registerEstimator<O>(name: string, estimator: Estimator<O>): void {
  registry.register(name, estimator);
}

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
  return registry.names();
}

export function getEstimator(name: string): Estimator<unknown> {
  return registry.get(name);
}

/** Advantages for a batch under the named estimator (with its `algorithm.<name>` options), plus process-reward returns when enabled. */
export function computeAdvantages(name: string, episodes: EstimatorEpisode[], o: EstimatorOptions, options?: unknown): EstimatorResult {
  const res = getEstimator(name).compute(episodes, o, options);
  if (o.processRewards)
    episodes.forEach((e, b) => {
      const p = processRewardReturns(e);
      const a = res.advantages[b]!;
      for (let i = 0; i < a.length; i++) a[i]! += p[i]!;
    });
  return res;
}
