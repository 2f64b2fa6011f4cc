/**
 * AEPO's entropy-balanced policy optimisation (Dong et al. 2025, "Agentic Entropy-Balanced Policy
 * Optimization"): PPO-clip (ε_low / ε_high) where clipped high-entropy tokens keep a gradient
 * through a stop-gradient factor. Per model token with ρ = exp(log π − log π_old), c = clip(ρ):
 *   clipped (the min picks c·A) and high-entropy:  L_t = −A·c·exp(log π − sg(log π))
 *     (value −A·c as PPO; gradient −A·c·∇log π instead of 0, rescaled to the clip bound),
 *   otherwise PPO's −min(ρ·A, c·A).
 * "High entropy": the current policy's entropy at the token (no gradient through the test) is at
 * least `algorithm.aepo.entropy_threshold` × its mean over the micro-batch's model tokens (the
 * paper leaves the split open; 1.0 = above average, Arbor's choice). Metrics: `clip_fraction`,
 * `high_entropy_fraction`, `clip_kept_fraction` (clipped tokens whose gradient was kept, over
 * model tokens). The heat map still marks its clipped tokens (their gradient is rescaled, not cut).
 */
import { z } from 'zod';
import type { LossSpec } from '../../model/graphs';
import type { Ops } from '../../tensor/ops';
import { clipTerms, finishTerms, lossSpec, registerPolicyLoss, type LossInputs, type PolicyLossConfig } from '../policy-losses';
import { clipRows } from './ppo';

/** A token is high-entropy at ≥ entropy_threshold × the micro-batch's mean entropy (Arbor's choice: 1, above average). */
const options = z.strictObject({ entropy_threshold: z.number().nonnegative().default(1) });
export type AepoOptions = z.infer<typeof options>;

const ownOptions = (cfg: PolicyLossConfig): AepoOptions => options.parse((cfg.algorithm as unknown as Record<string, unknown>).aepo ?? {});

export function aepoLoss(cfg: PolicyLossConfig, own: AepoOptions = ownOptions(cfg)): LossSpec {
  const a = cfg.algorithm;
  const thr = own.entropy_threshold;
  return lossSpec(cfg, `aepo:${a.clip_ratio_low}:${a.clip_ratio_high}:${thr}`, <T>(o: Ops<T>, x: LossInputs<T>) => {
    const { s, tmean, pg1, pg2 } = clipTerms(o, x, a.clip_ratio_low, a.clip_ratio_high);
    const isClipped = o.cast(o.greater(pg2, pg1), 'float32');
    const ent = o.stopGradient(x.entropy!);
    const high = o.cast(o.less(o.mul(tmean(ent), s(thr)), o.add(ent, s(1e-12))), 'float32'); // H_t ≥ thr·mean H
    const kept = o.mul(isClipped, high);
    // −A·c with the gradient −A·c·∇log π: exp(log π − sg(log π)) is 1 with gradient ∇log π.
    const keptTerm = o.mul(pg2, o.exp(o.sub(x.logprobs, o.stopGradient(x.logprobs))));
    const pg = o.where(o.greater(kept, s(0.5)), keptTerm, o.maximum(pg1, pg2));
    return finishTerms(o, cfg, x, pg, { clip_fraction: tmean(isClipped), high_entropy_fraction: tmean(high), clip_kept_fraction: tmean(kept) });
  });
}

registerPolicyLoss('aepo', {
  options,
  signals: { clip: (cfg) => ({ low: cfg.algorithm.clip_ratio_low, high: cfg.algorithm.clip_ratio_high, dual: null }) },
  verl: (cfg) => [
    {
      keys: 'algorithm.policy_loss',
      note: "verl has no AEPO loss (its entropy-balanced clipping keeps clipped high-entropy gradients); verl's nearest is loss_mode vanilla",
    },
    ...clipRows(cfg),
  ],
  build: (cfg, o) => aepoLoss(cfg, o),
});
