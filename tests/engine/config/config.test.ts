import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, experimentJsonSchema, loadConfig, validateConfig } from '../../../engine/config/experiment';
import type { Tool, ToolContext } from '../../../engine/env/tool';

function errorOf(input: unknown): ConfigError {
  try {
    validateConfig(input);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('experiment config', () => {
  it('accepts a two-line config and fills every default', () => {
    const cfg = validateConfig({ model: { init: 'tiny' } });
    expect(cfg.algorithm.adv_estimator).toBe('grpo');
    expect(cfg.algorithm.dynamic_sampling.enabled).toBe(false);
    expect(cfg.rollout.n).toBeGreaterThan(1);
    expect(cfg.backend).toBe('ort');
  });

  it('rejects an unknown field, naming it', () => {
    const e = errorOf({ model: { init: 'tiny' }, rollout: { temprature: 0.7 } });
    expect(e.issues).toEqual([{ field: 'rollout.temprature', message: 'unknown field "temprature"' }]);
  });

  it('rejects a wrong type, naming the field and the expected type', () => {
    const e = errorOf({ model: { init: 'tiny' }, optim: { lr: 'fast' } });
    expect(e.issues[0]!.field).toBe('optim.lr');
    expect(e.issues[0]!.message).toMatch(/expected number, got "fast"/);
  });

  it('rejects a negative batch', () => {
    const e = errorOf({ model: { init: 'tiny' }, rollout: { prompts_per_step: -4 } });
    expect(e.issues[0]).toEqual({ field: 'rollout.prompts_per_step', message: 'must be positive, got -4' });
  });

  it('lists the allowed values of a choice', () => {
    const e = errorOf({ model: { init: 'tiny' }, algorithm: { loss_agg_mode: 'mean' } });
    expect(e.issues[0]!.field).toBe('algorithm.loss_agg_mode');
    expect(e.message).toContain('"token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"');
  });

  it('rejects a missing model folder and a folder that is not an HF model', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-cfg-'));
    expect(errorOf({ model: { path: join(dir, 'nope') } }).issues[0]!).toEqual({
      field: 'model.path',
      message: `model folder not found: ${join(dir, 'nope')}`,
    });
    mkdirSync(join(dir, 'empty'));
    expect(errorOf({ model: { path: join(dir, 'empty') } }).issues[0]!.message).toMatch(/no config.json/);
  });

  it('needs exactly one of model.path and model.init', () => {
    expect(errorOf({ model: {} }).issues[0]!.field).toBe('model');
    expect(errorOf({}).issues[0]).toEqual({ field: 'model', message: 'required (object)' });
  });

  it('loads YAML and JSON files, resolving paths against the file, and names the file in errors', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-cfg-'));
    mkdirSync(join(dir, 'm'));
    writeFileSync(join(dir, 'm', 'config.json'), '{}');
    writeFileSync(join(dir, 'a.yaml'), 'model:\n  path: m\nalgorithm:\n  adv_estimator: rloo\n');
    const { cfg, dir: at } = await loadConfig(join(dir, 'a.yaml'));
    expect(at).toBe(dir);
    expect(cfg.model.path).toBe(join(dir, 'm'));
    expect(cfg.algorithm.adv_estimator).toBe('rloo');
    writeFileSync(join(dir, 'b.json'), JSON.stringify({ model: { init: 'tiny' }, steps: 0 }));
    await expect(loadConfig(join(dir, 'b.json'))).rejects.toThrow(/b\.json[\s\S]*steps: must be positive, got 0/);
    writeFileSync(join(dir, 'c.yaml'), 'model: [unclosed');
    await expect(loadConfig(join(dir, 'c.yaml'))).rejects.toThrow(/cannot parse YAML/);
  });

  it('checks cross-field limits', () => {
    const e = errorOf({ model: { init: 'tiny' }, rollout: { max_new_tokens: 500, max_total_length: 100 } });
    expect(e.issues[0]!.field).toBe('rollout.max_new_tokens');
  });

  it('needs the overlong buffer to fit in the response budget (max_turns × max_new_tokens), not just max_total_length', () => {
    const e = errorOf({ model: { init: 'tiny' }, rollout: { max_turns: 1, max_new_tokens: 32 }, algorithm: { overlong: { enabled: true, buffer: 64 } } });
    expect(e.issues[0]).toEqual({
      field: 'algorithm.overlong.buffer',
      message: 'must be < the response budget min(rollout.max_turns × rollout.max_new_tokens, rollout.max_total_length) = 32',
    });
  });

  it('exports a JSON schema with enums, defaults and no extra properties', () => {
    const s = experimentJsonSchema() as any;
    expect(s.required).toEqual(['model']);
    expect(s.additionalProperties).toBe(false);
    expect(s.properties.algorithm.properties.adv_estimator.enum).toContain('rloo');
    expect(s.properties.rollout.properties.n.default).toBe(8);
  });
});

