/** RLOO: the outcome minus the mean of the other samples of its group. */
import { broadcast, groupOutcomeAdvantages } from '../estimators';
import { klPenalised, registerEstimator } from '../estimator-registry';

registerEstimator('rloo', {
  needsCritic: false,
  verl: () => [{ keys: 'algorithm.adv_estimator', verl: { 'algorithm.adv_estimator': 'rloo' } }],
  compute: (eps, o) => {
    const a = groupOutcomeAdvantages(klPenalised(eps, o), { leaveOneOut: true });
    return { advantages: eps.map((e, i) => broadcast(e.mask, a[i]!)) };
  },
});
