// The built-in two-tool task (task.kind: tools) through the real CLI: resources/configs/tools.yaml
// with a short SFT warm start and 2 RL steps. Its tools and reward are the example's user files
// (sandboxed; lookup reads world.json through ctx.readFile). What the trained tiny model samples
// depends on float rounding (AVX-512 and AVX2 kernels differ), so the training run is checked for
// what holds for any sample (16 stored episodes, each model turn's stored calls being the Hermes
// parse of its text, the reward file's components), and the content check (Hermes calls to both
// tools with their JSON arguments and sandboxed results, stored as training stores them) runs the
// task's scripted expert as the policy. (The learning run itself is a docs figure: docs/areas/train.md.)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { loadConfig } from '../../../engine/config/experiment';
import { hermesFormat } from '../../../engine/env/format-hermes';
import { episodeToRecord } from '../../../engine/run/store-sink';
import { rolloutTextPolicy } from '../../../engine/rollout/engine';
import { openDatabase } from '../../../engine/store/db';
import { openEnvironmentKit } from '../../../engine/tasks/open';
import { trajectoryToEpisode } from '../../../engine/train/trajectories';
import { Store } from '../../../engine/store/store';

const root = join(__dirname, '..', '..', '..');
const home = mkdtempSync(join(tmpdir(), 'arbor-tools-'));
const arbor = (args: string[]) =>
  spawnSync(process.execPath, [join(root, 'bin', 'arbor.mjs'), ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 240_000 });

afterAll(() => rmSync(home, { recursive: true, force: true }));

