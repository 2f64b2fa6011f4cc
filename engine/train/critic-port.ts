/**
 * The PPO critic (value model) as its own port: per-token values for GAE, and one update per
 * policy update on the same micro-batches (clipped value loss toward the GAE returns), with its
 * own optimizer and its own checkpoint sub-folder.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Weights } from '../model/checkpoint';
import type { CriticModel } from '../model/critic';
import { packSequences } from '../model/graphs';
import type { Ops } from '../tensor/ops';
import { clippedValueLoss } from '../rl/losses';
import type { OptimizerPort } from '../rl/optimizer';
import type { Episode } from './episode';
import { accumulate, clipAndStep, maskedTokens, packMicroBatch, shifted } from './grad-accum';

/** What the critic reads of the experiment config. */
export interface CriticSettings {
  algorithm: { value_clip: number; value_coef: number };
  optim: { grad_clip: number };
}

export class CriticPort {
  constructor(
    readonly model: CriticModel,
    readonly optimizer: OptimizerPort,
    private readonly cfg: CriticSettings,
    private readonly padTokenId: number,
  ) {}

  /** Critic values per token (the value of the state before each token), aligned like logprobs. */
  async values(episodes: Episode[]): Promise<Float32Array[]> {
    const batch = packSequences(
      episodes.map((e) => Array.from(e.tokens)),
      this.padTokenId,
    );
    const v = await this.model.values(batch);
    const T = batch.length;
    return episodes.map((e, b) => {
      const out = new Float32Array(e.tokens.length);
      for (let t = 1; t < e.tokens.length; t++) out[t] = v[b * T + t - 1]!;
      return out;
    });
  }

  /**
   * One critic update on the same micro-batches: clipped value loss toward the GAE returns,
   * scaled by `algorithm.value_coef` (the critic's gradient is value_coef · ∇L_value, before the
   * global-norm clip). Returns the unscaled value loss (logged as critic/value_loss).
   *
   * The critic is a separate network with its own AdamW, which is invariant to a constant scale
   * of the loss (up to ε), so value_coef changes the update mainly through grad_clip: a smaller
   * coefficient makes the clip bite less often.
   */
  async update(microBatches: Episode[][], returns: Map<Episode, Float32Array>, oldValues: Map<Episode, Float32Array>, lr: number): Promise<number> {
    const clip = this.cfg.algorithm.value_clip;
    const coef = this.cfg.algorithm.value_coef;
    const loss = {
      key: `value:${clip}`,
      inputs: ['returns', 'old_values'],
      program: <T>(o: Ops<T>, x: { values: T; mask: T } & Record<string, T>) =>
        clippedValueLoss(o, { values: x.values, mask: x.mask, returns: x.returns!, old_values: x.old_values! }, clip),
    };
    const total = Math.max(
      1,
      microBatches.reduce((a, mb) => a + maskedTokens(mb), 0),
    );
    const acc: Weights = new Map();
    let valueLoss = 0;
    for (const mb of microBatches) {
      const w = maskedTokens(mb) / total;
      if (w === 0) continue;
      const { batch, mask } = packMicroBatch(mb, this.padTokenId);
      const r = await this.model.trainStep(batch, loss, mask, {
        returns: shifted(
          batch,
          mb.map((e) => returns.get(e)!),
        ),
        old_values: shifted(
          batch,
          mb.map((e) => oldValues.get(e)!),
        ),
      });
      accumulate(acc, r.grads, w * coef);
      valueLoss += w * r.loss;
    }
    clipAndStep(this.model, this.optimizer, acc, this.cfg.optim.grad_clip, lr);
    return valueLoss;
  }

  /** Saved under `<checkpoint>/critic`. */
  save(dir: string): void {
    const sub = join(dir, 'critic');
    mkdirSync(sub, { recursive: true });
    this.model.save(sub);
    this.optimizer.save(sub);
  }

  /** Loads `<checkpoint>/critic` when the checkpoint has one. */
  load(dir: string): void {
    if (!existsSync(join(dir, 'critic', 'critic.safetensors'))) return;
    this.model.load(join(dir, 'critic'));
    this.optimizer.load(join(dir, 'critic'));
  }
}
