import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { policyDecodeBackend } from '../../../engine/rollout/model-backend';
import { advantagePort } from '../../../engine/train/advantage';
import { validateConfig } from '../../../engine/config/experiment';
import { runTrainingLoop } from '../../../engine/train/loop';
import { AdamW } from '../../../engine/rl/optimizer';
import { ModelPolicyPort } from '../../../engine/train/model-port';
import { engineRolloutPort } from '../../../engine/train/rollout-port';
import { JsonlSink, readMetricsJsonl } from '../../../engine/run/sinks';
import { sequenceTasks, tabularTargets, tabularTokenizer } from './tabular';

const VOCAB = 6;
const PROMPTS = 4;
const LEN = 3;

describe('GRPO on the real transformer (ORT)', () => {
  const model = PolicyModel.init(tinyConfig({ vocabSize: VOCAB + PROMPTS, hiddenSize: 32, layers: 1, heads: 2, maxPositionEmbeddings: 8 }), 1, { threads: 1 });
  afterAll(() => model.dispose());

  // What GRPO teaches the transformer is not asserted (the sampled episodes, and so the curve, move
  // with the CPU's float rounding; the learning claim is the tabular policy's, tests/engine/rl/learning.test.ts,
  // and arbor demo's): every step is logged, recomputed old logprobs match the rollout, the weights move.
  it('runs GRPO steps on the transformer; recomputed old logprobs match the rollout; the weights move', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      steps: 14,
      seed: 2,
      rollout: { prompts_per_step: 4, n: 8, max_turns: 1, max_new_tokens: LEN, max_total_length: LEN + 1 },
      algorithm: { ppo_epochs: 1, mini_batches: 2, micro_batches: 2 },
      optim: { lr: 0.02, warmup_steps: 0, grad_clip: 1 },
      checkpoint: { every: 100, keep: 1 },
    });
    const policy = new ModelPolicyPort(model, cfg, new AdamW({ ...cfg.optim }));
    const rollout = engineRolloutPort(cfg, {
      backend: policyDecodeBackend(model, { maxBatch: 32, maxLength: LEN + 1 }),
      tokenizer: tabularTokenizer,
      tasks: sequenceTasks(tabularTargets({ prompts: PROMPTS, length: LEN, vocab: VOCAB, seed: 3 }), VOCAB),
      stop: { strings: [], tokenIds: [] },
    });
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-model-grpo-'));
    const before = new Map([...model.weights].map(([k, w]) => [k, Float32Array.from(w)]));
    await runTrainingLoop(cfg, { rollout, policy, advantage: advantagePort(cfg), sink: new JsonlSink(runDir) }, { runDir });
    const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
    expect(rows.map((x) => x.step)).toEqual(Array.from({ length: 14 }, (_, i) => i + 1));
    for (const x of rows) {
      expect(x.values['rollout/logprob_mismatch']!).toBeLessThan(1e-3);
      expect(x.values['reward/mean']!).toBeGreaterThanOrEqual(0);
      expect(Number.isFinite(x.values['actor/loss']!)).toBe(true);
    }
    const moved = [...model.weights].filter(([k, w]) => w.some((x, i) => x !== before.get(k)![i]));
    expect(moved.length).toBeGreaterThan(model.weights.size / 2);
  });
});