/** The shipped config with small sizes; the environment's paths made absolute (the copy lives elsewhere). */
function smallConfig(over: Record<string, unknown> = {}, name = 'tools.yaml'): string {
  const cfg = parse(readFileSync(join(root, 'resources', 'configs', 'tools.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  const abs = (p: string) => join(root, 'resources', 'configs', p);
  const env = cfg.environment!;
  env.tools = (env.tools as string[]).map(abs);
  for (const k of ['reward', 'tasks', 'workspace']) env[k] = abs(env[k] as string);
  Object.assign(cfg, {
    model: { init: 'tiny', hidden_size: 64 },
    steps: 2,
    rollout: { ...cfg.rollout, prompts_per_step: 2, n: 4 },
    // A short SFT (what it teaches is not asserted: what a tiny model samples after it differs by CPU).
    sft: { warm_start: true, mistake_rate: cfg.sft.mistake_rate, demos: 16, epochs: 2, batch_size: 8, lr: 0.02 },
    eval: { every: 0, n_questions: 4 },
    optim: { ...cfg.optim, weight_decay: 0 },
    ...over,
    algorithm: { ...cfg.algorithm, dynamic_sampling: { enabled: false } },
    checkpoint: { every: 2, keep: 1 },
  });
  const file = join(home, name);
  writeFileSync(file, stringify(cfg));
  return file;
}

describe('arbor train resources/configs/tools.yaml', () => {
  it('trains 2 steps; every stored model turn holds the Hermes parse of its text, with the reward components', () => {
    const r = arbor(['train', smallConfig(), '--json']);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string; lastStep: number; eval: Record<string, number> };
    expect(out.lastStep).toBe(2);
    expect(out.eval).toHaveProperty('exact_match');
    const store = new Store(openDatabase(join(home, 'arbor.db')));
    try {
      const trajs = store.searchTrajectories({ runId: out.run });
      expect(trajs.length).toBe(16);
      const format = hermesFormat();
      for (const t of trajs) {
        const turns = store.getTrajectory(String(t.id)).turnsData;
        expect(turns[0]!.text).toContain('<tools>lookup(entity),calculator(expression)</tools>');
        const model = turns.filter((u) => u.role === 'model');
        expect(model.length).toBeGreaterThan(0);
        // Whatever was sampled: the stored calls of a turn are the well-formed calls of its text, each with its result.
        for (const u of model) {
          const parsed = format.parse(u.text).calls.filter((c) => !c.parseError);
          const stored = ((u.toolCalls ?? []) as { name: string; result?: string; error?: string }[]).filter((c) => c.name !== '?');
          expect(stored.map((c) => c.name)).toEqual(parsed.map((c) => c.name));
          for (const c of stored) expect(typeof (c.result ?? c.error)).toBe('string');
        }
      }
      expect(store.metricKeys(out.run)).toEqual(expect.arrayContaining(['reward/answer_right', 'reward/right_calls']));
    } finally {
      store.db.close();
    }
    // A checkpoint of the task's own model is a valid model.path (arbor eval, the ablation's SFT start).
    const runDir = readdirSync(join(home, 'runs')).find((d) => readdirSync(join(home, 'runs', d)).includes('checkpoints'))!;
    const ck = join(home, 'runs', runDir, 'checkpoints', 'step-000002');
    const ev = arbor(['eval', ck, '--config', smallConfig(), '--json']);
    expect(ev.status, ev.stderr).toBe(0);
    expect((JSON.parse(ev.stdout.trim().split('\n').pop()!) as { policy: Record<string, number> }).policy).toHaveProperty('exact_match');
  }, 300_000);

  it('the stored trajectories call both tools in Hermes JSON (the scripted expert as the policy, stored as training stores them)', async () => {
    const loaded = await loadConfig(smallConfig({}, 'expert.yaml'));
    const { cfg } = loaded;
    const { env, kit } = await openEnvironmentKit(loaded);
    const store = new Store(openDatabase(join(home, 'expert.db')));
    try {
      const { trajectories } = await rolloutTextPolicy(kit.expert!, {
        tasks: kit.trainTasks.slice(0, 4),
        n: 2,
        seed: 3,
        tokenizer: kit.tokenizer,
        limits: { maxNewTokens: cfg.rollout.max_new_tokens, maxTurns: cfg.rollout.max_turns, maxTotalLength: cfg.rollout.max_total_length },
      });
      const run = store.createRun({ name: 'expert', template: 'tools', config: cfg as unknown as Record<string, unknown> });
      for (const t of trajectories)
        store.writeTrajectory(
          run,
          episodeToRecord(1, trajectoryToEpisode(t), undefined, (ids) => kit.tokenizer.decode(ids)),
        );
      const trajs = store.searchTrajectories({ runId: run });
      expect(trajs.length).toBe(8);
      const calls = trajs.flatMap((t) =>
        store
          .getTrajectory(String(t.id))
          .turnsData.flatMap((u) => (u.toolCalls ?? []) as { name: string; args: Record<string, unknown>; result: string; error?: string }[]),
      );
      const lookups = calls.filter((c) => c.name === 'lookup' && typeof c.args === 'object' && typeof c.args.entity === 'string');
      const sums = calls.filter((c) => c.name === 'calculator' && typeof c.args === 'object' && typeof c.args.expression === 'string');
      expect(lookups.length).toBeGreaterThan(0);
      expect(sums.length).toBeGreaterThan(0);
      // The sandboxed lookup read world.json (a fact, or no entry for a name it does not hold);
      // the calculator computed or refused the expression.
      for (const c of lookups) expect(c.result).toMatch(/was (founded|born) in \d+|no entry for/);
      for (const c of sums) expect(c.result).toMatch(/^-?\d+(\.\d+)?$|error: /);
      // The policy's turns are Hermes calls.
      const turn = store.getTrajectory(String(trajs[0]!.id)).turnsData.find((u) => u.role === 'model')!;
      expect(turn.text).toContain('<tool_call>{"name": "');
    } finally {
      store.db.close();
      await env.close();
    }
  }, 120_000);

  it("the shipped config's cold start: a validation split scored during SFT, RL from its best step", () => {
    const cfg = parse(readFileSync(join(root, 'resources', 'configs', 'tools.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
    const file = smallConfig(
      {
        steps: 1,
        sft: { ...cfg.sft, demos: 16, epochs: 5, batch_size: 8, eval_every: 5 },
        eval: { ...cfg.eval, n_questions: 2, validation: 4 },
        optim: cfg.optim,
      },
      'cold.yaml',
    );
    const c = parse(readFileSync(file, 'utf8')) as { sft: Record<string, unknown> };
    expect(c.sft).toMatchObject({ keep_best: true, schedule: 'constant' });
    const r = arbor(['train', file, '--json']);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string; dir: string; sft: { checkpoint: string; steps: number } };
    const best = JSON.parse(readFileSync(join(out.dir, 'sft', 'checkpoints', 'best.json'), 'utf8')) as { step: number };
    expect(out.sft.checkpoint).toBe(join(out.dir, 'sft', 'checkpoints', `step-${String(best.step).padStart(6, '0')}`));
    const store = new Store(openDatabase(join(home, 'arbor.db')));
    try {
      // The SFT curve (its validation scores) on the SFT warm start's own run, the parent; the "before RL" evaluation on the run.
      const sftRun = store.getRun(out.run).parentId!;
      expect(store.getRun(sftRun).template).toBe('sft');
      expect(store.metricKeys(sftRun)).toEqual(expect.arrayContaining(['sft/val/exact_match', 'sft/val/format_rate']));
      expect(store.metricKeys(out.run)).toContain('sft/eval/exact_match');
    } finally {
      store.db.close();
    }
  }, 300_000);

  it('refuses another format or a missing tool, naming the field', () => {
    const file = smallConfig();
    const cfg = parse(readFileSync(file, 'utf8')) as { environment: { format: string; tools: string[] } };
    cfg.environment.format = 'tags';
    writeFileSync(file, stringify(cfg));
    const a = arbor(['train', file]);
    expect(a.status).not.toBe(0);
    expect(a.stderr).toContain('environment.format');
    cfg.environment.format = 'hermes';
    cfg.environment.tools = cfg.environment.tools.filter((t) => !t.endsWith('calculator.ts'));
    writeFileSync(file, stringify(cfg));
    const b = arbor(['train', file]);
    expect(b.status).not.toBe(0);
    expect(b.stderr).toMatch(/environment\.tools: .*"calculator"/);
    // model.path: only a checkpoint of the task's own model (its tokenizer); a Qwen2 folder is refused.
    const other = join(root, 'tests', 'fixtures', 'models', 'qwen2-f32');
    const c = arbor(['eval', other, '--config', smallConfig()]);
    expect(c.status).not.toBe(0);
    expect(c.stderr).toContain(`model.path: task.kind "tools" trains its built-in tiny model`);
    expect(c.stderr).toContain(join(other, 'tokenizer.json'));
  }, 120_000);
});
