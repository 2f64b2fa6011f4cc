// The policy update of ModelPolicyPort (engine/train/model-port.ts): global-norm gradient
// clipping (hand-computed, on a stub model whose gradients are fixed numbers) and micro-batch
// gradient accumulation (on the real tiny transformer: one batch of N gives the same gradient
// as k micro-batches, under every loss aggregation mode, and for SFT).
import { afterAll, describe, expect, it } from 'vitest';
import type { Weights } from '../../../engine/model/checkpoint';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { LOSS_AGG_MODES, validateConfig } from '../../../engine/config/experiment';
import { mulberry32 } from '../../../engine/base/rng';
import type { Episode } from '../../../engine/train/episode';
import type { OptimizerPort } from '../../../engine/rl/optimizer';
import { ModelPolicyPort } from '../../../engine/train/model-port';
import { testEpisode } from './episode-fixture';

/** An optimizer that keeps the gradient it is given (after clipping) and leaves the weights alone. */
class RecordingOptimizer implements OptimizerPort {
  grads?: Map<string, Float32Array>;
  step(_w: Weights, grads: Weights): void {
    this.grads = new Map([...grads].map(([k, g]) => [k, g.slice()]));
  }
  save(): void {}
  load(): void {}
}

const episode = (tokens: number[], mask: number[]): Episode => testEpisode(tokens, mask);

const cfgWith = (algorithm: Record<string, unknown>, optim: Record<string, unknown>) =>
  validateConfig({ model: { init: 'tiny' }, rollout: { max_new_tokens: 6, max_total_length: 10 }, algorithm, optim });

describe('gradient clipping (global norm), hand-computed', () => {
  /** A model stub: each trainStep call returns the next fixed gradient. */
  function stub(grads: [number[], number[]][]) {
    let call = 0;
    return {
      config: { padTokenId: 0 },
      weights: new Map([
        ['a', new Float32Array(2)],
        ['b', new Float32Array(1)],
      ]),
      markWeightsUpdated() {},
      async trainStep() {
        const [a, b] = grads[call++]!;
        return {
          loss: 1,
          metrics: {},
          grads: new Map([
            ['a', Float32Array.from(a)],
            ['b', Float32Array.from(b)],
          ]),
        };
      },
    } as unknown as PolicyModel;
  }
  const eps = (n: number, tokens: number) =>
    Array.from({ length: n }, () => episode([1, 2, 3, 4], [0, ...Array(tokens).fill(1), ...Array(3 - tokens).fill(0)]));
  async function update(gradClip: number, grads: [number[], number[]][], microBatches: Episode[][]) {
    const opt = new RecordingOptimizer();
    const port = new ModelPolicyPort(stub(grads), cfgWith({}, { grad_clip: gradClip }), opt);
    const all = microBatches.flat();
    const zeros = new Map(all.map((e) => [e, new Float32Array(e.tokens.length)] as const));
    const s = await port.update({ microBatches, advantages: zeros, oldLogprobs: zeros, lr: 0.1 });
    return { norm: s.gradNorm, a: [...opt.grads!.get('a')!], b: [...opt.grads!.get('b')!] };
  }

  it('scales every gradient by clip / ‖g‖ when the global norm exceeds grad_clip, and reports the norm before clipping', async () => {
    // g = (a: [3, 0], b: [4]) → ‖g‖ = 5.
    const r = await update(1, [[[3, 0], [4]]], [eps(1, 3)]);
    expect(r.norm).toBeCloseTo(5, 6);
    expect(r.a[0]).toBeCloseTo(0.6, 6);
    expect(r.a[1]).toBe(0);
    expect(r.b[0]).toBeCloseTo(0.8, 6);
    // 2.5 < 5: clipped to norm 2.5.
    const h = await update(2.5, [[[3, 0], [4]]], [eps(1, 3)]);
    expect(h.a[0]).toBeCloseTo(1.5, 6);
    expect(h.b[0]).toBeCloseTo(2, 6);
  });

  it('leaves the gradient alone below grad_clip, and when grad_clip is 0', async () => {
    for (const clip of [10, 0]) {
      const r = await update(clip, [[[3, 0], [4]]], [eps(1, 3)]);
      expect(r.norm).toBeCloseTo(5, 6);
      expect(r.a).toEqual([3, 0]);
      expect(r.b).toEqual([4]);
    }
  });

  it('clips the accumulated gradient of all micro-batches, not each one', async () => {
    // token-mean: micro-batch 1 has 2 model tokens, micro-batch 2 has 1 → weights 2/3 and 1/3.
    // g = 2/3·(a [3, 0], b [0]) + 1/3·(a [0, 0], b [12]) = (a [2, 0], b [4]); ‖g‖ = √20.
    // (Clipping each micro-batch to 1 first would give a [2/3, 0], b [1/3].)
    const r = await update(
      1,
      [
        [[3, 0], [0]],
        [[0, 0], [12]],
      ],
      [eps(1, 2), eps(1, 1)],
    );
    expect(r.norm).toBeCloseTo(Math.sqrt(20), 5);
    expect(r.a[0]).toBeCloseTo(2 / Math.sqrt(20), 6);
    expect(r.b[0]).toBeCloseTo(4 / Math.sqrt(20), 6);
  });
});

