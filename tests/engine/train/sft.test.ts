import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { latestCheckpoint, listCheckpoints, readBest } from '../../../engine/train/checkpoints';
import { validateConfig } from '../../../engine/config/experiment';
import { readTokenDemos, runSft } from '../../../engine/train/sft';
import { trajectoryToDemo } from '../../../engine/train/trajectories';
import type { Trajectory } from '../../../engine/rollout/types';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import { TabularPolicy } from './tabular';

describe('SFT warm start', () => {
  it('learns from demonstrations that include mistakes, with loss only on model tokens, and checkpoints', async () => {
    const cfg = validateConfig({ model: { init: 'tiny' }, sft: { epochs: 4, lr: 0.1, batch_size: 16 } });
    const policy = new TabularPolicy({ prompts: 5, length: 3, vocab: 6, seed: 2 }, cfg);
    const demos = policy.demos(200, 0.25, 9);
    const em = async () => (await policy.sample({ step: 0, seed: 1, prompts: 20, n: 4 })).filter((e) => e.exactMatch).length / 80;
    const before = await em();
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-sft-'));
    const losses: number[] = [];
    const res = await runSft(cfg, demos, policy, { runDir, onStep: (_s, _t, m) => losses.push(m['sft/loss']!) });
    expect(res.steps).toBe(4 * Math.ceil(200 / 16));
    expect(losses[losses.length - 1]!).toBeLessThan(losses[0]! * 0.5);
    expect(await em()).toBeGreaterThan(before + 0.3);
    expect(latestCheckpoint(runDir)?.state.phase).toBe('sft');
  });

  it('sft.keep_best: scores the validation split every eval_every steps and continues from the best step, kept past pruning', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      sft: { epochs: 2, lr: 0.1, batch_size: 16, eval_every: 5, keep_best: true },
      eval: { validation: 10 },
      checkpoint: { keep: 1 },
    });
    const policy = new TabularPolicy({ prompts: 5, length: 3, vocab: 6, seed: 2 }, cfg);
    const demos = policy.demos(96, 0.25, 9); // 6 steps an epoch, 12 in all: scored at 5, 10 and 12
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-sft-'));
    const scores = [0.2, 0.7, 0.4];
    const scoredAt: number[] = [];
    const snapshots = new Map<number, string>();
    let step = 0;
    const loaded: string[] = [];
    const metrics: Record<number, Record<string, number>> = {};
    const res = await runSft(cfg, demos, policy, {
      runDir,
      onStep: (s) => (step = s),
      sink: { metrics: async (s, m) => void (metrics[s] = m), truncateAfter: () => {} },
      validate: async () => {
        scoredAt.push(step + 1); // runs before onStep of its step
        const d = mkdtempSync(join(tmpdir(), 'arbor-sft-snap-'));
        await policy.save(d);
        snapshots.set(step + 1, readFileSync(join(d, readdirSync(d)[0]!), 'utf8'));
        return { exact_match: scores[scoredAt.length - 1]! };
      },
      loadPolicy: async (dir) => {
        loaded.push(dir);
        await policy.load(dir);
      },
    });
    expect(scoredAt).toEqual([5, 10, 12]);
    expect(metrics[10]!['sft/val/exact_match']).toBe(0.7);
    expect(res.best).toMatchObject({ step: 10, value: 0.7 });
    expect(loaded).toEqual([res.best!.dir]);
    // The best step's weights are what the policy holds now, and both checkpoints survive keep: 1.
    const now = mkdtempSync(join(tmpdir(), 'arbor-sft-snap-'));
    await policy.save(now);
    expect(readFileSync(join(now, readdirSync(now)[0]!), 'utf8')).toBe(snapshots.get(10));
    expect(listCheckpoints(runDir).map((c) => c.step)).toEqual([10, 12]);
    expect(readBest(runDir)).toMatchObject({ step: 10, metric: 'exact_match', value: 0.7 });
  });

  it('sft.keep_best across a stop: the resumed SFT remembers the best step the stopped one marked', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      sft: { epochs: 2, lr: 0.1, batch_size: 16, eval_every: 5, keep_best: true },
      eval: { validation: 10 },
      checkpoint: { keep: 1 },
    });
    const policy = new TabularPolicy({ prompts: 5, length: 3, vocab: 6, seed: 2 }, cfg);
    const demos = policy.demos(96, 0.25, 9); // 12 steps, scored at 5, 10 and 12
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-sft-'));
    const scores = [0.6, 0.5, 0.4];
    let calls = 0;
    const loaded: string[] = [];
    const stop = new AbortController();
    const common = {
      runDir,
      validate: async () => ({ exact_match: scores[calls++]! }),
      loadPolicy: async (dir: string) => {
        loaded.push(dir);
        await policy.load(dir);
      },
    };
    const first = await runSft(cfg, demos, policy, { ...common, signal: stop.signal, onStep: (s) => s === 7 && stop.abort() });
    expect(first).toMatchObject({ steps: 7, complete: false });
    expect(first.best).toBeUndefined();
    const second = await runSft(cfg, demos, policy, { ...common, startStep: 7 });
    expect(calls).toBe(3);
    expect(second).toMatchObject({ steps: 12, complete: true, best: { step: 5, value: 0.6 } });
    expect(loaded).toEqual([join(runDir, 'checkpoints', 'step-000005')]);
  });

  it('sft.stop_at ends SFT at the first validation score that reaches it, as a finished warm start; sft.schedule constant keeps the lr', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      sft: { epochs: 4, lr: 0.1, batch_size: 16, eval_every: 5, stop_at: 0.5, schedule: 'constant' },
      eval: { validation: 10 },
    });
    const policy = new TabularPolicy({ prompts: 5, length: 3, vocab: 6, seed: 2 }, cfg);
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-sft-'));
    const scores = [0.1, 0.3, 0.55, 0.9];
    let calls = 0;
    const lrs: number[] = [];
    const events: string[] = [];
    const res = await runSft(cfg, policy.demos(96, 0.25, 9), policy, {
      runDir,
      sink: { metrics: async () => {}, truncateAfter: () => {}, event: (k) => void events.push(k) },
      onStep: (_s, _t, m) => lrs.push(m['sft/lr']!),
      validate: async () => ({ exact_match: scores[calls++]! }),
    });
    expect(res).toMatchObject({ steps: 15, total: 24, complete: true });
    expect(calls).toBe(3);
    expect(events).toContain('sft_stop_at');
    expect(latestCheckpoint(runDir)?.state).toMatchObject({ step: 15, complete: true });
    // 10% warm-up (2 of 24 steps), then the configured lr throughout.
    expect(lrs.slice(2)).toEqual(lrs.slice(2).map(() => 0.1));
    expect(lrs[0]).toBeLessThan(0.1);
  });

  it('sft.eval_every without a validation split, and sft.keep_best without scores, are refused', async () => {
    expect(() => validateConfig({ model: { init: 'tiny' }, sft: { warm_start: true, eval_every: 100 } }, { job: 'train' })).toThrow(
      /sft\.eval_every.*eval\.validation 0/,
    );
    expect(() => validateConfig({ model: { init: 'tiny' }, sft: { warm_start: true, keep_best: true } }, { job: 'train' })).toThrow(
      /sft\.keep_best.*sft\.eval_every 0/,
    );
    expect(() => validateConfig({ model: { init: 'tiny' }, sft: { warm_start: true, stop_at: 0.5 } }, { job: 'train' })).toThrow(
      /sft\.stop_at.*sft\.eval_every 0/,
    );
    expect(() => validateConfig({ model: { init: 'tiny' }, sft: { schedule: 'constant' } }, { job: 'train' })).toThrow(/sft\.schedule.*sft\.warm_start false/);
    expect(() => validateConfig({ model: { init: 'tiny' }, sft: { warm_start: true }, eval: { validation: 50 } }, { job: 'train' })).toThrow(
      /eval\.validation.*sft\.eval_every/,
    );
    const cfg = validateConfig({ model: { init: 'tiny' }, sft: { eval_every: 5 }, eval: { validation: 10 } });
    const policy = new TabularPolicy({ prompts: 5, length: 3, vocab: 6, seed: 2 }, cfg);
    await expect(runSft(cfg, policy.demos(32, 0, 1), policy, {})).rejects.toThrow(/sft\.eval_every: this job has no validation split/);
  });

  it('reads token demos and names the line of a bad one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-sft-'));
    const f = join(dir, 'd.jsonl');
    writeFileSync(f, '{"tokens":[1,2,3],"loss_mask":[0,1,1]}\n\n{"tokens":[1,2],"loss_mask":[0]}\n');
    expect(() => readTokenDemos(f)).toThrow(/d\.jsonl:3: loss_mask: tokens \(2\) and loss_mask \(1\) differ/);
    writeFileSync(f, '{"tokens":[1,2,3],"loss_mask":[0,1,1]}\n');
    expect(readTokenDemos(f)[0]!.lossMask).toEqual(Uint8Array.from([0, 1, 1]));
  });

  it('reads rollout trajectories (loss on model turns only) and names file, line and field of a bad one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-sft-'));
    const f = join(dir, 't.jsonl');
    const traj = {
      taskId: 'q',
      promptIds: [1, 2],
      turns: [
        { role: 'model', tokenIds: [3, 4] },
        { role: 'tool', tokenIds: [5] },
        { role: 'model', tokenIds: [6] },
      ],
    };
    writeFileSync(f, JSON.stringify(traj) + '\n');
    const [d] = readTokenDemos(f);
    expect(d!.tokens).toEqual(Int32Array.from([1, 2, 3, 4, 5, 6]));
    expect(d!.lossMask).toEqual(Uint8Array.from([0, 0, 1, 1, 0, 1]));

    const bad = (row: unknown, opts = {}) => {
      writeFileSync(f, JSON.stringify(traj) + '\n' + JSON.stringify(row) + '\n');
      return () => readTokenDemos(f, opts);
    };
    expect(bad({ ...traj, turns: [{ role: 'assistant', tokenIds: [3] }] })).toThrow(
      `${f}:2: turns[0].role: got "assistant"; allowed values: "model", "tool", "env"`,
    );
    expect(bad({ ...traj, turns: [traj.turns[0], { role: 'tool', tokenIds: [5, 'x'] }] })).toThrow(`${f}:2: turns[1].tokenIds: [1] is "x", not a token id`);
    expect(bad({ ...traj, promptIds: 'hello' })).toThrow(`${f}:2: promptIds: expected an array of token ids`);
    expect(bad({ promptIds: [1], turns: {} })).toThrow(`${f}:2: turns: expected an array of turns`);
    expect(bad(traj, { vocabSize: 6 })).toThrow(`${f}:1: turns[2].tokenIds: [0] is token id 6, outside the model's vocabulary (6 ids)`);
    expect(bad({ tokens: [1, 2], loss_mask: [0, 2] })).toThrow(`${f}:2: loss_mask: [1] is 2, not 0 or 1`);
    expect(bad({ tokens: [1, -2], loss_mask: [0, 1] })).toThrow(`${f}:2: tokens: [1] is -2, not a token id`);
    expect(bad({ messages: [{ role: 'user', content: 'hi' }] })).toThrow(`${f}:2: messages: chat-message demonstrations are not supported`);
    expect(bad({ text: 'hi' })).toThrow(
      `${f}:2: expected a trajectory written by \`arbor rollout\` ({"promptIds", "turns"}) or {"tokens": number[], "loss_mask": number[]}; got fields "text"`,
    );
    expect(bad([1, 2])).toThrow(`${f}:2: expected a JSON object`);
  });

  it('trains from the JSONL that `arbor rollout` writes; `arbor sft` records its run in the workspace store', () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-home-'));
    const env = { ...process.env, ARBOR_HOME: home };
    const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
    const arbor = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env, timeout: 120_000 });
    const file = join(home, 'expert.jsonl');
    const r = arbor('rollout', '--task', 'multihop', '--policy', 'expert', '--n', '1', '--questions', '6', '--out', file, '--json');
    expect(r.status, r.stderr).toBe(0);
    const trajs = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Trajectory);
    const demos = readTokenDemos(file);
    expect(demos.length).toBe(6);
    demos.forEach((d, i) => {
      // The same tokens and mask as the in-process conversion of the trajectory (the rollout's own loss mask).
      const ref = trajectoryToDemo(trajs[i]!);
      expect(d.tokens).toEqual(ref.tokens);
      expect(d.lossMask).toEqual(ref.lossMask);
      expect(trajs[i]!.turns.some((u) => u.role === 'tool')).toBe(true); // observations are in there, masked
    });
    const cfg = join(home, 'sft.yaml');
    writeFileSync(cfg, `model: { init: tiny }\nsft: { demos_path: ${file}, epochs: 2, batch_size: 3 }\n`);
    const s = arbor('sft', cfg, '--no-eval', '--json', '--run-dir', join(home, 'run'));
    expect(s.status, s.stderr).toBe(0);
    expect(JSON.parse(s.stdout.trim().split('\n').pop()!)).toMatchObject({ demos: 6, steps: 4 });
    const runs = () => JSON.parse(arbor('runs', '--json').stdout) as { id: string; status: string; template: string }[];
    expect(runs().find((x) => x.id === 'run')).toMatchObject({ status: 'completed', template: 'sft' });
    const store = new Store(openDatabase(join(home, 'arbor.db')));
    expect(store.metricSeries('run', 'sft/loss').step).toEqual([1, 2, 3, 4]);
    expect(store.checkpoints('run').map((c) => c.step)).toEqual([4]);
    store.db.close();
    // Token ids are checked against the run's model (here the tiny multi-hop model).
    writeFileSync(file, readFileSync(file, 'utf8') + JSON.stringify({ promptIds: [1], turns: [{ role: 'model', tokenIds: [999999] }] }) + '\n');
    const b = arbor('sft', cfg, '--no-eval', '--json', '--run-dir', join(home, 'run2'));
    expect(b.status).toBe(1);
    expect(b.stderr).toMatch(
      new RegExp(`expert\\.jsonl:7: turns\\[0\\]\\.tokenIds: \\[0\\] is token id 999999, outside the model's vocabulary \\(\\d+ ids\\)`),
    );
    expect(runs().find((x) => x.id === 'run2')?.status).toBe('failed');
  });
});
