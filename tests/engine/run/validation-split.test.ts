// eval.validation: training questions held back from demonstrations and RL prompts (engine/run/compose.ts).
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';
import { splitValidation } from '../../../engine/run/compose';
import type { TaskKit } from '../../../engine/tasks/kit';
import type { RolloutTask } from '../../../engine/rollout/ports';

const tasks = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}` }) as unknown as RolloutTask);
const kitOf = (train: RolloutTask[], rl?: RolloutTask[]) =>
  ({ trainTasks: train, ...(rl ? { rlTasks: rl } : {}), evalTasks: tasks('held-', 5) }) as unknown as TaskKit;
const cfgWith = (validation: number, seed = 0) =>
  validateConfig({ model: { init: 'tiny' }, seed, eval: { validation }, sft: { warm_start: true, eval_every: 10 } }, { job: 'train' });

describe('eval.validation', () => {
  it('holds that many training questions back from the training and RL pools, the same ones on every seed', () => {
    const train = tasks('t', 100);
    const rl = train.filter((_, i) => i % 2 === 0);
    const a = splitValidation(cfgWith(20, 0), kitOf(train, rl));
    expect(a.validation).toHaveLength(20);
    expect(new Set(a.validation).size).toBe(20);
    expect(a.kit.trainTasks).toHaveLength(80);
    for (const v of a.validation) {
      expect(a.kit.trainTasks).not.toContain(v);
      expect(a.kit.rlTasks).not.toContain(v);
    }
    expect(a.kit.rlTasks!.length).toBe(rl.length - a.validation.filter((v) => rl.includes(v)).length);
    expect(a.kit.evalTasks).toHaveLength(5);
    expect(splitValidation(cfgWith(20, 3), kitOf(train, rl)).validation.map((t) => t.id)).toEqual(a.validation.map((t) => t.id));
    // Not simply the first or last rows.
    expect(a.validation.map((t) => t.id)).not.toEqual(train.slice(0, 20).map((t) => t.id));
  });

  it('0 leaves the kit as it is; as many as the training questions is refused, naming the key', () => {
    const kit = kitOf(tasks('t', 10));
    expect(splitValidation(validateConfig({ model: { init: 'tiny' } }), kit)).toEqual({ kit, validation: [] });
    expect(() => splitValidation(cfgWith(10), kit)).toThrow(/eval\.validation: 10 is not fewer than the task's 10 training questions/);
  });
});
