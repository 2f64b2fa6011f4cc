// eval.validation on the multi-hop search task (the demo's cold start, resources/configs/demo.yaml):
// the split is training questions held back (from the training worlds), never a held-out question
// of task.eval_seed's world, and never a demonstration or an RL prompt.
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';
import { splitValidation } from '../../../engine/run/compose';
import { multihopKit } from '../../../engine/tasks/multihop/kit';

const worldOf = (id: string) => Number(/^w(\d+)-q\d+$/.exec(id)?.[1]);

describe('multihop: eval.validation', () => {
  it('holds back training questions of the training worlds, none of the held-out world', () => {
    const cfg = validateConfig(
      {
        model: { init: 'tiny' },
        task: { kind: 'multihop', hops: [1, 2], eval_seed: 1001, rl_hops: [2] },
        sft: { warm_start: true, eval_every: 25, keep_best: true },
        eval: { every: 0, n_questions: 200, validation: 100 },
      },
      { job: 'demo' },
    );
    const kit = multihopKit(cfg);
    const { kit: rest, validation } = splitValidation(cfg, kit);
    expect(validation).toHaveLength(100);
    const ids = new Set(validation.map((t) => t.id));
    expect(ids.size).toBe(100);
    // Training worlds only (task.train_seed 1 … 64), both hop counts.
    for (const t of validation) {
      expect(worldOf(t.id)).toBeGreaterThanOrEqual(cfg.task.train_seed);
      expect(worldOf(t.id)).toBeLessThan(cfg.task.train_seed + 64);
    }
    expect(new Set(validation.map((t) => t.meta?.hops))).toEqual(new Set([1, 2]));
    // The held-out questions are untouched and none of them is in the split.
    expect(rest.evalTasks).toBe(kit.evalTasks);
    expect(kit.evalTasks.every((t) => worldOf(t.id) === 1001 && !ids.has(t.id))).toBe(true);
    // Taken out of the demonstrations' pool and of the RL prompts (task.rl_hops: the 2-hop ones).
    expect(rest.trainTasks).toHaveLength(kit.trainTasks.length - 100);
    expect(rest.trainTasks.some((t) => ids.has(t.id))).toBe(false);
    expect(rest.rlTasks!.some((t) => ids.has(t.id))).toBe(false);
    expect(rest.rlTasks).toHaveLength(kit.rlTasks!.length - validation.filter((t) => t.meta?.hops === 2).length);
  }, 60_000);
});
