/** Dr.GRPO: GRPO without the std division, R − mean of the group (pair it with loss_agg_mode seq-mean-token-sum-norm). */
import { broadcast, groupOutcomeAdvantages } from '../estimators';
import { klPenalised, registerEstimator } from '../estimator-registry';

registerEstimator('drgrpo', {
  needsCritic: false,
  verl: () => [
    {
      keys: 'algorithm.adv_estimator',
      verl: { 'algorithm.adv_estimator': 'grpo', 'algorithm.norm_adv_by_std_in_grpo': false },
      note: "Dr.GRPO = grpo without the std division (pair it with loss_agg_mode seq-mean-token-sum-norm, as Arbor's config does when asked)",
    },
    { keys: 'algorithm.norm_adv_by_std', note: 'drgrpo already turns the std division off' },
  ],
  compute: (eps, o) => {
    const a = groupOutcomeAdvantages(klPenalised(eps, o), {});
    return { advantages: eps.map((e, i) => broadcast(e.mask, a[i]!)) };
  },
});
