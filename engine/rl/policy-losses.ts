/**
 * The policy-loss registry, keyed by the config's `algorithm.policy_loss`. Each entry builds the
 * loss as an op-set program (a LossSpec: it runs inside the model's train graph, which adds the
 * gradients) from the config:
 *
 *   ppo   PPO-clip per token, ε_low / ε_high (DAPO clip-higher), optional dual clip (c)
 *   gspo  GSPO: one length-normalised importance ratio per sequence,
 *         s_i = exp(mean over the sample's model tokens of (log π − log π_old)), clipped to
 *         [1 − ε_low, 1 + ε_high] with its own tiny range (algorithm.gspo.*), in verl's per-token
 *         form log s_{i,t} = log π_t − sg(log π_t) + sg(log s_i) so every token gets the gradient
 *         s_i·∇log π_t (the sequence gradient under seq-mean-token-mean aggregation)
 *   aepo  AEPO's entropy-balanced clipping: PPO-clip, except that a high-entropy token (current
 *         entropy ≥ algorithm.aepo.entropy_threshold × the micro-batch's mean over model tokens)
 *         whose ratio is clipped keeps a gradient: its term is −A·clip(ρ)·ρ/sg(ρ), the clipped
 *         value with the gradient −A·clip(ρ)·∇log π (rescaled to the clip bound, not dropped)
 *
 * All three add the KL to the reference in the loss (./kl.ts) and the entropy bonus, and aggregate
 * per `algorithm.loss_agg_mode`. An entry owns the schema of its own knobs (`options`, composed
 * into the config as `algorithm.<name>`, e.g. algorithm.gspo); `registerPolicyLoss` adds one (a
 * config's `plugins:` file calls it; README "Write your own policy loss"). With `algorithm.tis` every
 * per-token policy-gradient term is weighted by the truncated importance weight min(π_old / π_sampler,
 * cap) (tisWeights; a registered loss applies it with withTis).
 */
import { z } from 'zod';
import { NamedRegistry } from '../base/registry';
import type { Ops } from '../tensor/ops';
import type { LossSpec } from '../model/graphs';
import { klProgram } from './kl';

/** Loss aggregation modes (the config's `algorithm.loss_agg_mode`). */
export const AGGREGATION_MODES = ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum', 'seq-mean-token-sum-norm'] as const;
export type LossAggMode = (typeof AGGREGATION_MODES)[number];

/** What the policy losses read of the experiment config (engine/config/experiment.ts ExperimentConfig satisfies it). */
export interface PolicyLossConfig {
  algorithm: {
    policy_loss: string;
    loss_agg_mode: LossAggMode;
    clip_ratio_low: number;
    clip_ratio_high: number;
    dual_clip: number | null;
    gspo: { clip_ratio_low: number; clip_ratio_high: number };
    aepo: { entropy_threshold: number };
    kl_coef: number;
    kl_type: string;
    kl_in: string;
    entropy_coef: number;
    /** Truncated importance sampling (see tisWeights); null/absent: none. */
    tis?: { cap: number } | null;
  };
  rollout: { max_total_length: number };
}

/**
 * Loss aggregation over a [batch, seq] matrix of per-token losses (algorithms.md):
 * token-mean (every model token of the batch weighs the same), seq-mean-token-mean (mean per
 * sequence, then over sequences with model tokens: original GRPO), seq-mean-token-sum (sum per
 * sequence, mean over sequences), seq-mean-token-sum-norm (token sum / (max length · sequences):
 * Dr.GRPO, `maxLength` = rollout.max_total_length, a constant).
 */
export function aggregateLoss<T>(o: Ops<T>, v: T, mask: T, mode: LossAggMode, maxLength: number): T {
  const s = (x: number) => o.scalar(x);
  const masked = o.mul(v, mask);
  if (mode === 'token-mean') return o.div(o.sum(masked, [0, 1]), o.maximum(o.sum(mask, [0, 1]), s(1)));
  const perSeqSum = o.sum(masked, [1]);
  const perSeqCount = o.sum(mask, [1]);
  const hasTokens = o.cast(o.greater(perSeqCount, s(0)), 'float32');
  const nSeq = o.maximum(o.sum(hasTokens, [0]), s(1));
  if (mode === 'seq-mean-token-mean') return o.div(o.sum(o.div(perSeqSum, o.maximum(perSeqCount, s(1))), [0]), nSeq);
  if (mode === 'seq-mean-token-sum') return o.div(o.sum(perSeqSum, [0]), nSeq);
  return o.div(o.sum(perSeqSum, [0]), o.mul(nSeq, s(maxLength)));
}

