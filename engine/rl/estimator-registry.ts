/**
 * The advantage-estimator registry, keyed by the experiment config's `algorithm.adv_estimator`.
 * An entry (one module of ./advantage/, or a config's `plugins:` file; README "Write your own
 * estimator") registers everything about itself: whether it needs a critic, its own knobs
 * (`options`: a zod object the config composes in as `algorithm.<name>`), the shared
 * `algorithm.*` keys it reads (the others are refused under it), its verl counterpart, and how it
 * computes per-token advantages (and, for GAE, the critic's return targets) for a batch. Process
 * rewards (Agent-R1) add a normalised return-to-go of the step rewards on top of any estimator.
 */
import type { z } from 'zod';
import { NamedRegistry, type KeyReads, type VerlRow } from '../base/registry';
import { processRewardReturns, type EstimatorEpisode } from './estimators';

export interface EstimatorOptions {
  /** GRPO: divide by the group std (false = Dr.GRPO behaviour). */
  normByStd: boolean;
  gamma: number;
  lam: number;
  /** β when the KL to the reference is subtracted from the reward (kl_in: reward); 0 otherwise. */
  klRewardCoef: number;
  /** Per-token KL estimate to the reference (old − ref logprob on model tokens), when β > 0. */
  klPerToken?: ArrayLike<number>[];
  /** Critic values per token (GAE). */
  values?: ArrayLike<number>[];
  /** Add Agent-R1 process-reward returns to the advantages. */
  processRewards: boolean;
}

export interface EstimatorResult {
  advantages: Float32Array[];
  /** Targets for the critic (GAE only). */
  returns?: Float32Array[];
  /** The estimator's own per-step metrics (e.g. GiGPO's step-group sizes). */
  metrics?: Record<string, number>;
}

/** The shared `algorithm.*` settings an estimator's verl rows read. */
export interface EstimatorVerlConfig {
  norm_adv_by_std: boolean;
}

export interface Estimator<O = unknown> {
  /** The config's default algorithm.adv_estimator (one entry: the built-in grpo). */
  default?: boolean;
  needsCritic: boolean;
  /** The estimator's own knobs, `algorithm.<name>` in the config (a zod object whose fields all have defaults; refused unless this estimator is chosen). */
  options?: z.ZodType<O, Record<string, unknown>>;
  /** Shared `algorithm.*` keys it reads (e.g. algorithm.gamma); a key another estimator reads and this one does not is refused under it. */
  reads?: KeyReads;
  /** The options without the estimator's step-level term, for the outcome part of the advantages reported beside them (GiGPO: step_weight 0). */
  outcomeOnly?: (options: O) => O;
  /** verl's counterpart (`arbor export verl`): rows for algorithm.adv_estimator (and keys it settles); absent: the export says verl has none. */
  verl?: (algorithm: EstimatorVerlConfig, options: O) => VerlRow[];
  /** `options`: the parsed `algorithm.<name>` section (undefined without an options schema). */
  compute(episodes: EstimatorEpisode[], o: EstimatorOptions, options: O): EstimatorResult;
}

/** An estimator whatever its options' type (the registry's entries). */
type AnyEstimator = Estimator<any>;

/** Every estimator: the built-in ones (./builtins.ts) and those registered since. */
const registry = new NamedRegistry<AnyEstimator>(['registerEstimator', 'an advantage estimator', 'algorithm.adv_estimator', 'estimator']);

/**
 * Add an advantage estimator under `name` (the config's `algorithm.adv_estimator`); its `options`
 * become `algorithm.<name>`. A name already taken is refused.
 */
export function registerEstimator<O>(name: string, estimator: Estimator<O>): void {
  registry.register(name, estimator);
}

export function estimatorNames(): string[] {
  return registry.names();
}

export function getEstimator(name: string): Estimator<unknown> {
  return registry.get(name);
}

/** Outcome rewards with the KL penalty of the whole response subtracted (KL in the reward, as verl's use_kl_in_reward). */
export function klPenalised(eps: EstimatorEpisode[], o: EstimatorOptions): EstimatorEpisode[] {
  if (!o.klRewardCoef || !o.klPerToken) return eps;
  return eps.map((e, b) => {
    let kl = 0;
    const k = o.klPerToken![b]!;
    for (let i = 0; i < e.mask.length; i++) if (e.mask[i]) kl += k[i]!;
    return { ...e, reward: e.reward - o.klRewardCoef * kl };
  });
}

/** Advantages for a batch under the named estimator (with its `algorithm.<name>` options), plus process-reward returns when enabled. */
export function computeAdvantages(name: string, episodes: EstimatorEpisode[], o: EstimatorOptions, options?: unknown): EstimatorResult {
  const res = getEstimator(name).compute(episodes, o, options);
  if (o.processRewards)
    episodes.forEach((e, b) => {
      const p = processRewardReturns(e);
      const a = res.advantages[b]!;
      for (let i = 0; i < a.length; i++) a[i]! += p[i]!;
    });
  return res;
}
