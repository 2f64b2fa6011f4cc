/**
 * Acceptance (#23): `arbor train` on resources/examples/external-agent/train.yaml (its TypeScript
 * agent on the official openai client, started once per episode) runs 2 steps, with small sizes
 * (a short SFT warm start, as tests/engine/tasks/tools-task.test.ts uses, so the tiny model makes
 * Hermes calls and the agent's conversations have several turns). The stored trajectories are
 * multi-turn, with loss mask 1 on the sampled turns and 0 on what the agent added in between, and
 * rollout logprobs; `arbor export` writes them like any run's.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';

const root = join(__dirname, '..', '..', '..');
const example = join(root, 'resources', 'examples', 'external-agent');
const home = mkdtempSync(join(tmpdir(), 'arbor-agent-'));
const arbor = (args: string[]) =>
  spawnSync(process.execPath, [join(root, 'bin', 'arbor.mjs'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, ARBOR_HOME: home },
    timeout: 280_000,
    cwd: home,
  });

afterAll(() => rmSync(home, { recursive: true, force: true }));

function smallConfig(): string {
  const cfg = parse(readFileSync(join(example, 'train.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  const abs = (p: string) => join(example, p);
  const env = cfg.environment!;
  env.tools = (env.tools as string[]).map(abs);
  for (const k of ['reward', 'tasks', 'workspace']) env[k] = abs(env[k] as string);
  env.agent = { ...(env.agent as object), cwd: example, concurrency: 4, mode: 'process' };
  Object.assign(cfg, {
    model: { init: 'tiny', hidden_size: 64 },
    steps: 2,
    rollout: { ...cfg.rollout, prompts_per_step: 2, n: 4, temperature: 1 },
    sft: { warm_start: true, demos: 48, epochs: 10, batch_size: 8, lr: 0.02, mistake_rate: 0.3 },
    eval: { every: 0, n_questions: 4 },
    algorithm: { ...cfg.algorithm, dynamic_sampling: { enabled: false }, old_logprobs: 'rollout' },
    checkpoint: { every: 2, keep: 1 },
  });
  const file = join(home, 'agent.yaml');
  writeFileSync(file, stringify(cfg));
  return file;
}

describe('arbor train with environment.agent', () => {
  it('trains the example agent program 2 steps; its episodes are stored as multi-turn trajectories', () => {
    const r = arbor(['train', smallConfig(), '--json']);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string; lastStep: number; eval: Record<string, number> };
    expect(out.lastStep).toBe(2);
    expect(out.eval).toHaveProperty('exact_match');
    const store = new Store(openDatabase(join(home, 'arbor.db')));
    try {
      const trajs = store.searchTrajectories({ runId: out.run });
      expect(trajs.length).toBeGreaterThanOrEqual(16);
      const full = trajs.map((t) => store.getTrajectory(String(t.id)));
      for (const t of full) {
        const model = t.turnsData.filter((u) => u.role === 'model');
        expect(model.length).toBeGreaterThan(0);
        for (const u of model) {
          const mask = u.lossMask ?? [];
          const lp = u.logprob ?? [];
          expect(mask.length).toBe(u.tokenIds?.length);
          expect(mask.every((x) => x === 1)).toBe(true);
          expect(lp.length).toBe(u.tokenIds?.length);
          expect(lp.every((x) => x <= 0 && Number.isFinite(x))).toBe(true);
          expect(lp.some((x) => x < 0)).toBe(true);
        }
        for (const u of t.turnsData.filter((x) => x.role === 'tool')) expect((u.lossMask ?? [1]).every((x) => x === 0)).toBe(true);
      }
      // The SFT-warm-started model calls the tools: some episodes have several model turns, with the agent's tool results in between.
      const multi = full.filter((t) => t.turnsData.filter((u) => u.role === 'model').length > 1);
      expect(multi.length).toBeGreaterThan(0);
      const obs = multi[0]!.turnsData.find((u) => u.role === 'tool')!;
      expect(obs.text).toContain('<tool_response>');
      expect(store.metricKeys(out.run)).toEqual(expect.arrayContaining(['reward/mean']));
    } finally {
      store.db.close();
    }
    const ex = arbor(['export', out.run, '--format', 'jsonl', '--out', join(home, 'export')]);
    expect(ex.status, ex.stderr).toBe(0);
    expect(existsSync(join(home, 'export.trajectories.jsonl')) || ex.stdout.includes('trajectories')).toBe(true);
  }, 300_000);
});