/** How much of an update a micro-batch carries under the aggregation mode (its share of tokens or of sequences). */
export function aggregationUnits(lossMasks: ArrayLike<number>[], mode: LossAggMode): number {
  let n = 0;
  for (const m of lossMasks) {
    let c = 0;
    for (let i = 0; i < m.length; i++) c += m[i]!;
    n += mode === 'token-mean' ? c : c > 0 ? 1 : 0;
  }
  return n;
}

export type LossInputs<T> = { logprobs: T; entropy?: T; mask: T } & Record<string, T>;

/** The inputs every policy loss reads, plus the reference logprobs when the KL is in the loss. */
export function lossInputs(cfg: PolicyLossConfig): LossSpec['inputs'] {
  const seq = { dtype: 'float32' as const, shape: ['batch', 'seq'] };
  return [
    { name: 'advantages', ...seq },
    { name: 'old_logprobs', ...seq },
    ...(klInLoss(cfg) ? [{ name: 'ref_logprobs', ...seq }] : []),
    ...(cfg.algorithm.tis ? [{ name: 'rollout_logprobs', ...seq }] : []),
  ];
}

/**
 * Truncated importance sampling (FlashRL; Yao et al. 2025, "Your efficient RL framework secretly
 * brings you off-policy RL training"): the rollout was sampled by π_sampler (a quantized or
 * otherwise numerically different decode session), the ratio's old policy is the learner's own
 * π_old (recomputed), so each token's policy-gradient term is weighted by
 * w = min(π_old / π_sampler, cap) = min(exp(old_logprobs − rollout_logprobs), cap), with no
 * gradient (both are inputs of the loss). Returns the weights [B, T].
 */
export function tisWeights<T>(o: Ops<T>, oldLogprobs: T, rolloutLogprobs: T, cap: number): T {
  return o.stopGradient(o.minimum(o.exp(o.sub(oldLogprobs, rolloutLogprobs)), o.scalar(cap)));
}

/** The per-token policy-gradient terms `pg` weighted by the TIS weights when algorithm.tis is set, and its metrics (mean weight, capped fraction over model tokens). */
export function withTis<T>(o: Ops<T>, cfg: PolicyLossConfig, x: LossInputs<T>, pg: T): { pg: T; metrics: Record<string, T> } {
  const tis = cfg.algorithm.tis;
  if (!tis) return { pg, metrics: {} };
  const w = tisWeights(o, x.old_logprobs!, x.rollout_logprobs!, tis.cap);
  const mask = x.mask;
  const tokens = o.maximum(o.sum(mask, [0, 1]), o.scalar(1));
  const tmean = (v: T) => o.div(o.sum(o.mul(v, mask), [0, 1]), tokens);
  const capped = o.cast(o.greater(o.sub(x.old_logprobs!, x.rollout_logprobs!), o.scalar(Math.log(tis.cap))), 'float32');
  return { pg: o.mul(pg, w), metrics: { tis_weight: tmean(w), tis_capped_fraction: tmean(capped) } };
}

export const tisKey = (cfg: PolicyLossConfig) => (cfg.algorithm.tis ? `:tis${cfg.algorithm.tis.cap}` : '');

export const klInLoss = (cfg: PolicyLossConfig) => cfg.algorithm.kl_coef > 0 && cfg.algorithm.kl_in === 'loss';

/** The part of a LossSpec's `key` that every loss shares: what finish() and the aggregation read (a registered loss adds its own options before it). */
export const lossKey = (cfg: PolicyLossConfig) => {
  const a = cfg.algorithm;
  return `${klInLoss(cfg) ? a.kl_type + a.kl_coef : 'nokl'}:${a.entropy_coef}:${a.loss_agg_mode}:${cfg.rollout.max_total_length}${tisKey(cfg)}`;
};

/**
 * The terms shared by every policy loss: the KL to the reference in the loss (or, without a
 * reference, the k1 estimate of KL(old‖new) as a metric), the entropy bonus, and the metrics.
 */
export function finish<T>(o: Ops<T>, cfg: PolicyLossConfig, x: LossInputs<T>, pgLoss: T, metrics: Record<string, T>) {
  const a = cfg.algorithm;
  const s = (v: number) => o.scalar(v);
  const mask = x.mask;
  const tokens = o.maximum(o.sum(mask, [0, 1]), s(1));
  const tmean = (v: T) => o.div(o.sum(o.mul(v, mask), [0, 1]), tokens);
  const agg = (v: T) => aggregateLoss(o, v, mask, a.loss_agg_mode, cfg.rollout.max_total_length);
  let loss = pgLoss;
  const out: Record<string, T> = {};
  if (klInLoss(cfg)) {
    const kl = klProgram(a.kl_type, o, x.logprobs, x.ref_logprobs!);
    loss = o.add(loss, o.mul(s(a.kl_coef), agg(kl)));
    out.kl = tmean(kl);
  } else out.kl = tmean(o.neg(o.sub(x.logprobs, x.old_logprobs!))); // approx KL(old‖new), k1
  const ent = tmean(x.entropy!);
  if (a.entropy_coef !== 0) loss = o.sub(loss, o.mul(s(a.entropy_coef), agg(x.entropy!)));
  return { ...out, ...metrics, loss, entropy: ent, tokens };
}

