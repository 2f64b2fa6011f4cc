/**
 * algorithm.old_logprobs: 'rollout' reuses the rollout's recorded logprobs as the PPO ratio's
 * old policy instead of a scoring pass: no score call, and the same update as recomputing them
 * (the policy has not changed between sampling and scoring); 'recompute' scores in pieces of the
 * update's micro-batch.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { advantagePort } from '../../../engine/train/advantage';
import { validateConfig } from '../../../engine/config/experiment';
import { runTrainingLoop } from '../../../engine/train/loop';
import { JsonlSink, readMetricsJsonl } from '../../../engine/run/sinks';
import { TabularPolicy } from './tabular';

async function firstSteps(oldLogprobs: 'recompute' | 'rollout') {
  const cfg = validateConfig({
    model: { init: 'tiny' },
    steps: 3,
    seed: 5,
    rollout: { prompts_per_step: 4, n: 8 },
    algorithm: { ppo_epochs: 2, mini_batches: 2, old_logprobs: oldLogprobs },
    optim: { lr: 0.1, warmup_steps: 0 },
    checkpoint: { every: 10, keep: 1 },
  });
  const policy = new TabularPolicy({ prompts: 4, length: 3, vocab: 6, seed: 5 }, cfg);
  const scored: number[] = [];
  const score = policy.score.bind(policy);
  policy.score = (eps) => {
    scored.push(eps.length);
    return score(eps);
  };
  const runDir = mkdtempSync(join(tmpdir(), 'arbor-oldlp-'));
  await runTrainingLoop(cfg, { rollout: policy, policy, advantage: advantagePort(cfg), sink: new JsonlSink(runDir) }, { runDir });
  const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
  return {
    scored,
    rows: rows.map((r) =>
      Object.fromEntries(
        Object.entries(r.values).filter(([k]) => !k.startsWith('time/') && !k.startsWith('perf/') && !k.startsWith('rollout/logprob_mismatch')),
      ),
    ),
  };
}

describe('algorithm.old_logprobs', () => {
  it("'rollout' skips the scoring pass and trains as 'recompute' does", async () => {
    const a = await firstSteps('recompute');
    const b = await firstSteps('rollout');
    // 3 steps of 32 episodes, each scored in pieces of the update's micro-batch (32 over 2 mini-batches of 1 micro-batch: 16).
    expect(a.scored).toEqual([16, 16, 16, 16, 16, 16]);
    expect(b.scored).toEqual([]);
    expect(Object.keys(b.rows[0]!).sort()).toEqual(Object.keys(a.rows[0]!).sort());
    a.rows.forEach((r, i) => {
      for (const [k, v] of Object.entries(r)) expect(b.rows[i]![k], k).toBeCloseTo(v, 4);
    });
    expect(a.rows[2]!['actor/grad_norm']).toBeGreaterThan(0);
  });

  it("'rollout' is accepted at any sampling temperature (the rollout and the learner score softmax(logits / T))", () => {
    expect(validateConfig({ model: { init: 'tiny' }, rollout: { temperature: 0.7 }, algorithm: { old_logprobs: 'rollout' } }).algorithm.old_logprobs).toBe(
      'rollout',
    );
  });
});
