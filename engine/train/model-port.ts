/**
 * The trainer: the loop's PolicyPort / SftPort on a real transformer (engine/model PolicyModel).
 *  - score: the `score` graph's per-token logprobs and entropy (of softmax(logits / rollout.temperature),
 *    the policy that sampled), re-aligned from "position t
 *    predicts token t+1" to the episode's token index, in one call over the episodes it is given
 *    (the loop gives it pieces of the update's micro-batch: loop.ts scorePieceSize);
 *  - update: one optimizer step per mini-batch, gradients of the loss program accumulated over
 *    its micro-batches, each weighted by its share of what the loss aggregation averages over (so
 *    the accumulated gradient equals the loss over the whole mini-batch), then global-norm
 *    clipping and the optimizer step (./grad-accum.ts); the critic (PPO + GAE) is its own port
 *    (./critic-port.ts), updated on the same micro-batches;
 *  - sftUpdate: the same with the masked-NLL program, at temperature 1.
 *
 * What is computed comes from engine/rl by config name: the policy loss (`algorithm.policy_loss`,
 * engine/rl/policy-losses.ts, with the KL estimators of engine/rl/kl.ts) and the optimizer
 * (engine/rl/optimizer.ts).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { HostTensor } from '../tensor/host';
import type { Ops } from '../tensor/ops';
import type { Weights } from '../model/checkpoint';
import type { LossSpec } from '../model/graphs';
import type { PolicyModel } from '../model/runtime';
import type { CriticModel } from '../model/critic';
import { aggregationUnits, policyLoss, type PolicyLossConfig } from '../rl/policy-losses';
import { tokenSignals } from '../rl/token-signals';
import type { OptimizerPort } from '../rl/optimizer';
import { CriticPort, type CriticSettings } from './critic-port';
import type { Episode } from './episode';
import { accumulate, clipAndStep, maskedTokens, packMicroBatch, shifted } from './grad-accum';
import type { PolicyPort, UpdateStats } from './loop';
import type { Demo, SftPort } from './sft';
import { maskedNllLoss } from './sft-loss';

/** A packed [B, T] per-target array as one array per episode aligned with its tokens (position t holds the value for token t; 0 at t = 0). */
function perEpisode(packed: Float32Array, T: number, episodes: Episode[]): Float32Array[] {
  return episodes.map((e, b) => {
    const out = new Float32Array(e.tokens.length);
    for (let t = 1; t < e.tokens.length; t++) out[t] = packed[b * T + t - 1]!;
    return out;
  });
}

/** The masked-NLL SFT loss as a LossSpec for PolicyModel.trainStep. */
export const sftLossSpec: LossSpec = {
  key: 'sft-nll',
  inputs: [],
  program: <T>(o: Ops<T>, x: { logprobs: T; mask: T }) => {
    const { loss, tokens } = maskedNllLoss(o, x.logprobs, x.mask);
    return { loss, tokens };
  },
};

/** Metrics of the loss program that UpdateStats names; any other metric goes to UpdateStats.metrics. */
const NAMED_METRICS = new Set(['loss', 'tokens', 'clip_fraction', 'kl', 'entropy']);

/**
 * What the policy port reads of the experiment config: the policy loss's keys, the critic's, the
 * micro-batches an SFT step is cut into, and the rollout temperature the RL policy is scored and
 * trained at.
 */
export type PolicyPortSettings = PolicyLossConfig & CriticSettings & { algorithm: { micro_batches: number }; rollout: { temperature: number } };

export class ModelPolicyPort implements PolicyPort, SftPort {
  constructor(
    readonly model: PolicyModel,
    private readonly cfg: PolicyPortSettings,
    readonly optimizer: OptimizerPort,
    /** The policy loss; default: the one `algorithm.policy_loss` names. */
    private readonly loss: LossSpec = policyLoss(cfg),
  ) {}

  /** The PPO critic, when the estimator needs one (GAE). */
  critic?: CriticPort;

  attachCritic(model: CriticModel, optimizer: OptimizerPort): void {
    this.critic = new CriticPort(model, optimizer, this.cfg, this.model.config.padTokenId ?? 0);
  }

  /** Critic values per token (the value of the state before each token), aligned like logprobs. */
  async values(episodes: Episode[]): Promise<Float32Array[]> {
    if (!this.critic) throw new Error('algorithm.adv_estimator: this estimator needs a critic, and none is attached');
    return this.critic.values(episodes);
  }

  /**
   * The policy the rollout sampled from: softmax(logits / rollout.temperature), as verl's actor
   * (`logits.div_(temperature)`) and TRL (`logits / self.temperature`) score and train it. At
   * temperature 1 against a sampler at 0.5 the update trained another policy than the one whose
   * tokens it judged (docs/areas/train.md, "The update at the sampler's temperature").
   */
  private get temperature(): number {
    return this.cfg.rollout.temperature;
  }

  async score(episodes: Episode[], weights?: Weights): Promise<{ logprobs: Float32Array[]; entropy: Float32Array[] }> {
    const seqs = episodes.map((e) => Array.from(e.tokens));
    const r = await this.model.score(seqs, { entropy: true, weights, temperature: this.temperature });
    return { logprobs: perEpisode(r.logprobs, r.batch.length, episodes), entropy: perEpisode(r.entropy!, r.batch.length, episodes) };
  }

  /** A ScorePort on frozen weights (the reference policy for KL). */
  frozen(weights: Weights) {
    return { score: (eps: Episode[]) => this.score(eps, weights) };
  }

