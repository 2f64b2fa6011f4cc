/** REINFORCE++: token rewards (−β·KL per token, the outcome on the last model token), discounted over model tokens, whitened over the batch. */
import { reinforcePlusPlus } from '../estimators';
import { registerEstimator } from '../estimator-registry';

registerEstimator('reinforce_pp', {
  needsCritic: false,
  reads: { 'algorithm.gamma': 'its discounted returns' },
  verl: () => [{ keys: 'algorithm.adv_estimator', verl: { 'algorithm.adv_estimator': 'reinforce_plus_plus' } }],
  compute: (eps, o) => ({ advantages: reinforcePlusPlus(eps, { gamma: o.gamma, klCoef: o.klRewardCoef, klPerToken: o.klPerToken }) }),
});
