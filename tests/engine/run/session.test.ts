import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tinyConfig } from '../../../engine/model/config';
import { validateConfig, validateLoaded } from '../../../engine/config/experiment';
import { runExperiment } from '../../../engine/run/runner';
import { buildTaskSession } from '../../../engine/run/compose';
import type { TaskKit } from '../../../engine/tasks/kit';
import { JsonlSink } from '../../../engine/run/sinks';
import { latestCheckpoint } from '../../../engine/train/checkpoints';
import type { Episode } from '../../../engine/train/episode';
import type { SinkPort } from '../../../engine/train/loop';
import { sequenceTasks, tabularTargets, tabularTokenizer } from '../train/tabular';

const VOCAB = 6;
const PROMPTS = 5;
const targets = tabularTargets({ prompts: PROMPTS, length: 3, vocab: VOCAB, seed: 4 });
const tasks = sequenceTasks(targets, VOCAB).map((t) => ({ ...t, meta: { hops: 1 } }));
const kit: TaskKit = {
  tokenizer: tabularTokenizer,
  trainTasks: tasks,
  evalTasks: tasks,
  stop: { strings: [], tokenIds: [] },
  expert: { act: async ({ task }) => targets[Number(task.id.split('-')[1])]!.join(' ') },
  tinyModel: () => tinyConfig({ vocabSize: VOCAB + PROMPTS, hiddenSize: 32, layers: 1, heads: 2, maxPositionEmbeddings: 8 }),
};

describe('task session on the real transformer', () => {
  it('SFT warm start from scripted-expert demos, held-out eval, then RL continues and checkpoints as an HF folder', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      steps: 3,
      seed: 1,
      threads: 1,
      rollout: { prompts_per_step: 4, n: 4, max_turns: 1, max_new_tokens: 3, max_total_length: 4 },
      sft: { warm_start: true, demos: 60, epochs: 4, batch_size: 10, lr: 0.02 },
      optim: { lr: 0.005 },
      eval: { every: 0, n_questions: PROMPTS },
      checkpoint: { every: 3, keep: 1 },
    });
    const session = await buildTaskSession({ cfg, defaults: new Set() }, kit);
    try {
      const before = await session.evaluate(PROMPTS);
      // A fraction of the held-out questions (what the model learned is not asserted: it moves with the CPU).
      expect(Number.isFinite(before.exactMatch)).toBe(true);
      expect(before.exactMatch).toBeGreaterThanOrEqual(0);
      expect(before.exactMatch).toBeLessThanOrEqual(1);
      const runDir = mkdtempSync(join(tmpdir(), 'arbor-session-'));
      const res = await runExperiment(cfg, { runDir, session, sink: new JsonlSink(runDir) });
      expect(res.sft!.steps).toBe(4 * 6);
      // What the tiny transformer learned is not asserted (float rounding differs by CPU): the SFT
      // loss was finite, the held-out eval ran, RL went on from there.
      expect(Number.isFinite(res.sft!.finalLoss)).toBe(true);
      expect(res.eval!.exact_match).toBeGreaterThanOrEqual(0);
      expect(res.eval!.exact_match).toBeLessThanOrEqual(1);
      expect(res.eval).toHaveProperty('exact_match/hops_1');
      expect(res.rl!.lastCheckpoint!.step).toBe(3);
      const { existsSync } = await import('node:fs');
      for (const f of ['config.json', 'model.safetensors', 'optimizer.json', 'trainer_state.json'])
        expect(existsSync(join(res.rl!.lastCheckpoint!.dir, f))).toBe(true);
    } finally {
      await session.close();
    }
  });

  it('with a warm start the KL reference is the SFT model (also after an RL resume), not the model SFT started from', async () => {
    const base = {
      model: { init: 'tiny' },
      seed: 2,
      threads: 1,
      rollout: { prompts_per_step: 4, n: 2, max_turns: 1, max_new_tokens: 3, max_total_length: 4 },
      sft: { warm_start: true, demos: 60, epochs: 4, batch_size: 10, lr: 0.02 },
      algorithm: { kl_coef: 0.1 },
      optim: { lr: 0.005 },
      eval: { every: 0, n_questions: PROMPTS },
      checkpoint: { every: 1, keep: 2 },
    };
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-session-kl-'));
    type Step = { episodes: Episode[]; ref: Float32Array[] };
    const recorder = (into: Map<number, Step>): SinkPort => {
      const inner = new JsonlSink(runDir);
      return {
        metrics: (s, v) => inner.metrics(s, v),
        truncateAfter: (s) => inner.truncateAfter(s),
        trajectories: (step, episodes, _a, extra) => void into.set(step, { episodes, ref: episodes.map((e) => extra!.refLogprobs!.get(e)!) }),
      };
    };
    const maxDiff = (a: ArrayLike<number>[], b: ArrayLike<number>[]) => Math.max(...a.flatMap((x, i) => Array.from(x, (v, j) => Math.abs(v - b[i]![j]!))));

    // Step 1 samples from the SFT model, so its rollout logprobs are the reference's.
    const first = new Map<number, Step>();
    const s1 = await buildTaskSession(validateLoaded({ ...base, steps: 1 }), kit);
    try {
      await runExperiment(validateConfig({ ...base, steps: 1 }), { runDir, session: s1, sink: recorder(first) });
    } finally {
      await s1.close();
    }
    const step1 = first.get(1)!;
    const maskedBy = (eps: Episode[], xs: ArrayLike<number>[]) => xs.map((x, i) => Array.from(x, (v, j) => (eps[i]!.lossMask[j] ? v : 0)));
    expect(
      maxDiff(
        maskedBy(step1.episodes, step1.ref),
        maskedBy(
          step1.episodes,
          step1.episodes.map((e) => e.rolloutLogprobs),
        ),
      ),
    ).toBeLessThan(1e-3);

    // Resumed at step 2 (policy from the RL checkpoint): the reference is still the SFT model.
    const second = new Map<number, Step>();
    const s2 = await buildTaskSession(validateLoaded({ ...base, steps: 2 }), kit);
    try {
      await runExperiment(validateConfig({ ...base, steps: 2 }), { runDir, session: s2, sink: recorder(second), resume: true });
    } finally {
      await s2.close();
    }
    const step2 = second.get(2)!;
    const s3 = await buildTaskSession(validateLoaded({ ...base, steps: 2 }), kit);
    try {
      await s3.loadPolicy(latestCheckpoint(join(runDir, 'sft'))!.dir);
      const sftScores = await s3.ports.policy.score(step2.episodes);
      const masked = (xs: ArrayLike<number>[]) => maskedBy(step2.episodes, xs);
      expect(maxDiff(masked(step2.ref), masked(sftScores.logprobs))).toBeLessThan(1e-4);
      // … and differs from the untrained model SFT started from (what the reference was before).
      const untrained = await buildTaskSession(validateLoaded({ ...base, steps: 2 }), kit);
      try {
        expect(maxDiff(masked(step2.ref), masked((await untrained.ports.policy.score(step2.episodes)).logprobs))).toBeGreaterThan(0.1);
      } finally {
        await untrained.close();
      }
    } finally {
      await s3.close();
    }
  }, 120_000);
});