/**
 * PPO-clip's per-token terms, shared by the PPO and AEPO losses: ρ = exp(log π − log π_old),
 * pg1 = −A·ρ, pg2 = −A·clip(ρ, 1 − lo, 1 + hi), and the masked token mean.
 */
export function clipTerms<T>(o: Ops<T>, x: LossInputs<T>, lo: number, hi: number) {
  const s = (v: number) => o.scalar(v);
  const mask = x.mask;
  const tokens = o.maximum(o.sum(mask, [0, 1]), s(1));
  const tmean = (v: T) => o.div(o.sum(o.mul(v, mask), [0, 1]), tokens);
  const ratio = o.exp(o.sub(x.logprobs, x.old_logprobs!));
  const adv = x.advantages!;
  const pg1 = o.mul(o.neg(adv), ratio);
  const pg2 = o.mul(o.neg(adv), o.minimum(o.maximum(ratio, s(1 - lo)), s(1 + hi)));
  return { s, mask, tmean, adv, pg1, pg2 };
}

/** PPO-clip (ε_low / ε_high, optional dual clip), KL to the reference in the loss (per kl_type), entropy bonus; aggregated by `loss_agg_mode`. */
export function ppoClipLoss(cfg: PolicyLossConfig): LossSpec {
  const a = cfg.algorithm;
  return {
    key: `ppo:${a.clip_ratio_low}:${a.clip_ratio_high}:${a.dual_clip}:${klInLoss(cfg) ? a.kl_type + a.kl_coef : 'nokl'}:${a.entropy_coef}:${a.loss_agg_mode}:${cfg.rollout.max_total_length}${tisKey(cfg)}`,
    inputs: lossInputs(cfg),
    entropy: true,
    program: <T>(o: Ops<T>, x: LossInputs<T>) => {
      const { s, mask, tmean, adv, pg1, pg2 } = clipTerms(o, x, a.clip_ratio_low, a.clip_ratio_high);
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
      const t = withTis(o, cfg, x, pg);
      return finish(o, cfg, x, aggregateLoss(o, t.pg, mask, a.loss_agg_mode, cfg.rollout.max_total_length), {
        clip_fraction: clipFrac,
        clip_low_fraction: clipLow,
        clip_high_fraction: o.sub(clipFrac, clipLow),
        ...t.metrics,
      });
    },
  };
}

/**
 * GSPO (Zheng et al. 2025; verl's compute_policy_loss_gspo). Metrics: `clip_fraction` (model
 * tokens whose term was clipped, as PPO's) and `seq_clip_fraction` (sequences with model tokens
 * whose sequence ratio was clipped: the per-sequence mean of the clipped indicator, averaged over
 * sequences; exact when the advantage is one value per sequence, as GRPO's).
 */
export function gspoLoss(cfg: PolicyLossConfig): LossSpec {
  const a = cfg.algorithm;
  const { clip_ratio_low: lo, clip_ratio_high: hi } = a.gspo;
  return {
    key: `gspo:${lo}:${hi}:${klInLoss(cfg) ? a.kl_type + a.kl_coef : 'nokl'}:${a.entropy_coef}:${a.loss_agg_mode}:${cfg.rollout.max_total_length}${tisKey(cfg)}`,
    inputs: lossInputs(cfg),
    entropy: true,
    program: <T>(o: Ops<T>, x: LossInputs<T>) => {
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
      const t = withTis(o, cfg, x, pg);
      return finish(o, cfg, x, aggregateLoss(o, t.pg, mask, a.loss_agg_mode, cfg.rollout.max_total_length), {
        clip_fraction: tmean(clippedTok),
        seq_clip_fraction: seqClip,
        ...t.metrics,
      });
    },
  };
}

/**
 * AEPO's entropy-balanced policy optimisation (Dong et al. 2025, "Agentic Entropy-Balanced Policy
 * Optimization"): PPO-clip (ε_low / ε_high) where clipped high-entropy tokens keep a gradient
 * through a stop-gradient factor. Per model token with ρ = exp(log π − log π_old), c = clip(ρ):
 *   clipped (the min picks c·A) and high-entropy:  L_t = −A·c·exp(log π − sg(log π))
 *     (value −A·c as PPO; gradient −A·c·∇log π instead of 0),
 *   otherwise PPO's −min(ρ·A, c·A).
 * "High entropy": the current policy's entropy at the token (no gradient through the test) is at
 * least `algorithm.aepo.entropy_threshold` × its mean over the micro-batch's model tokens (the
 * paper leaves the split open; 1.0 = above average, Arbor's choice). Metrics: `clip_fraction`,
 * `high_entropy_fraction`, `clip_kept_fraction` (clipped tokens whose gradient was kept, over
 * model tokens).
 */
