/**
 * A tabular softmax policy on a tiny sequence task, with an exact analytic PPO gradient and AdamW.
 *
 * It exists to exercise the training loop end to end in milliseconds (seeded learning, PPO
 * epochs/mini-batches/micro-batches, clipping, checkpoints, resume after kill -9) independently
 * of the transformer: a policy π(token | prompt, position) with one logit table per prompt. The
 * task: each prompt has a hidden target sequence; reward = fraction of positions right, exact
 * match when all are right. It is a real (if simple) RL problem, so "mean reward rises" is a real
 * claim about the loop's advantage and update plumbing.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ExperimentConfig } from '../../../engine/config/experiment';
import { mulberry32 } from '../../../engine/base/rng';
import type { Episode } from '../../../engine/train/episode';
import type { PolicyPort, RolloutPort, UpdateStats } from '../../../engine/train/loop';
import type { Demo, SftPort } from '../../../engine/train/sft';
import type { DecodeBackend, EpisodeEnv, RolloutTask, TokenizerPort } from '../../../engine/rollout/ports';
import type { TaskSession } from '../../../engine/run/run-dir';
import { advantagePort } from '../../../engine/train/advantage';
import { testEpisode } from './episode-fixture';

export interface TabularTaskSpec {
  prompts: number;
  length: number;
  vocab: number;
  seed: number;
}

export function tabularTargets(spec: TabularTaskSpec): number[][] {
  const r = mulberry32(spec.seed ^ 0x5eed);
  return Array.from({ length: spec.prompts }, () => Array.from({ length: spec.length }, () => Math.floor(r() * spec.vocab)));
}

export class TabularPolicy implements PolicyPort, RolloutPort, SftPort {
  /** logits[prompt][pos * vocab + token] */
  logits: Float64Array[];
  private m: Float64Array[];
  private v: Float64Array[];
  private t = 0;
  readonly targets: number[][];

  constructor(
    readonly spec: TabularTaskSpec,
    private readonly cfg: ExperimentConfig,
  ) {
    this.targets = tabularTargets(spec);
    const size = spec.length * spec.vocab;
    this.logits = Array.from({ length: spec.prompts }, () => new Float64Array(size));
    this.m = Array.from({ length: spec.prompts }, () => new Float64Array(size));
    this.v = Array.from({ length: spec.prompts }, () => new Float64Array(size));
  }

  private probs(p: number, pos: number): Float64Array {
    const { vocab } = this.spec;
    const row = this.logits[p]!.subarray(pos * vocab, (pos + 1) * vocab);
    const mx = Math.max(...row);
    const e = row.map((x) => Math.exp(x - mx));
    const s = e.reduce((a, b) => a + b, 0);
    return e.map((x) => x / s);
  }

  async sample(args: { step: number; seed: number; prompts: number; n: number }): Promise<Episode[]> {
    const r = mulberry32(args.seed);
    const { length, vocab, prompts } = this.spec;
    const out: Episode[] = [];
    for (let g = 0; g < args.prompts; g++) {
      const p = Math.floor(r() * prompts);
      for (let s = 0; s < args.n; s++) {
        const tokens = new Int32Array(length + 1);
        const lp = new Float32Array(length + 1);
        const ent = new Float32Array(length + 1);
        const mask = new Uint8Array(length + 1);
        tokens[0] = vocab + p; // the prompt token
        let right = 0;
        for (let pos = 0; pos < length; pos++) {
          const pr = this.probs(p, pos);
          let u = r();
          let a = 0;
          while (a < vocab - 1 && u >= pr[a]!) u -= pr[a++]!;
          tokens[pos + 1] = a;
          lp[pos + 1] = Math.log(pr[a]!);
          ent[pos + 1] = -pr.reduce((acc, q) => acc + (q > 0 ? q * Math.log(q) : 0), 0);
          mask[pos + 1] = 1;
          if (a === this.targets[p]![pos]) right++;
        }
        out.push(
          testEpisode(tokens, mask, {
            group: g,
            sample: s,
            taskId: `prompt-${p}`,
            rolloutLogprobs: lp,
            entropy: ent,
            reward: right / length,
            rewardComponents: { partial: right / length },
            exactMatch: right === length,
          }),
        );
      }
    }
    return out;
  }

  async score(episodes: Episode[]): Promise<{ logprobs: Float32Array[]; entropy: Float32Array[] }> {
    const logprobs: Float32Array[] = [];
    const entropy: Float32Array[] = [];
    for (const e of episodes) {
      const p = e.tokens[0]! - this.spec.vocab;
      const lp = new Float32Array(e.tokens.length);
      const en = new Float32Array(e.tokens.length);
      for (let pos = 0; pos < this.spec.length; pos++) {
        const pr = this.probs(p, pos);
        lp[pos + 1] = Math.log(pr[e.tokens[pos + 1]!]!);
        en[pos + 1] = -pr.reduce((acc, q) => acc + (q > 0 ? q * Math.log(q) : 0), 0);
      }
      logprobs.push(lp);
      entropy.push(en);
    }
    return { logprobs, entropy };
  }

  /** PPO-clip (low/high, token-mean over the mini-batch) with an exact gradient, then AdamW. */
  async update(args: Parameters<PolicyPort['update']>[0]): Promise<UpdateStats> {
    const { vocab, length } = this.spec;
    const alg = this.cfg.algorithm;
    const grads = this.logits.map((l) => new Float64Array(l.length));
    let tokens = 0;
    for (const mb of args.microBatches) for (const e of mb) for (let i = 0; i < e.lossMask.length; i++) tokens += e.lossMask[i]!;
    let loss = 0;
    let clipped = 0;
    let kl = 0;
    let ent = 0;
    for (const mb of args.microBatches) {
      for (const e of mb) {
        const p = e.tokens[0]! - vocab;
        const adv = args.advantages.get(e)!;
        const old = args.oldLogprobs.get(e)!;
        for (let pos = 0; pos < length; pos++) {
          const i = pos + 1;
          const a = e.tokens[i]!;
          const pr = this.probs(p, pos);
          const lp = Math.log(pr[a]!);
          const ratio = Math.exp(lp - old[i]!);
          const A = adv[i]!;
          const unclipped = ratio * A;
          const clippedRatio = Math.min(Math.max(ratio, 1 - alg.clip_ratio_low), 1 + alg.clip_ratio_high);
          const clippedObj = clippedRatio * A;
          const useClipped = clippedObj < unclipped;
          loss += -Math.min(unclipped, clippedObj) / tokens;
          if (useClipped) clipped++;
          kl += (old[i]! - lp) / tokens;
          ent += -pr.reduce((acc, q) => acc + (q > 0 ? q * Math.log(q) : 0), 0) / tokens;
          if (useClipped) continue; // the clipped branch is constant in θ
          const dLdlp = (-ratio * A) / tokens; // d(-ρA)/d log π = -ρA
          const g = grads[p]!;
          for (let k = 0; k < vocab; k++) g[pos * vocab + k] += dLdlp * ((k === a ? 1 : 0) - pr[k]!);
        }
      }
    }
    const gradNorm = this.adamStep(grads, args.lr);
    return { loss, gradNorm, clipFraction: tokens ? clipped / tokens : 0, kl, entropy: ent, tokens };
  }

  /** Masked cross-entropy on demonstrations (SFT), token-mean, then AdamW. */
  async sftUpdate(batch: Demo[], lr: number): Promise<{ loss: number; gradNorm: number; tokens: number; accuracy: number }> {
    const { vocab } = this.spec;
    const grads = this.logits.map((l) => new Float64Array(l.length));
    let tokens = 0;
    for (const d of batch) for (let i = 0; i < d.lossMask.length; i++) tokens += d.lossMask[i]!;
    let loss = 0;
    let right = 0;
    for (const d of batch) {
      const p = d.tokens[0]! - vocab;
      for (let i = 1; i < d.tokens.length; i++) {
        if (!d.lossMask[i]) continue;
        const pos = i - 1;
        const a = d.tokens[i]!;
        const pr = this.probs(p, pos);
        loss += -Math.log(pr[a]!) / tokens;
        if (pr.indexOf(Math.max(...pr)) === a) right++;
        const g = grads[p]!;
        for (let k = 0; k < vocab; k++) g[pos * vocab + k] += (pr[k]! - (k === a ? 1 : 0)) / tokens;
      }
    }
    const gradNorm = this.adamStep(grads, lr);
    return { loss, gradNorm, tokens, accuracy: tokens ? right / tokens : 0 };
  }

  /** Global-norm clipping, then one AdamW step; returns the norm before clipping. */
  private adamStep(grads: Float64Array[], lr: number): number {
    let sq = 0;
    for (const g of grads) for (const x of g) sq += x * x;
    const gradNorm = Math.sqrt(sq);
    const o = this.cfg.optim;
    const scale = o.grad_clip > 0 && gradNorm > o.grad_clip ? o.grad_clip / gradNorm : 1;
    this.t++;
    const bc1 = 1 - o.beta1 ** this.t;
    const bc2 = 1 - o.beta2 ** this.t;
    for (let p = 0; p < grads.length; p++) {
      const w = this.logits[p]!;
      const g = grads[p]!;
      const m = this.m[p]!;
      const v = this.v[p]!;
      for (let k = 0; k < w.length; k++) {
        const gk = g[k]! * scale;
        m[k] = o.beta1 * m[k]! + (1 - o.beta1) * gk;
        v[k] = o.beta2 * v[k]! + (1 - o.beta2) * gk * gk;
        w[k] = w[k]! - lr * (m[k]! / bc1 / (Math.sqrt(v[k]! / bc2) + 1e-8) + o.weight_decay * w[k]!);
      }
    }
    return gradNorm;
  }

  /** Demonstrations of the task: the target sequence, or with probability `mistakeRate` a wrong token at one position. */
  demos(n: number, mistakeRate: number, seed: number): Demo[] {
    const r = mulberry32(seed);
    const { vocab, prompts, length } = this.spec;
    return Array.from({ length: n }, () => {
      const p = Math.floor(r() * prompts);
      const seq = this.targets[p]!.slice();
      if (r() < mistakeRate) seq[Math.floor(r() * length)] = Math.floor(r() * vocab);
      return { tokens: Int32Array.from([vocab + p, ...seq]), lossMask: Uint8Array.from([0, ...seq.map(() => 1)]) };
    });
  }

  async save(dir: string): Promise<void> {
    const dump = (xs: Float64Array[]) => xs.map((x) => Array.from(x));
    writeFileSync(
      join(dir, 'tabular_policy.json'),
      JSON.stringify({ spec: this.spec, t: this.t, logits: dump(this.logits), m: dump(this.m), v: dump(this.v) }),
    );
  }

  async load(dir: string): Promise<void> {
    const file = join(dir, 'tabular_policy.json');
    if (!existsSync(file)) throw new Error(`checkpoint ${dir} has no tabular_policy.json`);
    const s = JSON.parse(readFileSync(file, 'utf8')) as { t: number; logits: number[][]; m: number[][]; v: number[][] };
    this.t = s.t;
    this.logits = s.logits.map((x) => Float64Array.from(x));
    this.m = s.m.map((x) => Float64Array.from(x));
    this.v = s.v.map((x) => Float64Array.from(x));
  }
}

