/** PPO-clip per token: ε_low / ε_high (DAPO clip-higher), optional dual clip (c); verl's vanilla loss. */
import type { LossSpec } from '../../model/graphs';
import type { Ops } from '../../tensor/ops';
import { clipTerms, finishTerms, lossSpec, registerPolicyLoss, type LossInputs, type PolicyLossConfig } from '../policy-losses';

/** PPO-clip (ε_low / ε_high, optional dual clip), KL to the reference in the loss (per kl_type), entropy bonus; aggregated by `loss_agg_mode`. */
export function ppoClipLoss(cfg: PolicyLossConfig): LossSpec {
  const a = cfg.algorithm;
  return lossSpec(cfg, `ppo:${a.clip_ratio_low}:${a.clip_ratio_high}:${a.dual_clip}`, <T>(o: Ops<T>, x: LossInputs<T>) => {
    const { s, tmean, adv, pg1, pg2 } = clipTerms(o, x, a.clip_ratio_low, a.clip_ratio_high);
    let pg = o.maximum(pg1, pg2);
    if (a.dual_clip !== null) {
      const capped = o.minimum(pg, o.mul(o.neg(adv), s(a.dual_clip)));
      pg = o.where(o.less(adv, s(0)), capped, pg);
    }
    const clipped = o.cast(o.greater(pg2, pg1), 'float32');
    const clipFrac = tmean(clipped);
    // By side: A < 0 is clipped where ρ < 1 − ε_low, A > 0 where ρ > 1 + ε_high ("why didn't it learn", engine/train/diagnostics.ts).
    const negAdv = o.cast(o.less(adv, s(0)), 'float32');
    const clipLow = tmean(o.mul(clipped, negAdv));
    return finishTerms(o, cfg, x, pg, {
      clip_fraction: clipFrac,
      clip_low_fraction: clipLow,
      clip_high_fraction: o.sub(clipFrac, clipLow),
    });
  });
}

registerPolicyLoss('ppo', {
  default: true,
  reads: { 'algorithm.dual_clip': 'its dual clip of negative advantages' },
  signals: { clip: (cfg) => ({ low: cfg.algorithm.clip_ratio_low, high: cfg.algorithm.clip_ratio_high, dual: cfg.algorithm.dual_clip }) },
  verl: (cfg) => [
    {
      keys: 'algorithm.policy_loss',
      verl: { 'actor_rollout_ref.actor.policy_loss.loss_mode': 'vanilla' },
      note: 'Arbor "ppo" is verl\'s vanilla PPO-clip loss',
    },
    ...clipRows(cfg),
    cfg.algorithm.dual_clip === null
      ? {
          keys: 'algorithm.dual_clip',
          verl: { 'actor_rollout_ref.actor.clip_ratio_c': 1e9 },
          note: "verl always applies dual clip; a huge clip_ratio_c turns it off as Arbor's null does",
        }
      : { keys: 'algorithm.dual_clip', verl: { 'actor_rollout_ref.actor.clip_ratio_c': cfg.algorithm.dual_clip } },
  ],
  build: ppoClipLoss,
});

/** algorithm.clip_ratio_low/high as verl's actor clip range (the losses that clip the token ratio with them). */
export function clipRows(cfg: PolicyLossConfig) {
  return [
    {
      keys: ['algorithm.clip_ratio_low', 'algorithm.clip_ratio_high'],
      verl: {
        'actor_rollout_ref.actor.clip_ratio_low': cfg.algorithm.clip_ratio_low,
        'actor_rollout_ref.actor.clip_ratio_high': cfg.algorithm.clip_ratio_high,
      },
    },
  ];
}