export function aepoLoss(cfg: PolicyLossConfig): LossSpec {
  const a = cfg.algorithm;
  const thr = a.aepo.entropy_threshold;
  return {
    key: `aepo:${a.clip_ratio_low}:${a.clip_ratio_high}:${thr}:${klInLoss(cfg) ? a.kl_type + a.kl_coef : 'nokl'}:${a.entropy_coef}:${a.loss_agg_mode}:${cfg.rollout.max_total_length}${tisKey(cfg)}`,
    inputs: lossInputs(cfg),
    entropy: true,
    program: <T>(o: Ops<T>, x: LossInputs<T>) => {
      const { s, mask, tmean, pg1, pg2 } = clipTerms(o, x, a.clip_ratio_low, a.clip_ratio_high);
      const isClipped = o.cast(o.greater(pg2, pg1), 'float32');
      const ent = o.stopGradient(x.entropy!);
      const high = o.cast(o.less(o.mul(tmean(ent), s(thr)), o.add(ent, s(1e-12))), 'float32'); // H_t ≥ thr·mean H
      const kept = o.mul(isClipped, high);
      // −A·c with the gradient −A·c·∇log π: exp(log π − sg(log π)) is 1 with gradient ∇log π.
      const keptTerm = o.mul(pg2, o.exp(o.sub(x.logprobs, o.stopGradient(x.logprobs))));
      const pg = o.where(o.greater(kept, s(0.5)), keptTerm, o.maximum(pg1, pg2));
      const t = withTis(o, cfg, x, pg);
      return finish(o, cfg, x, aggregateLoss(o, t.pg, mask, a.loss_agg_mode, cfg.rollout.max_total_length), {
        clip_fraction: tmean(isClipped),
        high_entropy_fraction: tmean(high),
        clip_kept_fraction: tmean(kept),
        ...t.metrics,
      });
    },
  };
}

/** A policy loss: its own knobs (`algorithm.<name>`, a zod object whose fields all have defaults) and the loss program built from the config and them. */
export interface PolicyLoss<O = unknown> {
  options?: z.ZodType<O, Record<string, unknown>>;
  /** `options`: the parsed `algorithm.<name>` section (undefined without an options schema). The LossSpec's `key` must change with every value it depends on. */
  build(cfg: PolicyLossConfig, options: O): LossSpec;
}

/** A policy loss whatever its options' type (the registry's entries). */
type AnyPolicyLoss = PolicyLoss<any>;

export const POLICY_LOSSES = {
  ppo: { build: ppoClipLoss },
  gspo: {
    /** GSPO's own clip range on the sequence ratio (the paper's 3e-4 / 4e-4). */
    options: z.strictObject({
      clip_ratio_low: z.number().nonnegative().max(1).default(3e-4),
      clip_ratio_high: z.number().nonnegative().default(4e-4),
    }),
    build: gspoLoss,
  },
  aepo: {
    /** A token is high-entropy at ≥ entropy_threshold × the micro-batch's mean entropy (Arbor's choice: 1, above average). */
    options: z.strictObject({ entropy_threshold: z.number().nonnegative().default(1) }),
    build: aepoLoss,
  },
} as const satisfies Record<string, AnyPolicyLoss>;

export type PolicyLossName = keyof typeof POLICY_LOSSES;

/** Every policy loss: the built-in ones and those registered since. */
const registry = new NamedRegistry<AnyPolicyLoss>(POLICY_LOSSES, ['registerPolicyLoss', 'a policy loss', 'algorithm.policy_loss', 'policy loss']);

/** Add a policy loss under `name` (the config's `algorithm.policy_loss`); its `options` become `algorithm.<name>`. A name already taken is refused. */
export function registerPolicyLoss<O>(name: string, loss: PolicyLoss<O>): void {
  registry.register(name, loss);
}

export function policyLossNames(): string[] {
  return registry.names();
}

export function getPolicyLoss(name: string): PolicyLoss<unknown> {
  return registry.get(name);
}

/** The loss named by `algorithm.policy_loss`, with its `algorithm.<name>` options. */
export function policyLoss(cfg: PolicyLossConfig): LossSpec {
  const name = cfg.algorithm.policy_loss;
  const f = getPolicyLoss(name);
  return f.build(cfg, f.options ? (cfg.algorithm as unknown as Record<string, unknown>)[name] : undefined);
}
