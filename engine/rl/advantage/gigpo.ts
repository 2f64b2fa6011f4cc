/**
 * GiGPO: A = episode advantage (the outcome normalised in its group) + step_weight × step
 * advantage (the discounted step return normalised within its step group: steps of one group that
 * saw the same, or with similarity_threshold a similar, observation). Its own knobs are
 * algorithm.gigpo (its own gamma among them).
 */
import { z } from 'zod';
import { gigpo } from '../estimators';
import { klPenalised, registerEstimator } from '../estimator-registry';
import { sequenceMatcherRatio } from '../similarity';

const options = z.strictObject({
  /** ω, the weight of the step-level advantage. */
  step_weight: z.number().nonnegative().default(1),
  /** Discount of the step returns R_k = r_k + γ·R_{k+1} (0.95 in the paper's runs). */
  gamma: z.number().min(0).max(1).default(0.95),
  /** mean_norm: subtract the group / step-group mean (default); mean_std_norm: also divide by the std (verl-agent's modes). */
  mode: z.enum(['mean_norm', 'mean_std_norm']).default('mean_norm'),
  /** Also group steps whose observations are this similar (difflib ratio, as verl-agent's enable_similarity; 0.95 there); null = exact match only. */
  similarity_threshold: z.number().gt(0).lt(1).nullable().default(null),
});

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

registerEstimator('gigpo', {
  needsCritic: false,
  options,
  outcomeOnly: (g) => ({ ...g, step_weight: 0 }),
  verl: () => [{ keys: 'algorithm.adv_estimator', note: "verl has no GiGPO estimator (verl-agent's fork does: algorithm.adv_estimator=gigpo)" }],
  compute: (eps, o, g) => {
    const r = gigpo(klPenalised(eps, o), {
      stepWeight: g.step_weight,
      gamma: g.gamma,
      normByStd: g.mode === 'mean_std_norm',
      similarity: g.similarity_threshold === null ? undefined : { threshold: g.similarity_threshold, ratio: sequenceMatcherRatio },
    });
    return { advantages: r.advantages, metrics: stepGroupMetrics(r.stepGroupSizes) };
  },
});
