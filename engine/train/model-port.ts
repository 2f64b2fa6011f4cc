/**
 * The loop's PolicyPort / SftPort on a real transformer (engine/model PolicyModel):
 *  - score: the `score` graph's per-token logprobs and entropy, re-aligned from "position t
 *    predicts token t+1" to the episode's token index;
 *  - update: one optimizer step per mini-batch, gradients of the loss program accumulated over
 *    its micro-batches, each weighted by its share of the mini-batch's model tokens (so the
 *    accumulated gradient equals the token-mean over the whole mini-batch), then global-norm
 *    clipping and AdamW;
 *  - sftUpdate: the same with the masked-NLL program.
 *
 * The policy loss program and the optimizer are injected (engine/rl provides them by config
 * name); `ppoClipLoss` and `AdamW` below are the loop's own defaults.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HostTensor } from '../tensor/host';
import type { Ops } from '../tensor/ops';
import type { Weights } from '../model/checkpoint';
import { packSequences, type LossSpec, type PackedBatch } from '../model/graphs';
import type { PolicyModel } from '../model/runtime';
import type { ExperimentConfig } from './config';
import type { Episode } from './episode';
import type { PolicyPort, UpdateStats } from './loop';
import type { Demo, SftPort } from './sft';
import { maskedNllLoss } from './sft-loss';
import type { CriticModel } from '../model/critic';
import { clippedValueLoss } from '../rl/losses';

/**
 * Loss aggregation over a [batch, seq] matrix of per-token losses (algorithms.md):
 * token-mean (every model token of the batch weighs the same), seq-mean-token-mean (mean per
 * sequence, then over sequences with model tokens: original GRPO), seq-mean-token-sum (sum per
 * sequence, mean over sequences), seq-mean-token-sum-norm (token sum / (max length · sequences):
 * Dr.GRPO, `maxLength` = rollout.max_total_length, a constant).
 */
