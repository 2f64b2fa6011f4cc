/** GRPO: the outcome normalised within its group, (R − mean) / (std + eps) (algorithm.norm_adv_by_std: false drops the division). */
import { broadcast, groupOutcomeAdvantages } from '../estimators';
import { klPenalised, registerEstimator } from '../estimator-registry';

registerEstimator('grpo', {
  default: true,
  needsCritic: false,
  reads: { 'algorithm.norm_adv_by_std': 'its group-std division' },
  verl: (a) => [
    { keys: 'algorithm.adv_estimator', verl: { 'algorithm.adv_estimator': 'grpo' } },
    { keys: 'algorithm.norm_adv_by_std', verl: { 'algorithm.norm_adv_by_std_in_grpo': a.norm_adv_by_std } },
  ],
  compute: (eps, o) => {
    const a = groupOutcomeAdvantages(klPenalised(eps, o), { normByStd: o.normByStd });
    return { advantages: eps.map((e, i) => broadcast(e.mask, a[i]!)) };
  },
});
