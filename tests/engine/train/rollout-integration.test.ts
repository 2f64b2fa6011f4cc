import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { advantagePort } from '../../../engine/train/advantage';
import { validateConfig } from '../../../engine/config/experiment';
import { runTrainingLoop } from '../../../engine/train/loop';
import { engineRolloutPort, pickTasks } from '../../../engine/train/rollout-port';
import { JsonlSink, readMetricsJsonl } from '../../../engine/run/sinks';
import { TabularPolicy, tabularDecodeBackend, tabularTasks, tabularTokenizer } from './tabular';

describe('loop on the real rollout engine', () => {
  it('rolls out through engine/rollout, recomputes matching old logprobs, and learns', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      steps: 25,
      seed: 4,
      rollout: { prompts_per_step: 4, n: 8, max_turns: 1, max_new_tokens: 3, max_total_length: 4 },
      algorithm: { ppo_epochs: 2, mini_batches: 2 },
      optim: { lr: 0.1, warmup_steps: 0 },
      checkpoint: { every: 25, keep: 1 },
    });
    const policy = new TabularPolicy({ prompts: 5, length: 3, vocab: 6, seed: 8 }, cfg);
    const rolloutPort = engineRolloutPort(cfg, {
      backend: tabularDecodeBackend(policy, 16),
      tokenizer: tabularTokenizer,
      tasks: tabularTasks(policy),
      stop: { strings: [], tokenIds: [] },
    });
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-rollout-loop-'));
    await runTrainingLoop(cfg, { rollout: rolloutPort, policy, advantage: advantagePort(cfg), sink: new JsonlSink(runDir) }, { runDir });
    const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
    expect(rows).toHaveLength(25);
    // The rollout engine's float32 logprobs agree with the trainer's recomputation.
    for (const r of rows) expect(r.values['rollout/logprob_mismatch']!).toBeLessThan(1e-4);
    const first = rows.slice(0, 3).reduce((a, r) => a + r.values['reward/mean']!, 0) / 3;
    const last = rows.slice(-3).reduce((a, r) => a + r.values['reward/mean']!, 0) / 3;
    expect(last).toBeGreaterThan(first + 0.4);
    expect(rows[0]!.values['response_length/mean']).toBe(3);
  });

  it('draws each step’s prompts without replacement, deterministically per seed', () => {
    const pool = [0, 1, 2, 3, 4];
    const a = pickTasks(pool, 5, 9);
    expect([...a].sort()).toEqual(pool);
    expect(pickTasks(pool, 5, 9)).toEqual(a);
    expect(pickTasks(pool, 7, 9)).toHaveLength(7);
  });
});
