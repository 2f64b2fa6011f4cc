// The registry's estimators drive real learning through the training loop (tabular policy with
// exact PPO gradients): REINFORCE++ with KL in the reward, REINFORCE++-baseline and RLOO.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { advantagePort } from '../../../engine/train/advantage';
import { validateConfig, type ExperimentInput } from '../../../engine/config/experiment';
import { runTrainingLoop } from '../../../engine/train/loop';
import { JsonlSink, readMetricsJsonl } from '../../../engine/run/sinks';
import { TabularPolicy } from '../train/tabular';

async function train(algorithm: ExperimentInput['algorithm']) {
  const cfg = validateConfig({
    model: { init: 'tiny' },
    steps: 30,
    seed: 11,
    rollout: { prompts_per_step: 4, n: 8 },
    algorithm: { ppo_epochs: 2, mini_batches: 2, ...algorithm },
    optim: { lr: 0.1, warmup_steps: 0 },
    checkpoint: { every: 100, keep: 1 },
  });
  const policy = new TabularPolicy({ prompts: 4, length: 3, vocab: 6, seed: 5 }, cfg);
  const runDir = mkdtempSync(join(tmpdir(), 'arbor-rl-'));
  await runTrainingLoop(cfg, { rollout: policy, policy, advantage: advantagePort(cfg), sink: new JsonlSink(runDir) }, { runDir });
  const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
  const mean = (rs: typeof rows) => rs.reduce((a, r) => a + r.values['reward/mean']!, 0) / rs.length;
  return { early: mean(rows.slice(0, 3)), late: mean(rows.slice(-3)) };
}

describe('estimators from the registry learn', () => {
  for (const algorithm of [
    { adv_estimator: 'reinforce_pp' as const, gamma: 1 },
    { adv_estimator: 'reinforce_pp_baseline' as const },
    { adv_estimator: 'rloo' as const },
  ]) {
    it(`${algorithm.adv_estimator} raises mean reward`, async () => {
      const { early, late } = await train(algorithm);
      expect(late).toBeGreaterThan(early + 0.3);
    });
  }
});