/**
 * The tabular policy as a rollout-engine decoder: a slot's "cache" is its token list; the next
 * token's logits are the table row of (prompt, position). Prompt-token ids get −1e9 so they are
 * never sampled. Lets tests drive engine/rollout and the loop together.
 */
export function tabularDecodeBackend(policy: TabularPolicy, maxBatch: number): DecodeBackend {
  const { vocab, prompts, length } = policy.spec;
  const seqs: number[][] = Array.from({ length: maxBatch }, () => []);
  return {
    vocabSize: vocab + prompts,
    maxBatch,
    maxLength: length + 1,
    async extend(items) {
      return items.map(({ slot, tokens }) => {
        const s = seqs[slot]!;
        s.push(...tokens);
        const p = s[0]! - vocab;
        const pos = Math.min(s.length - 1, length - 1);
        const out = new Float32Array(vocab + prompts).fill(-1e9);
        out.set(policy.logits[p]!.subarray(pos * vocab, (pos + 1) * vocab));
        return out;
      });
    },
    release(slot) {
      seqs[slot] = [];
    },
  };
}

/** One rollout task per prompt: a single model turn of `length` tokens, reward = fraction right. */
export function tabularTasks(policy: TabularPolicy): RolloutTask[] {
  return sequenceTasks(policy.targets, policy.spec.vocab);
}

