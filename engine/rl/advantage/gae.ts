/** PPO with a critic: GAE over model tokens only, whitened; the critic's targets are A + V. */
import { gae } from '../estimators';
import { registerEstimator } from '../estimator-registry';

const critic = 'the critic and its value targets';

registerEstimator('gae', {
  needsCritic: true,
  reads: { 'algorithm.gamma': 'its discounted returns', 'algorithm.lam': critic, 'algorithm.value_clip': critic, 'algorithm.value_coef': critic },
  verl: () => [{ keys: 'algorithm.adv_estimator', verl: { 'algorithm.adv_estimator': 'gae' } }],
  compute: (eps, o) => {
    if (!o.values) throw new Error('algorithm.adv_estimator: gae needs critic values for every episode');
    return gae(eps, o.values, { gamma: o.gamma, lam: o.lam, klCoef: o.klRewardCoef, klPerToken: o.klPerToken });
  },
});
