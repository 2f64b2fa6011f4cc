// The SFT warm start's defaults for a tiny model on a user environment (engine/config/experiment.ts
// TINY_COLD_START): README's "Write your own environment" config gets the validation-split cold
// start; any of its keys set turns the block off; other models and task kinds keep the plain defaults.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { TINY_COLD_START, validateConfig } from '../../../engine/config/experiment';

const readme = (over: Record<string, unknown> = {}) => ({
  model: { init: 'tiny' },
  task: { kind: 'custom' },
  environment: { format: 'hermes', tasks: 'tasks.jsonl' },
  sft: { warm_start: true },
  ...over,
});

describe('tiny-model SFT defaults', () => {
  it("README's config (model.init tiny, task.kind custom, sft.warm_start only) gets the cold start", () => {
    const c = validateConfig(readme(), { checkFiles: false });
    expect(c.sft).toMatchObject(TINY_COLD_START.sft);
    expect(c.eval.validation).toBe(TINY_COLD_START.eval.validation);
  });

  it("the config README prints is valid, gets the cold start and RL's settings as printed", () => {
    const md = readFileSync(join(__dirname, '../../../README.md'), 'utf8');
    const block = /## Write your own environment[\s\S]*?```yaml\n(model: \{ init: tiny \}[\s\S]*?)```/.exec(md)?.[1];
    expect(block, "README's config block").toBeDefined();
    const c = validateConfig(parse(block!), { checkFiles: false });
    expect(c.sft).toMatchObject(TINY_COLD_START.sft);
    expect(c.rollout.temperature).toBe(0.5);
    expect(c.algorithm.dynamic_sampling.enabled).toBe(true);
    expect(c.optim).toMatchObject({ lr: 0.0005, warmup_steps: 5, weight_decay: 0 });
  });

  it('a config that sets any of its keys is taken as written; other models, kinds and no warm start keep the plain defaults', () => {
    const plain = { epochs: 3, schedule: 'cosine', eval_every: 0, keep_best: false };
    expect(validateConfig(readme({ sft: { warm_start: true, epochs: 5 } }), { checkFiles: false }).sft).toMatchObject({ ...plain, epochs: 5 });
    expect(validateConfig(readme({ sft: { warm_start: true, eval_every: 5 }, eval: { validation: 20 } }), { checkFiles: false }).sft).toMatchObject({
      ...plain,
      eval_every: 5,
    });
    expect(validateConfig(readme({ sft: { warm_start: false } }), { checkFiles: false }).sft).toMatchObject(plain);
    expect(validateConfig(readme({ task: { kind: 'multihop' }, environment: {} }), { checkFiles: false }).sft).toMatchObject(plain);
    expect(validateConfig(readme({ task: { kind: 'multihop' }, environment: {} }), { checkFiles: false }).eval.validation).toBe(0);
  });
});