export function aggregateLoss<T>(o: Ops<T>, v: T, mask: T, mode: ExperimentConfig['algorithm']['loss_agg_mode'], maxLength: number): T {
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
export function aggregationUnits(lossMasks: ArrayLike<number>[], mode: ExperimentConfig['algorithm']['loss_agg_mode']): number {
  let n = 0;
  for (const m of lossMasks) {
    let c = 0;
    for (let i = 0; i < m.length; i++) c += m[i]!;
    n += mode === 'token-mean' ? c : c > 0 ? 1 : 0;
  }
  return n;
}

/** PPO-clip (ε_low / ε_high, optional dual clip), KL to the reference in the loss (k1/k3), entropy bonus; aggregated by `loss_agg_mode`. */
export function ppoClipLoss(cfg: ExperimentConfig): LossSpec {
  const a = cfg.algorithm;
  const useKl = a.kl_coef > 0 && a.kl_in === 'loss';
  const seq = { dtype: 'float32' as const, shape: ['batch', 'seq'] };
  return {
    key: `ppo:${a.clip_ratio_low}:${a.clip_ratio_high}:${a.dual_clip}:${useKl ? a.kl_type + a.kl_coef : 'nokl'}:${a.entropy_coef}:${a.loss_agg_mode}:${cfg.rollout.max_total_length}`,
    inputs: [
      { name: 'advantages', ...seq },
      { name: 'old_logprobs', ...seq },
      ...(useKl ? [{ name: 'ref_logprobs', ...seq }] : []),
    ],
    entropy: true,
    program: <T>(o: Ops<T>, x: { logprobs: T; entropy?: T; mask: T } & Record<string, T>) => {
      const s = (v: number) => o.scalar(v);
      const mask = x.mask;
      const tokens = o.maximum(o.sum(mask, [0, 1]), s(1));
      const tmean = (v: T) => o.div(o.sum(o.mul(v, mask), [0, 1]), tokens);
      const agg = (v: T) => aggregateLoss(o, v, mask, a.loss_agg_mode, cfg.rollout.max_total_length);
      const logRatio = o.sub(x.logprobs, x.old_logprobs!);
      const ratio = o.exp(logRatio);
      const adv = x.advantages!;
      const pg1 = o.mul(o.neg(adv), ratio);
      const clipped = o.minimum(o.maximum(ratio, s(1 - a.clip_ratio_low)), s(1 + a.clip_ratio_high));
      const pg2 = o.mul(o.neg(adv), clipped);
      let pg = o.maximum(pg1, pg2);
      if (a.dual_clip !== null) {
        const capped = o.minimum(pg, o.mul(o.neg(adv), s(a.dual_clip)));
        pg = o.where(o.less(adv, s(0)), capped, pg);
      }
      const clipFrac = tmean(o.cast(o.greater(pg2, pg1), 'float32'));
      let loss = agg(pg);
      const out: Record<string, T> = {};
      if (useKl) {
        const d = o.sub(x.ref_logprobs!, x.logprobs); // log(π_ref/π)
        const kl = a.kl_type === 'k1' ? o.neg(d) : o.sub(o.sub(o.exp(d), d), s(1));
        loss = o.add(loss, o.mul(s(a.kl_coef), agg(kl)));
        out.kl = tmean(kl);
      } else out.kl = tmean(o.neg(logRatio)); // approx KL(old‖new), k1
      const ent = tmean(x.entropy!);
      if (a.entropy_coef !== 0) loss = o.sub(loss, o.mul(s(a.entropy_coef), agg(x.entropy!)));
      return { ...out, loss, clip_fraction: clipFrac, entropy: ent, tokens };
    },
  };
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

export interface OptimizerPort {
  /** Apply one update in place; `grads` are already clipped. */
  step(weights: Weights, grads: Weights, lr: number): void;
  save(dir: string): void;
  load(dir: string): void;
}

/** AdamW (decoupled weight decay), bias-corrected; state saved as JSON-free binary per tensor. */
export class AdamW implements OptimizerPort {
  private m = new Map<string, Float32Array>();
  private v = new Map<string, Float32Array>();
  private t = 0;
  constructor(private readonly o: { beta1: number; beta2: number; weight_decay: number; eps?: number }) {}
  step(weights: Weights, grads: Weights, lr: number): void {
    this.t++;
    const { beta1: b1, beta2: b2, weight_decay: wd } = this.o;
    const eps = this.o.eps ?? 1e-8;
    const c1 = 1 - b1 ** this.t;
    const c2 = 1 - b2 ** this.t;
    for (const [name, g] of grads) {
      const w = weights.get(name)!;
      let m = this.m.get(name);
      let v = this.v.get(name);
      if (!m || !v) {
        m = new Float32Array(w.length);
        v = new Float32Array(w.length);
        this.m.set(name, m);
        this.v.set(name, v);
      }
      // w ← w − lr·(m̂ / (√v̂ + ε) + wd·w), with m̂ = m/c1 and √v̂ = √v/√c2 folded into constants
      // (one pass, no divisions but the one per element).
      const a1 = 1 - b1, a2 = 1 - b2, decay = 1 - lr * wd, step = lr / c1, rc2 = 1 / Math.sqrt(c2);
      for (let i = 0; i < w.length; i++) {
        const gi = g[i]!;
        const mi = b1 * m[i]! + a1 * gi;
        const vi = b2 * v[i]! + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] = w[i]! * decay - (step * mi) / (Math.sqrt(vi) * rc2 + eps);
      }
    }
  }
  save(dir: string): void {
    const names = [...this.m.keys()];
    const parts: Float32Array[] = [];
    for (const n of names) parts.push(this.m.get(n)!, this.v.get(n)!);
    const total = parts.reduce((a, p) => a + p.length, 0);
    const buf = new Float32Array(total);
    let off = 0;
    for (const p of parts) {
      buf.set(p, off);
      off += p.length;
    }
    writeFileSync(join(dir, 'optimizer.bin'), Buffer.from(buf.buffer));
    writeFileSync(join(dir, 'optimizer.json'), JSON.stringify({ t: this.t, tensors: names.map((n) => [n, this.m.get(n)!.length]) }));
  }
  load(dir: string): void {
    const meta = join(dir, 'optimizer.json');
    if (!existsSync(meta)) throw new Error(`checkpoint ${dir}: optimizer.json missing`);
    const { t, tensors } = JSON.parse(readFileSync(meta, 'utf8')) as { t: number; tensors: [string, number][] };
    const raw = readFileSync(join(dir, 'optimizer.bin'));
    const buf = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
    this.t = t;
    this.m.clear();
    this.v.clear();
    let off = 0;
    for (const [n, len] of tensors) {
      this.m.set(n, buf.slice(off, off + len));
      off += len;
      this.v.set(n, buf.slice(off, off + len));
      off += len;
    }
  }
}

/** Per-episode arrays (indexed by token) → [B, T] feed aligned to "position t predicts token t+1". */
function shifted(batch: PackedBatch, rows: ArrayLike<number>[]): Float32Array {
  const T = batch.length;
  const out = new Float32Array(batch.batch * T);
  rows.forEach((r, b) => {
    for (let t = 0; t < T && t + 1 < r.length; t++) out[b * T + t] = r[t + 1]!;
  });
  return out;
}

function globalNorm(g: Weights): number {
  let s = 0;
  for (const v of g.values()) for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!;
  return Math.sqrt(s);
}

export class ModelPolicyPort implements PolicyPort, SftPort {
  constructor(
    readonly model: PolicyModel,
    private readonly cfg: ExperimentConfig,
    readonly optimizer: OptimizerPort,
    private readonly loss: LossSpec = ppoClipLoss(cfg),
    /** Weights to score with (e.g. a frozen reference); default: the live weights. */
    private readonly tokenizerFolder?: string,
  ) {}

  /** The PPO critic (value model) and its optimizer, when the estimator needs one (GAE). */
  private critic?: { model: CriticModel; optimizer: AdamW };

  attachCritic(model: CriticModel, optimizer: AdamW): void {
    this.critic = { model, optimizer };
  }

  /** Critic values per token (the value of the state before each token), aligned like logprobs. */
  async values(episodes: Episode[]): Promise<Float32Array[]> {
    if (!this.critic) throw new Error('algorithm.adv_estimator: this estimator needs a critic, and none is attached');
    const batch = packSequences(episodes.map((e) => Array.from(e.tokens)), this.model.config.padTokenId ?? 0);
    const v = await this.critic.model.values(batch);
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
  private async updateCritic(microBatches: Episode[][], returns: Map<Episode, Float32Array>, oldValues: Map<Episode, Float32Array>, lr: number): Promise<number> {
    const critic = this.critic!;
    const clip = this.cfg.algorithm.value_clip;
    const coef = this.cfg.algorithm.value_coef;
    const loss = { key: `value:${clip}`, inputs: ['returns', 'old_values'], program: <T>(o: Ops<T>, x: { values: T; mask: T } & Record<string, T>) => clippedValueLoss(o, { values: x.values, mask: x.mask, returns: x.returns!, old_values: x.old_values! }, clip) };
    const tokens = (eps: Episode[]) => eps.reduce((a, e) => a + e.lossMask.reduce((x, y) => x + y, 0), 0);
    const total = Math.max(1, microBatches.reduce((a, mb) => a + tokens(mb), 0));
    const acc: Weights = new Map();
    let valueLoss = 0;
    for (const mb of microBatches) {
      const w = tokens(mb) / total;
      if (w === 0) continue;
      const batch = packSequences(mb.map((e) => Array.from(e.tokens)), this.model.config.padTokenId ?? 0);
      const r = await critic.model.trainStep(batch, loss, shifted(batch, mb.map((e) => e.lossMask)), {
        returns: shifted(batch, mb.map((e) => returns.get(e)!)),
        old_values: shifted(batch, mb.map((e) => oldValues.get(e)!)),
      });
      this.accumulate(acc, r.grads, w * coef);
      valueLoss += w * r.loss;
    }
    const norm = globalNorm(acc);
    const clipNorm = this.cfg.optim.grad_clip;
    if (clipNorm > 0 && norm > clipNorm) for (const g of acc.values()) for (let i = 0; i < g.length; i++) g[i]! *= clipNorm / norm;
    critic.optimizer.step(critic.model.weights, acc, lr);
    critic.model.markWeightsUpdated();
    return valueLoss;
  }

  async score(episodes: Episode[], weights?: Weights): Promise<{ logprobs: Float32Array[]; entropy: Float32Array[] }> {
    const seqs = episodes.map((e) => Array.from(e.tokens));
    const r = await this.model.score(seqs, { entropy: true, weights });
    const T = r.batch.length;
    const logprobs: Float32Array[] = [];
    const entropy: Float32Array[] = [];
    episodes.forEach((e, b) => {
      const lp = new Float32Array(e.tokens.length);
      const en = new Float32Array(e.tokens.length);
      for (let t = 1; t < e.tokens.length; t++) {
        lp[t] = r.logprobs[b * T + t - 1]!;
        en[t] = r.entropy![b * T + t - 1]!;
      }
      logprobs.push(lp);
      entropy.push(en);
    });
    return { logprobs, entropy };
  }

  /** A ScorePort on frozen weights (the reference policy for KL). */
  frozen(weights: Weights) {
    return { score: (eps: Episode[]) => this.score(eps, weights) };
  }

  private applyUpdate(acc: Weights, lr: number): number {
    const norm = globalNorm(acc);
    const clip = this.cfg.optim.grad_clip;
    if (clip > 0 && norm > clip) {
      const s = clip / norm;
      for (const g of acc.values()) for (let i = 0; i < g.length; i++) g[i]! *= s;
    }
    this.optimizer.step(this.model.weights, acc, lr);
    this.model.markWeightsUpdated();
    return norm;
  }

  private accumulate(acc: Weights, grads: Weights, w: number): void {
    for (const [k, g] of grads) {
      let a = acc.get(k);
      if (!a) {
        a = new Float32Array(g.length);
        acc.set(k, a);
      }
      for (let i = 0; i < g.length; i++) a[i]! += w * g[i]!;
    }
  }

  async update(args: Parameters<PolicyPort['update']>[0]): Promise<UpdateStats> {
    const tokens = (eps: Episode[]) => eps.reduce((a, e) => a + e.lossMask.reduce((x, y) => x + y, 0), 0);
    // Micro-batch gradients are weighted by their share of what the aggregation averages over.
    const mode = this.cfg.algorithm.loss_agg_mode;
    const count = (eps: Episode[]) => aggregationUnits(eps.map((e) => e.lossMask), mode);
    const total = Math.max(1, args.microBatches.reduce((a, mb) => a + count(mb), 0));
    const totalTokens = args.microBatches.reduce((a, mb) => a + tokens(mb), 0);
    const acc: Weights = new Map();
    const st = { loss: 0, clip: 0, kl: 0, ent: 0 };
    for (const mb of args.microBatches) {
      const w = count(mb) / total;
      if (w === 0) continue;
      const batch = packSequences(mb.map((e) => Array.from(e.tokens)), this.model.config.padTokenId ?? 0);
      const f = (rows: ArrayLike<number>[]): HostTensor => ({ dtype: 'float32', shape: [batch.batch, batch.length], data: shifted(batch, rows) });
      const feeds: Record<string, HostTensor> = {
        advantages: f(mb.map((e) => args.advantages.get(e)!)),
        old_logprobs: f(mb.map((e) => args.oldLogprobs.get(e)!)),
      };
      if (this.loss.inputs.some((i) => i.name === 'ref_logprobs')) feeds.ref_logprobs = f(mb.map((e) => args.refLogprobs!.get(e)!));
      const mask = shifted(batch, mb.map((e) => e.lossMask));
      const r = await this.model.trainStep(batch, this.loss, mask, feeds);
      this.accumulate(acc, r.grads, w);
      st.loss += w * r.loss;
      st.clip += w * (r.metrics.clip_fraction ?? 0);
      st.kl += w * (r.metrics.kl ?? 0);
      st.ent += w * (r.metrics.entropy ?? 0);
    }
    const gradNorm = this.applyUpdate(acc, args.lr);
    const valueLoss = this.critic && args.returns && args.oldValues ? await this.updateCritic(args.microBatches, args.returns, args.oldValues, args.lr) : undefined;
    return { loss: st.loss, gradNorm, clipFraction: st.clip, kl: st.kl, entropy: st.ent, tokens: totalTokens, valueLoss };
  }

  async sftUpdate(batch: Demo[], lr: number): Promise<{ loss: number; gradNorm: number; tokens: number }> {
    const micro = Math.max(1, this.cfg.algorithm.micro_batches);
    const size = Math.ceil(batch.length / micro);
    const total = Math.max(1, batch.reduce((a, d) => a + d.lossMask.reduce((x, y) => x + y, 0), 0));
    const acc: Weights = new Map();
    let loss = 0;
    for (let i = 0; i < batch.length; i += size) {
      const mb = batch.slice(i, i + size);
      const n = mb.reduce((a, d) => a + d.lossMask.reduce((x, y) => x + y, 0), 0);
      if (n === 0) continue;
      const packed = packSequences(mb.map((d) => Array.from(d.tokens)), this.model.config.padTokenId ?? 0);
      const r = await this.model.trainStep(packed, sftLossSpec, shifted(packed, mb.map((d) => d.lossMask)));
      this.accumulate(acc, r.grads, n / total);
      loss += (n / total) * r.loss;
    }
    const gradNorm = this.applyUpdate(acc, lr);
    return { loss, gradNorm, tokens: total };
  }

  async save(dir: string): Promise<void> {
    this.model.save(dir);
    this.optimizer.save(dir);
    if (this.critic) {
      const sub = join(dir, 'critic');
      mkdirSync(sub, { recursive: true });
      this.critic.model.save(sub);
      this.critic.optimizer.save(sub);
    }
  }

  async load(dir: string): Promise<void> {
    this.model.loadTrainable(dir); // the HF model's weights, or a LoRA run's PEFT adapters
    if (existsSync(join(dir, 'optimizer.json'))) this.optimizer.load(dir);
    if (this.critic && existsSync(join(dir, 'critic', 'critic.safetensors'))) {
      this.critic.model.load(join(dir, 'critic'));
      this.critic.optimizer.load(join(dir, 'critic'));
    }
    void this.tokenizerFolder;
  }
}