describe('example configs in resources/configs', () => {
  const dir = join(__dirname, '..', '..', '..', 'resources', 'configs');
  for (const f of readdirSync(dir).filter((x) => /\.(ya?ml|json)$/.test(x)))
    it(`${f} is valid`, async () => {
      expect((await loadConfig(join(dir, f))).cfg.model).toBeDefined();
    });
});

describe('task.top_k: passages per search of the multi-hop task', () => {
  it('sets what every search returns: training, held-out, served and chat', async () => {
    const { multihopKit } = await import('../../../engine/tasks/multihop/kit');
    const { builtinTaskTools } = await import('../../../engine/tasks/kit-registry');
    type Search = Pick<Tool, 'name' | 'execute'>;
    const passages = async (t: Search, query: string, task = 'w1001-q0') =>
      ((await t.execute({ query }, { episode: { task } } as unknown as ToolContext)).metadata?.passages as string[]).length;
    for (const k of [1, 3]) {
      const cfg = validateConfig({ model: { init: 'tiny' }, task: { top_k: k } });
      const kit = multihopKit(cfg);
      for (const t of [kit.trainTasks[0]!, kit.evalTasks[0]!]) {
        const env = t.createEnv() as unknown as { opts: { tools: Search[] } };
        expect(
          await passages(
            env.opts.tools.find((x) => x.name === 'search')!,
            'the company is located in',
          ),
        ).toBe(k);
      }
      expect(await passages(builtinTaskTools(cfg, 'chat')!.tools[0]!, 'born in')).toBe(k);
      expect(await passages(builtinTaskTools(cfg, 'served')!.tools[0]!, 'born in')).toBe(k);
    }
    expect(validateConfig({ model: { init: 'tiny' } }).task.top_k).toBe(2);
  });
});

describe('task.rl_hops and the RL question set', () => {
  it('must be a subset of task.hops, and selects the RL questions among the training questions', async () => {
    const e = errorOf({ model: { init: 'tiny' }, task: { hops: [1, 2], rl_hops: [3] } });
    expect(e.issues[0]).toEqual({ field: 'task.rl_hops', message: '3 is not one of task.hops (1, 2); RL questions are drawn from the training questions' });
    const { multihopKit } = await import('../../../engine/tasks/multihop/kit');
    const kit = multihopKit(validateConfig({ model: { init: 'tiny' }, task: { hops: [1, 2], rl_hops: [2] } }));
    const all = multihopKit(validateConfig({ model: { init: 'tiny' }, task: { hops: [1, 2] } }));
    expect(all.rlTasks).toBeUndefined();
    expect(kit.trainTasks.map((t) => t.id)).toEqual(all.trainTasks.map((t) => t.id));
    expect(kit.rlTasks!.length).toBeGreaterThan(0);
    expect(kit.rlTasks!.every((t) => t.meta?.hops === 2)).toBe(true);
    expect(kit.rlTasks!.length).toBe(all.trainTasks.filter((t) => t.meta?.hops === 2).length);
  });
});
