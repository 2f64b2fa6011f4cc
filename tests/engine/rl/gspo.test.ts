// GSPO (engine/rl/policy-losses.ts gspoLoss): the length-normalised sequence ratio, its tiny
// clip range, the per-token gradient form — hand-computed on two sequences — and the trainer
// running it on the tiny transformer (on-policy it equals PPO-clip; micro-batching does not
// change it; the sequence clip fraction is reported).
import { afterAll, describe, expect, it } from 'vitest';
import type { Weights } from '../../../engine/model/checkpoint';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import type { OptimizerPort } from '../../../engine/rl/optimizer';
import { gspoLoss } from '../../../engine/rl/loss/gspo';
import { withGradients } from '../../../engine/tensor/autodiff';
import { traceGraph } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import { validateConfig } from '../../../engine/config/experiment';
import { mulberry32 } from '../../../engine/base/rng';
import type { Episode } from '../../../engine/train/episode';
import { ModelPolicyPort } from '../../../engine/train/model-port';
import { testEpisode } from '../train/episode-fixture';

const cfgWith = (algorithm: Record<string, unknown>) =>
  validateConfig({ model: { init: 'tiny' }, rollout: { max_new_tokens: 6, max_total_length: 10 }, algorithm, optim: { grad_clip: 0 } });

describe('GSPO loss, hand-computed (2 sequences × 4 positions)', () => {
  // Sequence 0: model tokens at 0, 1 (log-ratios 0.1, 0.3 → mean 0.2; position 2 is a tool token
  // with a large log-ratio that must not count), A = +1.
  // Sequence 1: model tokens at 0, 1, 2 (log-ratios −1e-4, −3e-4, 2e-4 → mean −2/3·1e-4), A = −0.5.
  const old = [-1, -2, -0.5, -1, /**/ -0.7, -1.1, -2.2, -0.3];
  const logRatio = [0.1, 0.3, 5, 0, /**/ -1e-4, -3e-4, 2e-4, 0];
  const lp = old.map((o, i) => o + logRatio[i]!);
  const mask = [1, 1, 0, 0, /**/ 1, 1, 1, 0];
  const adv = [1, 1, 0, 0, /**/ -0.5, -0.5, -0.5, 0];
  const s0 = Math.exp(0.2);
  const s1 = Math.exp(-2e-4 / 3);
  const f = (d: number[]) => ({ dtype: 'float32' as const, shape: [2, 4], data: Float32Array.from(d) });

  function run(algorithm: Record<string, unknown>) {
    const spec = gspoLoss(cfgWith({ policy_loss: 'gspo', ...algorithm }));
    const names = ['logprobs', 'entropy', 'mask', ...spec.inputs.map((i) => i.name)];
    const g = withGradients(
      traceGraph(
        names.map((name) => ({ name, dtype: 'float32' as const, shape: ['b', 's'] })),
        (o, x) => spec.program(o, x as never),
      ),
      'loss',
      ['logprobs'],
    );
    const out = evaluate(g, { logprobs: f(lp), entropy: f(Array(8).fill(0)), mask: f(mask), advantages: f(adv), old_logprobs: f(old) });
    const scalar = (k: string) => Number(out[k]!.data[0]);
    return { loss: scalar('loss'), clip: scalar('clip_fraction'), seqClip: scalar('seq_clip_fraction'), grad: Array.from(out['grad.logprobs']!.data, Number) };
  }

  it('the ratio is exp of the mean log-ratio over the sequence’s model tokens (wide range: nothing clipped)', () => {
    const r = run({ loss_agg_mode: 'seq-mean-token-mean', gspo: { clip_ratio_low: 0.5, clip_ratio_high: 0.5 } });
    expect(r.loss).toBeCloseTo((-1 * s0 + 0.5 * s1) / 2, 6);
    expect(r.seqClip).toBe(0);
    // Per-token gradient: ∂L/∂log π_t = −A_i·s_i / |y_i| / (number of sequences); the same on
    // every token of a sequence (PPO would give −A·ρ_t, different per token); 0 off the mask.
    const g0 = (-1 * s0) / 2 / 2;
    const g1 = (0.5 * s1) / 3 / 2;
    const want = [g0, g0, 0, 0, g1, g1, g1, 0];
    want.forEach((w, i) => expect(r.grad[i]).toBeCloseTo(w, 6));
  });

  it('the default tiny range (3e-4, 4e-4) clips sequence 0 (s = e^0.2 > 1.0004, A > 0) and not sequence 1', () => {
    const r = run({ loss_agg_mode: 'seq-mean-token-mean' });
    // Sequence 0: max(−s0, −1.0004) = −1.0004; sequence 1: max(0.5·s1, 0.5·clip(s1)) = 0.5·s1 (s1 ∈ [0.9997, 1.0004]).
    expect(r.loss).toBeCloseTo((-1.0004 + 0.5 * s1) / 2, 6);
    expect(r.seqClip).toBeCloseTo(1 / 2, 6);
    expect(r.clip).toBeCloseTo(2 / 5, 6); // the 2 model tokens of sequence 0 out of 5
    // The clipped sequence gets no gradient.
    expect(r.grad.slice(0, 4)).toEqual([0, 0, 0, 0]);
    expect(r.grad[4]).toBeCloseTo((0.5 * s1) / 3 / 2, 6);
  });

  it('a negative advantage is clipped from below: s < 1 − ε_low', () => {
    const r = run({ loss_agg_mode: 'seq-mean-token-mean', gspo: { clip_ratio_low: 3e-5, clip_ratio_high: 4e-4 } });
    // s1 = e^(−6.67e-5) < 1 − 3e-5, A = −0.5: max(0.5·s1, 0.5·(1 − 3e-5)) = 0.5·(1 − 3e-5), clipped.
    expect(r.loss).toBeCloseTo((-1.0004 + 0.5 * (1 - 3e-5)) / 2, 6);
    expect(r.seqClip).toBeCloseTo(1, 6);
    expect(r.grad.every((x) => x === 0)).toBe(true);
  });

  it('token-mean aggregation weighs every model token the same', () => {
    const r = run({ loss_agg_mode: 'token-mean', gspo: { clip_ratio_low: 0.5, clip_ratio_high: 0.5 } });
    expect(r.loss).toBeCloseTo((2 * -s0 + 3 * 0.5 * s1) / 5, 6);
    expect(r.grad[0]).toBeCloseTo(-s0 / 5, 6);
    expect(r.grad[6]).toBeCloseTo((0.5 * s1) / 5, 6);
  });
});

