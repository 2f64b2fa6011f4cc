// Keys that would do nothing in a configuration are refused, naming the key; the same keys at
// their defaults (what the workbench form sends) or where they act are accepted.
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';

const qa = { model: { init: 'tiny' }, task: { kind: 'qa', dataset: 'd.jsonl' } };
const check = (c: unknown, job?: 'sft') => () => validateConfig(c, { checkFiles: false, job });

describe('inert config keys', () => {
  it('refuses each one with a message naming it', () => {
    expect(check({ ...qa, task: { ...qa.task, hops: [2] } })).toThrow(/task\.hops: has no effect with task\.kind "qa"/);
    expect(check({ ...qa, sft: { mistake_rate: 0.5 } })).toThrow(/sft\.mistake_rate: has no effect with task\.kind "qa"/);
    expect(check({ model: { path: '/m', hidden_size: 128 } })).toThrow(/model\.hidden_size: has no effect with model\.path/);
    expect(check({ model: { path: '/m', heads: 8 } })).toThrow(/model\.heads: has no effect with model\.path/);
    expect(check({ model: { init: 'tiny', heads: 3 } })).toThrow(/model\.heads: model\.hidden_size must be model\.heads × an even head size/);
    expect(check({ model: { init: 'tiny', hidden_size: 24, heads: 8 } })).toThrow(/model\.heads: .*even head size/);
    expect(check({ model: { init: 'tiny' }, sft: { demos_path: 'x.jsonl', demos: 50 } })).toThrow(/sft\.demos: has no effect with sft\.demos_path/);
    expect(check({ model: { init: 'tiny' }, optim: { schedule: 'cosine', warmup_steps: 9 } }, 'sft')).toThrow(
      /optim\.warmup_steps: has no effect in `arbor sft`[\s\S]*optim\.schedule/,
    );
    expect(check({ model: { init: 'tiny' }, checkpoint: { every: 3 } }, 'sft')).toThrow(/checkpoint\.every: has no effect in `arbor sft`/);
  });
  it('accepts them where they act, and at their defaults', () => {
    expect(
      check({
        model: { init: 'tiny' },
        task: { hops: [2] },
        sft: { warm_start: true, mistake_rate: 0.5 },
        optim: { schedule: 'cosine' },
        checkpoint: { every: 3 },
      }),
    ).not.toThrow();
    expect(check({ model: { init: 'tiny', hidden_size: 32 } })).not.toThrow();
    expect(check({ model: { init: 'tiny', heads: 8 } })).not.toThrow();
    expect(check({ ...qa, task: { ...qa.task, hops: [1, 2] }, sft: { warm_start: true, mistake_rate: 0.25 } })).not.toThrow();
    expect(check({ model: { init: 'tiny' }, checkpoint: { keep: 1 }, sft: { lr: 0.01 } }, 'sft')).not.toThrow();
  });
});
