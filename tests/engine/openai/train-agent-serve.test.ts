/**
 * Acceptance (#41): the long-lived agent (environment.agent.mode: serve) trains 2 steps with the
 * example programs, resources/examples/external-agent/agent.ts and agent.py (Python's stdlib only;
 * skipped where python3 is missing), and its episodes are stored as the one-process mode's are for
 * the same seed: the same multi-turn trajectories (token ids, loss masks) with the same rollout
 * logprobs, up to the float rounding of other batch shapes (which episodes share a decode batch
 * depends on timing). All runs start from one short SFT checkpoint (`arbor sft`), so the tiny model
 * makes Hermes calls and conversations have several turns. And a task.kind custom config with the
 * agent and no environment.tools (the agent brings its tools) trains 2 steps.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';

const root = join(__dirname, '..', '..', '..');
const example = join(root, 'resources', 'examples', 'external-agent');
const home = mkdtempSync(join(tmpdir(), 'arbor-agent-serve-'));
const arbor = (args: string[]) =>
  spawnSync(process.execPath, [join(root, 'bin', 'arbor.mjs'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, ARBOR_HOME: home },
    timeout: 240_000,
    cwd: home,
  });
const hasPython = spawnSync('python3', ['--version']).status === 0;

afterAll(() => rmSync(home, { recursive: true, force: true }));

type Cfg = Record<string, Record<string, unknown>>;
function exampleConfig(): Cfg {
  const cfg = parse(readFileSync(join(example, 'train.yaml'), 'utf8')) as Cfg;
  const env = cfg.environment!;
  env.tools = (env.tools as string[]).map((p) => join(example, p));
  for (const k of ['reward', 'tasks', 'workspace']) env[k] = join(example, env[k] as string);
  return cfg;
}
const write = (name: string, cfg: unknown) => {
  const file = join(home, name);
  writeFileSync(file, stringify(cfg));
  return file;
};

let checkpoint = '';
beforeAll(() => {
  // A short SFT on the scripted expert: the model that every run below starts from.
  const cfg = exampleConfig();
  const { agent: _agent, ...env } = cfg.environment!;
  const sft = write('sft.yaml', {
    name: 'agent-sft',
    model: { init: 'tiny', hidden_size: 64 },
    task: cfg.task,
    environment: env,
    rollout: cfg.rollout,
    sft: { epochs: 10, demos: 48, lr: 0.02, batch_size: 8, mistake_rate: 0.3 },
  });
  const r = arbor(['sft', sft, '--no-eval', '--json', '--yes']);
  expect(r.status, r.stderr).toBe(0);
  checkpoint = (JSON.parse(r.stdout.trim().split('\n').pop()!) as { checkpoint: string }).checkpoint;
}, 240_000);

function train(name: string, agent: Record<string, unknown>): string {
  const cfg = exampleConfig();
  delete cfg.environment!.max_calls_per_turn; // a limit of Arbor's own episodes: none run without a warm start
  const file = write(`${name}.yaml`, {
    ...cfg,
    name,
    model: { path: checkpoint },
    environment: { ...cfg.environment, agent: { ...(cfg.environment!.agent as object), cwd: example, concurrency: 8, ...agent } },
    steps: 2,
    rollout: { ...cfg.rollout, prompts_per_step: 2, n: 4 },
    sft: { warm_start: false },
    eval: { every: 0, n_questions: 4 },
    algorithm: { ...cfg.algorithm, dynamic_sampling: { enabled: false } },
    checkpoint: { every: 2, keep: 1 },
  });
  const r = arbor(['train', file, '--json', '--yes']);
  expect(r.status, r.stderr).toBe(0);
  const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string; lastStep: number; stepTime: Record<string, number> };
  expect(out.lastStep).toBe(2);
  expect(r.stderr).not.toMatch(/^agent: /m); // no failed episode
  // --json's per-step split: rollout (of which the agent's share and the model's decode), update.
  expect(Object.keys(out.stepTime)).toEqual(expect.arrayContaining(['steps', 'rollout_s', 'agent_s', 'decode_s', 'update_s']));
  return out.run;
}

type Turn = { role: string; ids: number[]; mask: number[]; lp: number[] };
function stored(run: string): Map<string, Turn[]> {
  const store = new Store(openDatabase(join(home, 'arbor.db')));
  try {
    const out = new Map<string, Turn[]>();
    for (const row of store.searchTrajectories({ runId: run })) {
      const t = store.getTrajectory(String(row.id));
      out.set(
        `${t.step}/${t.group}/${t.sample}`,
        t.turnsData.map((u) => ({ role: u.role, ids: u.tokenIds ?? [], mask: u.lossMask ?? [], lp: u.logprob ?? [] })),
      );
    }
    return out;
  } finally {
    store.db.close();
  }
}

/** Same keys, ids and masks; logprobs within float rounding. */
function expectSame(a: Map<string, Turn[]>, b: Map<string, Turn[]>): void {
  expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
  for (const [k, ta] of a) {
    const tb = b.get(k)!;
    expect(
      tb.map((u) => [u.role, u.ids, u.mask]),
      k,
    ).toEqual(ta.map((u) => [u.role, u.ids, u.mask]));
    ta.forEach((u, i) => u.lp.forEach((p, j) => expect(Math.abs(p - tb[i]!.lp[j]!), `${k} turn ${i} token ${j}`).toBeLessThan(1e-4)));
  }
}