class RecordingOptimizer implements OptimizerPort {
  grads?: Map<string, Float32Array>;
  step(_w: Weights, grads: Weights): void {
    this.grads = new Map([...grads].map(([k, g]) => [k, g.slice()]));
  }
  save(): void {}
  load(): void {}
}

describe('GSPO in the trainer (tiny transformer, ORT train graph)', () => {
  const VOCAB = 12;
  const model = PolicyModel.init(tinyConfig({ vocabSize: VOCAB, hiddenSize: 16, layers: 1, heads: 2, maxPositionEmbeddings: 12 }), 5, { threads: 1 });
  afterAll(() => model.dispose());
  const r = mulberry32(11);
  const episode = (tokens: number[], mask: number[]): Episode => testEpisode(tokens, mask);
  const seq = (n: number) => Array.from({ length: n }, () => 1 + Math.floor(r() * (VOCAB - 1)));
  const episodes = [episode(seq(5), [0, 0, 1, 1, 1]), episode(seq(8), [0, 1, 1, 0, 0, 1, 1, 1]), episode(seq(4), [0, 1, 1, 1])];
  // GRPO-style: one advantage per sequence.
  const advantages = new Map(episodes.map((e, i) => [e, Float32Array.from(e.lossMask, (m) => (m ? [1, -0.5, 0.7][i]! : 0))] as const));

  async function update(algorithm: Record<string, unknown>, oldLogprobs: Map<Episode, Float32Array>, split = [3]) {
    const opt = new RecordingOptimizer();
    const port = new ModelPolicyPort(model, cfgWith({ loss_agg_mode: 'seq-mean-token-mean', ...algorithm }), opt);
    const microBatches: Episode[][] = [];
    let at = 0;
    for (const n of split) microBatches.push(episodes.slice(at, (at += n)));
    const s = await port.update({ microBatches, advantages, oldLogprobs, lr: 0.1 });
    return { grads: opt.grads!, stats: s };
  }
  const maxDiff = (a: Map<string, Float32Array>, b: Map<string, Float32Array>) => {
    let d = 0;
    let m = 0;
    for (const [k, g] of a) g.forEach((x, i) => ((d = Math.max(d, Math.abs(x - b.get(k)![i]!))), (m = Math.max(m, Math.abs(x)))));
    return { d, m };
  };

  it('on-policy (old = current) it has PPO-clip’s gradient; the loss metrics include the sequence clip fraction', async () => {
    const cur = (await new ModelPolicyPort(model, cfgWith({}), new RecordingOptimizer()).score(episodes)).logprobs;
    const old = new Map(episodes.map((e, i) => [e, cur[i]!] as const));
    const gspo = await update({ policy_loss: 'gspo' }, old);
    const ppo = await update({ policy_loss: 'ppo' }, old);
    const { d, m } = maxDiff(gspo.grads, ppo.grads);
    expect(m).toBeGreaterThan(1e-4);
    expect(d).toBeLessThanOrEqual(2e-5 * m);
    expect(gspo.stats.metrics?.seq_clip_fraction).toBe(0);
    expect(ppo.stats.metrics?.seq_clip_fraction).toBeUndefined();
  });

  it('off-policy it differs from PPO-clip, clips whole sequences, and micro-batches give the same gradient', async () => {
    const cur = (await new ModelPolicyPort(model, cfgWith({}), new RecordingOptimizer()).score(episodes)).logprobs;
    // Sequence 0 off-policy (ratio e^0.1: clipped under GSPO’s tiny range, inside PPO’s), the others nearly on-policy.
    const old = new Map(episodes.map((e, i) => [e, cur[i]!.map((x) => x + (i === 0 ? -0.1 : (r() - 0.5) * 1e-5))] as const));
    const whole = await update({ policy_loss: 'gspo' }, old);
    expect(whole.stats.metrics!.seq_clip_fraction).toBeCloseTo(1 / 3, 5);
    const parts = await update({ policy_loss: 'gspo' }, old, [1, 2]);
    const { d, m } = maxDiff(whole.grads, parts.grads);
    expect(d).toBeLessThanOrEqual(2e-5 * m);
    expect(parts.stats.metrics!.seq_clip_fraction).toBeCloseTo(1 / 3, 5);
    const ppo = await update({ policy_loss: 'ppo' }, old);
    expect(maxDiff(whole.grads, ppo.grads).d).toBeGreaterThan(1e-3 * m);
  });
});
