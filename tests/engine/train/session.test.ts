import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tinyConfig } from '../../../engine/model/config';
import { validateConfig } from '../../../engine/train/config';
import { runExperiment } from '../../../engine/train/experiment';
import { buildTaskSession, type TaskKit } from '../../../engine/train/session';
import { JsonlSink } from '../../../engine/train/sinks';
import { sequenceTasks, tabularTargets, tabularTokenizer } from '../../../engine/train/tabular';

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
  it('SFT warm start from scripted-expert demos raises held-out EM, then RL continues and checkpoints as an HF folder', async () => {
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
    const session = await buildTaskSession(cfg, kit);
    try {
      const before = await session.evaluate(PROMPTS);
      const runDir = mkdtempSync(join(tmpdir(), 'arbor-session-'));
      const res = await runExperiment(cfg, { runDir, session, sink: new JsonlSink(runDir) });
      expect(res.sft!.steps).toBe(4 * 6);
      expect(before.exactMatch).toBeLessThan(0.5);
      expect(res.eval!.exact_match).toBe(1);
      expect(res.eval!['exact_match/hops_1']).toBe(1);
      expect(res.rl!.lastCheckpoint!.step).toBe(3);
      const { existsSync } = await import('node:fs');
      for (const f of ['config.json', 'model.safetensors', 'optimizer.json', 'trainer_state.json']) expect(existsSync(join(res.rl!.lastCheckpoint!.dir, f))).toBe(true);
    } finally {
      await session.close();
    }
  });
});
