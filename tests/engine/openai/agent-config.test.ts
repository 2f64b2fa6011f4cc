/** environment.agent in the experiment config: defaults, cwd against the config's folder, refusals naming the field. */
import { describe, expect, it } from 'vitest';
import { tmpdir } from 'node:os';
import { validateConfig } from '../../../engine/config/experiment';

const base = (agent: unknown, extra: Record<string, unknown> = {}) => ({
  model: { init: 'tiny' },
  task: { kind: 'custom' },
  environment: { tasks: 't.jsonl', agent },
  ...extra,
});

describe('environment.agent', () => {
  it('fills defaults and resolves cwd against the config folder', () => {
    const cfg = validateConfig(base({ command: ['node', 'agent.ts'] }), { baseDir: tmpdir(), checkFiles: false });
    expect(cfg.environment.agent).toEqual({ command: ['node', 'agent.ts'], mode: 'process', concurrency: 4, timeout_ms: 120000, env: {}, cwd: tmpdir() });
    const served = validateConfig(base({ command: ['node', 'agent.ts'], mode: 'serve', workers: 2, concurrency: 128 }), { checkFiles: false });
    expect(served.environment.agent).toMatchObject({ mode: 'serve', workers: 2, concurrency: 128 });
  });
  it('refuses an empty command, an unknown key, branching rollouts and limits that would have no effect', () => {
    expect(() => validateConfig(base({ command: [] }), { checkFiles: false })).toThrow(/environment\.agent\.command/);
    expect(() => validateConfig(base({ command: ['x'], retries: 2 }), { checkFiles: false })).toThrow(/environment\.agent\.retries: unknown field/);
    expect(() => validateConfig(base({ command: ['x'], workers: 2 }), { checkFiles: false })).toThrow(/environment\.agent\.workers: is for mode "serve"/);
    expect(() => validateConfig(base({ command: ['x'], concurrency: 100 }), { checkFiles: false })).toThrow(
      /environment\.agent\.concurrency: 100 agent processes/,
    );
    expect(() => validateConfig(base({ command: ['x'], mode: 'http' }), { checkFiles: false })).toThrow(/environment\.agent\.mode/);
    expect(() => validateConfig(base({ command: ['x'] }, { rollout: { branching: { mode: 'arpo' } } }), { checkFiles: false })).toThrow(
      /rollout\.branching\.mode/,
    );
    const inert = base({ command: ['x'] });
    (inert.environment as Record<string, unknown>).tool_timeout_ms = 100;
    expect(() => validateConfig(inert, { checkFiles: false })).toThrow(/environment\.tool_timeout_ms: has no effect with environment\.agent/);
    expect(() => validateConfig({ ...inert, sft: { warm_start: true } }, { checkFiles: false })).not.toThrow();
  });
});
