// `arbor train` with a user environment: the config's `environment` names TypeScript tool and
// reward files next to it (paths relative to the config file), which run in the sandbox for the
// whole run, exactly as the workbench's "Your environment" template runs them. The real CLI
// process: SFT warm start from expert demos through the user's search tool, one RL step scored
// by the user's reward (its components appear as reward/<name> metrics); a missing file or a
// non-qa task fails before any work with the field named.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeUserEnvironment } from '../server/fixtures/user-environment';

const home = mkdtempSync(join(tmpdir(), 'arbor-cli-env-'));
const ws = join(home, 'myenv');
const arbor = (args: string[]) =>
  spawnSync(process.execPath, [join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, ARBOR_HOME: home },
    timeout: 240_000,
  });

afterAll(() => rmSync(home, { recursive: true, force: true }));

const config = (environment: string, extra = '') => `model: { init: tiny }
task: { kind: qa, dataset: envs/qa.jsonl }
steps: 1
rollout: { prompts_per_step: 2, n: 2, max_turns: 3, max_new_tokens: 12 }
sft: { warm_start: true, epochs: 1, demos: 4, batch_size: 4 }
eval: { every: 0, n_questions: 2 }
checkpoint: { every: 1, keep: 1 }
environment: ${environment}
${extra}`;

describe('arbor train with a user environment', () => {
  it('runs the user tool and reward from files next to the config', () => {
    writeUserEnvironment(ws);
    const file = join(ws, 'train.yaml');
    writeFileSync(file, config('{ tools: [tools/search.ts], reward: rewards/r.ts }'));
    const printed = arbor(['train', file, '--print-config']);
    expect(printed.status, printed.stderr).toBe(0);
    expect(JSON.parse(printed.stdout).environment).toMatchObject({
      format: 'search-r1',
      tools: [join(ws, 'tools', 'search.ts')],
      reward: join(ws, 'rewards', 'r.ts'),
      workspace: ws,
    });
    const r = arbor(['train', file, '--json', '--no-store', '--run-dir', join(home, 'run')]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split('\n').pop()!)).toMatchObject({ lastStep: 1, stopped: false });
    const rows = readFileSync(join(home, 'run', 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { step: number; values: Record<string, number> });
    const rl = rows.find((row) => row.step === 1 && 'reward/mean' in row.values)!;
    // Components of the user's reward file (user_reward, and its own `searched`).
    expect(rl.values).toHaveProperty('reward/user_reward');
    expect(rl.values).toHaveProperty('reward/searched');
  }, 240_000);

  it('names the missing file; a tool the format cannot call names its file and leaves no run row or folder', () => {
    const file = join(ws, 'bad.yaml');
    writeFileSync(file, config('{ tools: [tools/nope.ts] }'));
    const r = arbor(['train', file]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('environment.tools[0]');
    expect(r.stderr).toContain(join(ws, 'tools', 'nope.ts'));
    writeFileSync(
      join(ws, 'tools', 'calc.ts'),
      `export const calculator = { name: 'calculator', description: 'arithmetic', parameters: { type: 'object', properties: { expression: { type: 'string' } } }, execute: () => ({ content: '1', success: true }) };`,
    );
    writeFileSync(file, config('{ tools: [tools/calc.ts] }'));
    // The input is validated before a run row or folder exists (issue 27): nothing is left behind,
    // with the store or without it.
    const m = arbor(['train', file, '--run-dir', join(home, 'refused')]);
    expect(m.status).not.toBe(0);
    expect(m.stderr).toMatch(/environment\.format "search-r1": \S*tools\/calc\.ts: tool "calculator" cannot be called by the search-r1 format/);
    const runs = JSON.parse(arbor(['runs', '--json']).stdout) as { id: string; status: string; error?: string }[];
    expect(runs.find((x) => x.id === 'refused')).toBeUndefined();
    expect(existsSync(join(home, 'refused'))).toBe(false);
    const n = arbor(['train', file, '--run-dir', join(home, 'refused-no-store'), '--no-store']);
    expect(n.status).not.toBe(0);
    expect(n.stderr).toContain('calc.ts');
    expect(existsSync(join(home, 'refused-no-store'))).toBe(false);
  });
});