/**
 * The sequence-recall task for any policy: prompt = one token (vocab + p), the model writes one
 * turn; reward = fraction of positions equal to target p; exact match when all are.
 */
export function sequenceTasks(targets: number[][], vocab: number): RolloutTask[] {
  return targets.map((target, p) => ({
    id: `prompt-${p}`,
    createEnv(): EpisodeEnv {
      let answer: number[] = [];
      return {
        async prompt() {
          return { ids: [vocab + p] };
        },
        async step(turn) {
          answer = turn.tokenIds;
          return { done: true };
        },
        async outcome() {
          const right = target.filter((t, i) => answer[i] === t).length / target.length;
          return { reward: right, components: { partial: right }, exactMatch: right === 1, formatOk: answer.length === target.length };
        },
      };
    },
  }));
}

export const tabularTokenizer: TokenizerPort = {
  encode: (text) => text.split(' ').filter(Boolean).map(Number),
  decode: (ids) => ids.join(' '),
};

/**
 * A TaskSession over a TabularPolicy (the runner's tests): its rollouts, SFT demonstrations (120,
 * mistake rate 0.2, seed 3) and a held-out evaluation of n sampled prompts (seed 12345).
 */
export function tabularSession(policy: TabularPolicy, cfg: ExperimentConfig): TaskSession {
  const evaluate = async (n: number) => {
    const eps = await policy.sample({ step: 0, seed: 12345, prompts: n, n: 1 });
    const em = eps.filter((e) => e.exactMatch).length / eps.length;
    return { n, exactMatch: em, exactMatchByHops: { 1: em }, formatRate: 1, toolCallsPerEpisode: 0, toolErrorsPerEpisode: 0 };
  };
  return {
    ports: { rollout: policy, policy, advantage: advantagePort(cfg) },
    sft: policy,
    demos: async () => policy.demos(120, 0.2, 3),
    evaluate,
    loadPolicy: (dir) => policy.load(dir),
    close: async () => {},
  };
}
