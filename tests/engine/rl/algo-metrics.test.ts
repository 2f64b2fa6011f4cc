// The new algorithms' per-step metrics reach the run's metric rows (as the workbench charts
// them): GiGPO's step-group sizes (advantage/*) and the policy loss's own metrics such as GSPO's
// sequence clip fraction (actor/*, averaged over the step's updates); and GiGPO learns through
// the loop (tabular policy: every episode is one step whose anchor is the prompt).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { advantagePort } from '../../../engine/train/advantage';
import { validateConfig, type ExperimentInput } from '../../../engine/config/experiment';
import { runTrainingLoop, type PolicyPort } from '../../../engine/train/loop';
import { JsonlSink, readMetricsJsonl } from '../../../engine/run/sinks';
import { TabularPolicy } from '../train/tabular';

async function train(algorithm: ExperimentInput['algorithm'], steps: number, wrap?: (p: TabularPolicy) => PolicyPort) {
  const cfg = validateConfig({
    model: { init: 'tiny' },
    steps,
    seed: 11,
    rollout: { prompts_per_step: 4, n: 8 },
    algorithm: { ppo_epochs: 2, mini_batches: 2, ...algorithm },
    optim: { lr: 0.1, warmup_steps: 0 },
    checkpoint: { every: 100, keep: 1 },
  });
  const tab = new TabularPolicy({ prompts: 4, length: 3, vocab: 6, seed: 5 }, cfg);
  const runDir = mkdtempSync(join(tmpdir(), 'arbor-algo-'));
  await runTrainingLoop(cfg, { rollout: tab, policy: wrap ? wrap(tab) : tab, advantage: advantagePort(cfg), sink: new JsonlSink(runDir) }, { runDir });
  return readMetricsJsonl(join(runDir, 'metrics.jsonl'));
}

describe('per-step metrics of the new algorithms', () => {
  it('GiGPO logs its step-group sizes and learns', async () => {
    const rows = await train({ adv_estimator: 'gigpo' }, 30);
    // 4 prompts × 8 samples, one step each, anchored at the prompt: 4 step groups of 8.
    expect(rows[0]!.values['advantage/step_groups']).toBe(4);
    expect(rows[0]!.values['advantage/step_group_size_mean']).toBe(8);
    expect(rows[0]!.values['advantage/singleton_step_fraction']).toBe(0);
    const mean = (rs: typeof rows) => rs.reduce((a, r) => a + r.values['reward/mean']!, 0) / rs.length;
    expect(mean(rows.slice(-3))).toBeGreaterThan(mean(rows.slice(0, 3)) + 0.3);
  });

  it('metrics a policy loss reports beyond loss/clip/KL/entropy are logged as actor/<name>, averaged over the updates', async () => {
    let call = 0;
    const rows = await train({ adv_estimator: 'grpo' }, 1, (tab) => ({
      score: (e) => tab.score(e),
      save: (d) => tab.save(d),
      load: (d) => tab.load(d),
      update: async (args) => ({ ...(await tab.update(args)), metrics: { seq_clip_fraction: [0.5, 0, 0.25, 0.25][call++]! } }),
    }));
    expect(call).toBe(4); // 2 epochs × 2 mini-batches
    expect(rows[0]!.values['actor/seq_clip_fraction']).toBeCloseTo(0.25, 9);
    expect(rows[0]!.values['advantage/step_groups']).toBeUndefined();
  });
});
