/**
 * The policy-loss registry, keyed by the config's `algorithm.policy_loss`, and what every loss is
 * written with. An entry (one module of ./loss/, or a config's `plugins:` file; README "Write your
 * own policy loss") registers everything about itself: its own knobs (`options`, composed into the
 * config as `algorithm.<name>`), the shared `algorithm.*` keys it reads (the others are refused
 * under it), its per-token heat-map signals (./token-signals.ts), its verl counterpart, and the
 * loss as an op-set program (a LossSpec: it runs inside the model's train graph, which adds the
 * gradients) built from the config.
 *
 * Every loss adds the KL to the reference in the loss (./kl.ts) and the entropy bonus with
 * `finish`, and aggregates per `algorithm.loss_agg_mode` (`aggregateLoss`). With `algorithm.tis`
 * every per-token policy-gradient term is weighted by the truncated importance weight
 * min(π_old / π_sampler, cap) (tisWeights; a loss applies it with withTis).
 */
import type { z } from 'zod';
import { NamedRegistry, type KeyReads, type VerlRow } from '../base/registry';
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

/** A built-in loss's LossSpec: the key `<own values>:<lossKey>` (every value the program reads), the shared inputs, the entropy, and its program. */
export function lossSpec(cfg: PolicyLossConfig, own: string, program: LossSpec['program']): LossSpec {
  return { key: `${own}:${lossKey(cfg)}`, inputs: lossInputs(cfg), entropy: true, program };
}

/** A loss's per-token policy-gradient terms `pg`, TIS-weighted (withTis), aggregated per loss_agg_mode, then `finish`ed with its metrics. */
export function finishTerms<T>(o: Ops<T>, cfg: PolicyLossConfig, x: LossInputs<T>, pg: T, metrics: Record<string, T>) {
  const t = withTis(o, cfg, x, pg);
  return finish(o, cfg, x, aggregateLoss(o, t.pg, x.mask, cfg.algorithm.loss_agg_mode, cfg.rollout.max_total_length), { ...metrics, ...t.metrics });
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

/** What the replay's heat map marks of a loss (./token-signals.ts): the ratio each token carries and where the clip cut its gradient. */
export interface LossSignals<O = unknown> {
  /** The ratio bounds [1 − low, 1 + high] beyond which a token's gradient is cut, and the dual-clip constant c (null: none). */
  clip(cfg: PolicyLossConfig, options: O): { low: number; high: number; dual: number | null };
  /** 'token' (default): each token's own ratio; 'sequence': the sample's length-normalised ratio, carried by every token of it. */
  ratio?: 'token' | 'sequence';
}

/** A policy loss: its own knobs (`algorithm.<name>`, a zod object whose fields all have defaults) and the loss program built from the config and them. */
export interface PolicyLoss<O = unknown> {
  /** The config's default algorithm.policy_loss (one entry: the built-in ppo). */
  default?: boolean;
  options?: z.ZodType<O, Record<string, unknown>>;
  /** Shared `algorithm.*` keys it reads (e.g. algorithm.dual_clip); a key another loss reads and this one does not is refused under it. */
  reads?: KeyReads;
  /** Its clip marks in the heat map; absent: the heat map shows the per-token ratio and loss weight, no clip marks. */
  signals?: LossSignals<O>;
  /** verl's counterpart (`arbor export verl`): rows for algorithm.policy_loss and the keys it settles; absent: the export says verl has none. */
  verl?: (cfg: PolicyLossConfig, options: O) => VerlRow[];
  /** `options`: the parsed `algorithm.<name>` section (undefined without an options schema). The LossSpec's `key` must change with every value it depends on. */
  build(cfg: PolicyLossConfig, options: O): LossSpec;
}

/** A policy loss whatever its options' type (the registry's entries). */
type AnyPolicyLoss = PolicyLoss<any>;

/** Every policy loss: the built-in ones (./builtins.ts) and those registered since. */
const registry = new NamedRegistry<AnyPolicyLoss>(['registerPolicyLoss', 'a policy loss', 'algorithm.policy_loss', 'policy loss']);

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

/** The chosen loss's own options: the parsed `algorithm.<name>` section (undefined without an options schema). */
export function lossOptions(cfg: PolicyLossConfig): unknown {
  const name = cfg.algorithm.policy_loss;
  return getPolicyLoss(name).options ? (cfg.algorithm as unknown as Record<string, unknown>)[name] : undefined;
}

/** The loss named by `algorithm.policy_loss`, with its `algorithm.<name>` options. */
export function policyLoss(cfg: PolicyLossConfig): LossSpec {
  return getPolicyLoss(cfg.algorithm.policy_loss).build(cfg, lossOptions(cfg));
}
