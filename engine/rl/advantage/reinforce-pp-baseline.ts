/** REINFORCE++ with a baseline: the group-mean baseline on the outcome, then whitened over the batch. */
import { reinforcePlusPlusBaseline } from '../estimators';
import { klPenalised, registerEstimator } from '../estimator-registry';

registerEstimator('reinforce_pp_baseline', {
  needsCritic: false,
  verl: () => [{ keys: 'algorithm.adv_estimator', verl: { 'algorithm.adv_estimator': 'reinforce_plus_plus_baseline' } }],
  compute: (eps, o) => ({ advantages: reinforcePlusPlusBaseline(klPenalised(eps, o)) }),
});
