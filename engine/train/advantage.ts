/**
 * The loop's AdvantagePort over engine/rl's estimator registry: episodes → per-token advantages
 * (zero on tool/env tokens), with the KL-in-reward term and process rewards from the config.
 */
import { computeAdvantages, getEstimator, stepsFromMask, type EstimatorEpisode } from '../rl';
import { klValue } from '../rl/kl';
import { sequenceMatcherRatio } from '../rl/similarity';
import type { ExperimentConfig } from './config';
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
 * @param critic for estimators that need one (GAE): the critic's per-token values.
 */
export function advantagePort(cfg: ExperimentConfig, critic?: { values(episodes: Episode[]): Promise<Float32Array[]> }): AdvantagePort {
  const a = cfg.algorithm;
  const est = getEstimator(a.adv_estimator);
  if (est.needsCritic && !critic)
    throw new Error(`algorithm.adv_estimator: "${a.adv_estimator}" needs a critic (value model), which this task session does not provide`);
  const klInReward = a.kl_in === 'reward' && a.kl_coef > 0;
  return {
    values: est.needsCritic ? (eps) => critic!.values(eps) : undefined,
    compute({ episodes, refLogprobs, oldLogprobs, values }) {
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
      const res = computeAdvantages(a.adv_estimator, episodes.map(asEstimatorEpisode), {
        normByStd: a.norm_adv_by_std,
        gamma: a.gamma,
        lam: a.lam,
        klRewardCoef: klInReward ? a.kl_coef : 0,
        klPerToken,
        values: values ? episodes.map((e) => values.get(e)!) : undefined,
        processRewards: a.process_rewards,
        gigpo: {
          stepWeight: a.gigpo.step_weight,
          gamma: a.gigpo.gamma,
          normByStd: a.gigpo.mode === 'mean_std_norm',
          similarity: a.gigpo.similarity_threshold === null ? undefined : { threshold: a.gigpo.similarity_threshold, ratio: sequenceMatcherRatio },
        },
      });
      return {
        advantages: new Map(episodes.map((e, i) => [e, res.advantages[i]!] as const)),
        returns: res.returns ? new Map(episodes.map((e, i) => [e, res.returns![i]!] as const)) : undefined,
        metrics: res.metrics,
      };
    },
  };
}