  private step(acc: Weights, lr: number): number {
    return clipAndStep(this.model, this.optimizer, acc, this.cfg.optim.grad_clip, lr);
  }

  async update(args: Parameters<PolicyPort['update']>[0]): Promise<UpdateStats> {
    // Micro-batch gradients are weighted by their share of what the aggregation averages over.
    const mode = this.cfg.algorithm.loss_agg_mode;
    const count = (eps: Episode[]) =>
      aggregationUnits(
        eps.map((e) => e.lossMask),
        mode,
      );
    const total = Math.max(
      1,
      args.microBatches.reduce((a, mb) => a + count(mb), 0),
    );
    const totalTokens = args.microBatches.reduce((a, mb) => a + maskedTokens(mb), 0);
    const sources: Record<string, Map<Episode, Float32Array> | undefined> = {
      advantages: args.advantages,
      old_logprobs: args.oldLogprobs,
      ref_logprobs: args.refLogprobs,
      // algorithm.tis: the sampler's own logprobs, recorded by the rollout (engine/rl/policy-losses.ts tisWeights).
      rollout_logprobs: new Map(args.microBatches.flat().map((e) => [e, e.rolloutLogprobs] as const)),
    };
    const acc: Weights = new Map();
    const st = { loss: 0, clip: 0, kl: 0, ent: 0 };
    const extra: Record<string, number> = {};
    // What the update applies per token (ratio, clip side, loss weight), when the caller says whether
    // the weights are fresh: the current log π is then the old one, else the train step's own forward
    // (its token_logprobs output: the weights before this mini-batch's gradient, no extra forward).
    const signalInputs: { e: Episode; logprobs: Float32Array | null }[] = [];
    for (const mb of args.microBatches) {
      const w = count(mb) / total;
      if (w === 0) continue;
      const { batch, mask } = packMicroBatch(mb, this.model.config.padTokenId ?? 0);
      const feeds: Record<string, HostTensor> = {};
      for (const { name } of this.loss.inputs) {
        const src = sources[name];
        if (!src) throw new Error(`policy loss "${this.loss.key}" reads "${name}", which this update was not given`);
        feeds[name] = {
          dtype: 'float32',
          shape: [batch.batch, batch.length],
          data: shifted(
            batch,
            mb.map((e) => src.get(e)!),
          ),
        };
      }
      const r = await this.model.trainStep(batch, this.loss, mask, feeds, undefined, this.temperature);
      if (args.fresh !== undefined) {
        if (!args.fresh && !r.logprobs) throw new Error('ModelPolicyPort.update: the train step returned no token_logprobs for the per-token signals');
        const current = args.fresh ? null : perEpisode(r.logprobs!, batch.length, mb);
        mb.forEach((e, b) => signalInputs.push({ e, logprobs: current ? current[b]! : null }));
      }
      accumulate(acc, r.grads, w);
      st.loss += w * r.loss;
      st.clip += w * (r.metrics.clip_fraction ?? 0);
      st.kl += w * (r.metrics.kl ?? 0);
      st.ent += w * (r.metrics.entropy ?? 0);
      for (const [k, v] of Object.entries(r.metrics)) if (!NAMED_METRICS.has(k)) extra[k] = (extra[k] ?? 0) + w * v;
    }
    const gradNorm = this.step(acc, args.lr);
    const valueLoss =
      this.critic && args.returns && args.oldValues ? await this.critic.update(args.microBatches, args.returns, args.oldValues, args.lr) : undefined;
    const stats: UpdateStats = { loss: st.loss, gradNorm, clipFraction: st.clip, kl: st.kl, entropy: st.ent, tokens: totalTokens, valueLoss };
    if (Object.keys(extra).length) stats.metrics = extra;
    const sig = tokenSignals(
      signalInputs.map(({ e, logprobs }) => ({ mask: e.lossMask, advantages: args.advantages.get(e)!, oldLogprobs: args.oldLogprobs.get(e)!, logprobs })),
      this.cfg,
    );
    if (signalInputs.length) stats.signals = new Map(signalInputs.map(({ e }, i) => [e, sig[i]!] as const));
    return stats;
  }

  async sftUpdate(batch: Demo[], lr: number): Promise<{ loss: number; gradNorm: number; tokens: number }> {
    const micro = Math.max(1, this.cfg.algorithm.micro_batches);
    const size = Math.ceil(batch.length / micro);
    const total = Math.max(1, maskedTokens(batch));
    const acc: Weights = new Map();
    let loss = 0;
    for (let i = 0; i < batch.length; i += size) {
      const mb = batch.slice(i, i + size);
      const n = maskedTokens(mb);
      if (n === 0) continue;
      const { batch: packed, mask } = packMicroBatch(mb, this.model.config.padTokenId ?? 0);
      const r = await this.model.trainStep(packed, sftLossSpec, mask);
      accumulate(acc, r.grads, n / total);
      loss += (n / total) * r.loss;
    }
    const gradNorm = this.step(acc, lr);
    return { loss, gradNorm, tokens: total };
  }

  async save(dir: string): Promise<void> {
    this.model.save(dir);
    this.optimizer.save(dir);
    this.critic?.save(dir);
  }

  async load(dir: string): Promise<void> {
    this.model.loadTrainable(dir); // the HF model's weights, or a LoRA run's PEFT adapters
    if (existsSync(join(dir, 'optimizer.json'))) this.optimizer.load(dir);
    this.critic?.load(dir);
  }
}
