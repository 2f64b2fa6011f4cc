/**
 * GSPO (Zheng et al. 2025; verl's compute_policy_loss_gspo): one length-normalised importance
 * ratio per sequence, s_i = exp(mean over the sample's model tokens of (log π − log π_old)),
 * clipped to [1 − ε_low, 1 + ε_high] with its own tiny range (algorithm.gspo.*), in verl's
 * per-token form log s_{i,t} = log π_t − sg(log π_t) + sg(log s_i) so every token gets the
 * gradient s_i·∇log π_t (the sequence gradient under seq-mean-token-mean aggregation).
 */
import { z } from 'zod';
import type { LossSpec } from '../../model/graphs';
import type { Ops } from '../../tensor/ops';
import { aggregateLoss, finishTerms, lossSpec, registerPolicyLoss, type LossInputs, type PolicyLossConfig } from '../policy-losses';

/** GSPO's own clip range on the sequence ratio (the paper's 3e-4 / 4e-4). */
const options = z.strictObject({
  clip_ratio_low: z.number().nonnegative().max(1).default(3e-4),
  clip_ratio_high: z.number().nonnegative().default(4e-4),
});
export type GspoOptions = z.infer<typeof options>;

const ownOptions = (cfg: PolicyLossConfig): GspoOptions => options.parse((cfg.algorithm as unknown as Record<string, unknown>).gspo ?? {});

/**
 * The GSPO loss. Metrics: `clip_fraction` (model tokens whose term was clipped, as PPO's) and
 * `seq_clip_fraction` (sequences with model tokens whose sequence ratio was clipped: the
 * per-sequence mean of the clipped indicator, averaged over sequences; exact when the advantage is
 * one value per sequence, as GRPO's).
 */
export function gspoLoss(cfg: PolicyLossConfig, own: GspoOptions = ownOptions(cfg)): LossSpec {
  const { clip_ratio_low: lo, clip_ratio_high: hi } = own;
  return lossSpec(cfg, `gspo:${lo}:${hi}`, <T>(o: Ops<T>, x: LossInputs<T>) => {
    const s = (v: number) => o.scalar(v);
    const mask = x.mask;
    const tokens = o.maximum(o.sum(mask, [0, 1]), s(1));
    const tmean = (v: T) => o.div(o.sum(o.mul(v, mask), [0, 1]), tokens);
    const logRatio = o.sub(x.logprobs, x.old_logprobs!);
    const seqCount = o.sum(mask, [1], true); // [B, 1]
    const seqLogRatio = o.div(o.sum(o.mul(logRatio, mask), [1], true), o.maximum(seqCount, s(1))); // log s_i, [B, 1]
    // Per-token form: value log s_i on every token, gradient ∇log π_t. Capped at 10 as verl
    // (exp would overflow far off-policy).
    const logS = o.minimum(o.add(o.sub(x.logprobs, o.stopGradient(x.logprobs)), o.stopGradient(seqLogRatio)), s(10));
    const ratio = o.exp(logS);
    const adv = x.advantages!;
    const pg1 = o.mul(o.neg(adv), ratio);
    const pg2 = o.mul(o.neg(adv), o.minimum(o.maximum(ratio, s(1 - lo)), s(1 + hi)));
    const pg = o.maximum(pg1, pg2);
    const clippedTok = o.cast(o.greater(pg2, pg1), 'float32');
    const seqClip = aggregateLoss(o, clippedTok, mask, 'seq-mean-token-mean', 1);
    return finishTerms(o, cfg, x, pg, { clip_fraction: tmean(clippedTok), seq_clip_fraction: seqClip });
  });
}

registerPolicyLoss('gspo', {
  options,
  signals: { clip: (_cfg, o) => ({ low: o.clip_ratio_low, high: o.clip_ratio_high, dual: null }), ratio: 'sequence' },
  verl: (_cfg, o) => [
    { keys: 'algorithm.policy_loss', verl: { 'actor_rollout_ref.actor.policy_loss.loss_mode': 'gspo' } },
    {
      keys: ['algorithm.gspo.clip_ratio_low', 'algorithm.gspo.clip_ratio_high'],
      verl: { 'actor_rollout_ref.actor.clip_ratio_low': o.clip_ratio_low, 'actor_rollout_ref.actor.clip_ratio_high': o.clip_ratio_high },
      note: "verl's gspo loss reads the actor's clip range",
    },
    { keys: ['algorithm.clip_ratio_low', 'algorithm.clip_ratio_high'], note: 'the token clip range; GSPO clips the sequence ratio with algorithm.gspo.*' },
  ],
  build: (cfg, o) => gspoLoss(cfg, o),
});