describe('environment.agent.mode serve', () => {
  it("trains 2 steps with agent.ts and agent.py; the episodes are the one-process mode's", () => {
    const perEpisode = stored(train('agent-process', { command: ['node', 'agent.ts'], mode: 'process' }));
    const served = stored(train('agent-serve-ts', { command: ['node', 'agent.ts'], mode: 'serve' }));
    expect(perEpisode.size).toBeGreaterThanOrEqual(16);
    // Multi-turn trajectories: loss mask 1 on the sampled turns with their logprobs, 0 on the agent's tool results.
    const multi = [...served.values()].filter((t) => t.filter((u) => u.role === 'model').length > 1);
    expect(multi.length).toBeGreaterThan(0);
    for (const t of served.values())
      for (const u of t) {
        expect(u.mask.length).toBe(u.ids.length);
        expect(u.mask.every((x) => x === (u.role === 'model' ? 1 : 0))).toBe(true);
        if (u.role === 'model') expect(u.lp.length === u.ids.length && u.lp.every((x) => x <= 0 && Number.isFinite(x))).toBe(true);
      }
    expectSame(perEpisode, served);
    if (hasPython) expectSame(perEpisode, stored(train('agent-serve-py', { command: ['python3', 'agent.py'], mode: 'serve', workers: 2 })));
  }, 600_000);

  it('a task.kind custom config with the agent and no environment.tools trains 2 steps', () => {
    const rows = readFileSync(join(root, 'resources', 'examples', 'tools-task', 'tasks.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .slice(0, 20);
    const tasks = join(home, 'custom.jsonl');
    writeFileSync(
      tasks,
      rows
        .map((l, i) => {
          const r = JSON.parse(l) as { prompt: string; answers: string[] };
          return JSON.stringify({ id: `q${i}`, prompt: r.prompt, answers: r.answers });
        })
        .join('\n'),
    );
    const file = write('custom.yaml', {
      name: 'custom-agent',
      model: { path: checkpoint },
      task: { kind: 'custom' },
      environment: { tasks, agent: { command: ['node', 'agent.ts'], mode: 'serve', concurrency: 8, cwd: example } },
      steps: 2,
      rollout: { prompts_per_step: 2, n: 4, max_turns: 6, max_new_tokens: 32, max_total_length: 384 },
      eval: { every: 0, n_questions: 2 },
      checkpoint: { every: 2, keep: 1 },
    });
    const r = arbor(['train', file, '--json', '--yes']);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string; lastStep: number };
    expect(out.lastStep).toBe(2);
    const trajs = stored(out.run);
    expect(trajs.size).toBeGreaterThanOrEqual(8);
    // The agent's own tool calls and results are recorded from its requests.
    expect([...trajs.values()].some((t) => t.some((u) => u.role === 'tool'))).toBe(true);
  }, 300_000);
});