describe('micro-batch gradient accumulation on the tiny transformer', () => {
  const VOCAB = 12;
  const model = PolicyModel.init(tinyConfig({ vocabSize: VOCAB, hiddenSize: 16, layers: 1, heads: 2, maxPositionEmbeddings: 12 }), 3, { threads: 1 });
  afterAll(() => model.dispose());

  // Different lengths (so micro-batches pad differently), a tool observation inside one, and
  // different numbers of model tokens per sequence (so token and sequence weights differ).
  const r = mulberry32(9);
  const seq = (n: number) => Array.from({ length: n }, () => 1 + Math.floor(r() * (VOCAB - 1)));
  const episodes = [
    episode(seq(5), [0, 0, 1, 1, 1]),
    episode(seq(9), [0, 1, 1, 0, 0, 0, 1, 1, 1]),
    episode(seq(4), [0, 1, 1, 1]),
    episode(seq(7), [0, 0, 0, 0, 0, 1, 1]),
    episode(seq(8), [0, 1, 1, 1, 1, 1, 1, 1]),
  ];
  const advantages = new Map(episodes.map((e) => [e, Float32Array.from(e.lossMask, (m) => (m ? r() * 2 - 1 : 0))] as const));

  /** The (unclipped) gradient one update hands the optimizer, for the episodes split into micro-batches of the given sizes. */
  async function update(mode: (typeof LOSS_AGG_MODES)[number], split: number[], oldLogprobs: Map<Episode, Float32Array>) {
    const opt = new RecordingOptimizer();
    const port = new ModelPolicyPort(model, cfgWith({ loss_agg_mode: mode, clip_ratio_low: 0.2, clip_ratio_high: 0.28 }, { grad_clip: 0 }), opt);
    const microBatches: Episode[][] = [];
    let at = 0;
    for (const n of split) microBatches.push(episodes.slice(at, (at += n)));
    const s = await port.update({ microBatches, advantages, oldLogprobs, lr: 0.1 });
    return { grads: opt.grads!, loss: s.loss };
  }

  function expectSameGradient(a: Map<string, Float32Array>, b: Map<string, Float32Array>) {
    expect([...a.keys()].sort()).toEqual([...b.keys()].sort());
    let maxAbs = 0;
    let maxDiff = 0;
    for (const [k, g] of a) {
      const h = b.get(k)!;
      for (let i = 0; i < g.length; i++) {
        maxAbs = Math.max(maxAbs, Math.abs(g[i]!));
        maxDiff = Math.max(maxDiff, Math.abs(g[i]! - h[i]!));
      }
    }
    expect(maxAbs).toBeGreaterThan(1e-4); // a real gradient, not zeros
    expect(maxDiff).toBeLessThanOrEqual(2e-5 * maxAbs);
  }

  for (const mode of LOSS_AGG_MODES)
    it(`${mode}: 1 batch of 5 = micro-batches of 2 + 3 = 1 + 1 + 3 (same gradient and loss)`, async () => {
      const cur = await new ModelPolicyPort(model, cfgWith({}, {}), new RecordingOptimizer()).score(episodes);
      // Old logprobs off by up to ±0.4, so some tokens sit in the clipped branch.
      const oldLogprobs = new Map(episodes.map((e, i) => [e, cur.logprobs[i]!.map((x) => x + (r() * 0.8 - 0.4))] as const));
      const whole = await update(mode, [5], oldLogprobs);
      for (const split of [
        [2, 3],
        [1, 1, 3],
      ]) {
        const parts = await update(mode, split, oldLogprobs);
        expectSameGradient(whole.grads, parts.grads);
        expect(parts.loss).toBeCloseTo(whole.loss, 5);
      }
    });

  it('fresh: false gives each token the ratio π/π_old of the weights it updated, from the train step itself (no scoring forward)', async () => {
    const port = new ModelPolicyPort(model, cfgWith({ clip_ratio_low: 0.2, clip_ratio_high: 0.28 }, { grad_clip: 0 }), new RecordingOptimizer());
    const cur = await port.score(episodes);
    const oldLogprobs = new Map(episodes.map((e, i) => [e, cur.logprobs[i]!.map((x) => x + (r() * 0.8 - 0.4))] as const));
    // Micro-batches of different lengths (different padding) in one update.
    const s = await port.update({ microBatches: [episodes.slice(0, 2), episodes.slice(2)], advantages, oldLogprobs, lr: 0, fresh: false });
    expect(s.signals?.size).toBe(episodes.length);
    let checked = 0;
    episodes.forEach((e, i) => {
      const sig = s.signals!.get(e)!;
      for (let t = 0; t < e.tokens.length; t++) {
        if (!e.lossMask[t]) continue;
        expect(sig.ratio[t]).toBeCloseTo(Math.exp(cur.logprobs[i]![t]! - oldLogprobs.get(e)![t]!), 4);
        checked++;
      }
    });
    expect(checked).toBeGreaterThan(10);
    // fresh: true → the ratio is 1 on every model token.
    const f = await port.update({ microBatches: [episodes], advantages, oldLogprobs, lr: 0, fresh: true });
    for (const e of episodes) e.lossMask.forEach((m, t) => m && expect(f.signals!.get(e)!.ratio[t]).toBe(1));
  });

  it('SFT: algorithm.micro_batches 1 and 3 give the same gradient', async () => {
    const demos = episodes.map((e) => ({ tokens: e.tokens, lossMask: e.lossMask }));
    const sft = async (micro: number) => {
      const opt = new RecordingOptimizer();
      const p = new ModelPolicyPort(model, cfgWith({ micro_batches: micro }, { grad_clip: 0 }), opt);
      const s = await p.sftUpdate(demos, 0.1);
      return { grads: opt.grads!, loss: s.loss };
    };
    const one = await sft(1);
    const three = await sft(3);
    expectSameGradient(one.grads, three.grads);
    expect(three.loss).toBeCloseTo(one.loss, 5);
  });
});
