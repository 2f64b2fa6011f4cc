/** Schema, migrations, every query, downsampling, import/export, crash safety. */
import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, SCHEMA_VERSION, WorkspaceError } from '../../../engine/store/db';
import { BatchWriter, Store } from '../../../engine/store/store';
import { exportMetricsCsv, exportTrajectoriesJsonl, importVerlDump } from '../../../engine/store/io';

const tmp = () => mkdtempSync(join(tmpdir(), 'arbor-store-'));

describe('schema and migrations', () => {
  it('creates a fresh database at the latest version in WAL mode', () => {
    const db = openDatabase(join(tmp(), 'a.db'));
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
  });
  it('upgrades a database from the first migration in place, keeping its rows', () => {
    const file = join(tmp(), 'old.db');
    const v1 = openDatabase(file, { upTo: 1 });
    expect(v1.pragma('user_version', { simple: true })).toBe(1);
    new Store(v1).db.prepare("INSERT INTO runs (id, name, status, created_at) VALUES ('r1', 'old run', 'completed', 1)").run();
    v1.close();
    const db = openDatabase(file);
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(new Store(db).getRun('r1')).toMatchObject({ name: 'old run', notes: '' });
  });
  it('refuses a newer database and names the file', () => {
    const file = join(tmp(), 'new.db');
    const raw = new Database(file);
    raw.pragma(`user_version = ${SCHEMA_VERSION + 5}`);
    raw.close();
    expect(() => openDatabase(file)).toThrow(new RegExp(`${file}: schema version ${SCHEMA_VERSION + 5} is newer than this Arbor supports`));
  });
  it('a corrupted database file gives a clear error naming the file', () => {
    const file = join(tmp(), 'bad.db');
    writeFileSync(file, Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(4096, 0x5a)]));
    let err: unknown;
    try {
      openDatabase(file);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WorkspaceError);
    expect((err as Error).message).toMatch(new RegExp(`^${file}: not a usable Arbor database`));
  });
});

describe('queries', () => {
  const s = new Store(openDatabase(join(tmp(), 'q.db')));
  const a = s.createRun({ name: 'grpo-a', template: 'multihop', config: { algorithm: { adv_estimator: 'grpo', clip_high: 0.28 }, seed: 1 }, tags: ['grpo'] });
  const b = s.createRun({ name: 'ppo-b', template: 'multihop', config: { algorithm: { adv_estimator: 'gae', clip_high: 0.28 }, seed: 1 }, tags: ['ppo'] });
  s.setStatus(a, 'running');
  s.writeMetrics(a, 1, { 'reward/mean': 0.2 });
  s.writeMetrics(b, 1, { 'reward/mean': 0.5 });
  it('run list filters and sorts (by a metric too)', () => {
    expect(s.listRuns({ tag: 'ppo' }).map((r) => r.id)).toEqual([b]);
    expect(s.listRuns({ status: 'running' }).map((r) => r.id)).toEqual([a]);
    expect(s.listRuns({ sort: 'reward/mean', desc: true }).map((r) => r.id)).toEqual([b, a]);
    expect(s.listRuns({ search: 'grpo' })[0].metrics['reward/mean']).toBeCloseTo(0.2);
  });
  it('config diff shows only differences', () => {
    expect(s.configDiff([a, b])).toEqual({ 'algorithm.adv_estimator': { [a]: '"grpo"', [b]: '"gae"' } });
  });
  it('downsampling keeps first, last, min and max', () => {
    const r = s.createRun({ name: 'long' });
    s.db.transaction(() => {
      for (let i = 0; i < 10000; i++) s.writeMetrics(r, i, { loss: i === 4321 ? 99 : i === 7777 ? -99 : Math.sin(i / 100) });
    })();
    const ser = s.metricSeries(r, 'loss', 1500);
    expect(ser.step.length).toBeLessThanOrEqual(1500);
    expect(ser.step.length).toBeGreaterThan(700);
    expect(ser.step[0]).toBe(0);
    expect(ser.step[ser.step.length - 1]).toBe(9999);
    expect(ser.value).toContain(99);
    expect(ser.value).toContain(-99);
    expect([...ser.step].sort((x, y) => x - y)).toEqual(ser.step);
    expect(s.metricSeries(r, 'loss', 20000).step.length).toBe(10000);
  });
  it('trajectories: search by step, reward range, tool error, task text; groups; per-token BLOBs round-trip', () => {
    const turns = (err: boolean) => [
      { role: 'env', text: 'where was ada born ?', tokenIds: [5, 6, 7] },
      {
        role: 'model',
        text: '<search> ada </search>',
        tokenIds: [1, 2, 3],
        logprob: [-0.5, -0.25, -1],
        entropy: [1, 2, 3],
        lossMask: [1, 1, 1],
        toolCalls: [{ name: 'search', args: { query: 'ada' }, result: 'x', error: err ? 'timeout' : undefined }],
      },
    ];
    for (let g = 0; g < 2; g++)
      for (let k = 0; k < 3; k++)
        s.writeTrajectory(a, {
          step: 1,
          group: g,
          sample: k,
          task: g ? 'who wrote the red river ?' : 'where was ada born ?',
          reward: k / 2,
          turns: turns(k === 2),
        });
    expect(s.searchTrajectories({ runId: a, step: 1 }).length).toBe(6);
    expect(s.searchTrajectories({ runId: a, minReward: 0.5, maxReward: 0.5 }).length).toBe(2);
    expect(s.searchTrajectories({ runId: a, errorsOnly: true }).map((t) => t.sample)).toEqual([2, 2]);
    expect(s.searchTrajectories({ runId: a, task: 'red river' }).every((t) => t.group === 1)).toBe(true);
    expect(s.group(a, 1, 1).map((t) => t.sample)).toEqual([0, 1, 2]);
    const full = s.getTrajectory(s.searchTrajectories({ runId: a })[0].id);
    expect(full.turnsData[1]).toMatchObject({ tokenIds: [1, 2, 3], logprob: [-0.5, -0.25, -1], lossMask: [1, 1, 1] });
    expect(s.trajectorySteps(a)).toEqual([1]);
    expect(full.branch).toBeNull();
  });
  it('keeps where a branched sample left its parent', () => {
    const r = s.createRun({ name: 'branched' });
    const branch = { parent: 0, turn: 2, tokens: 17, entropy: 1.25, deltaH: 0.5, probability: 0.7 };
    s.writeTrajectory(r, { step: 1, group: 0, sample: 0, reward: 1, turns: [{ role: 'env', text: 'q', tokenIds: [1] }] });
    s.writeTrajectory(r, { step: 1, group: 0, sample: 1, reward: 0, turns: [{ role: 'env', text: 'q', tokenIds: [1] }], branch });
    const g = s.group(r, 1, 0);
    expect(g.map((t) => t.branch)).toEqual([null, branch]);
    expect(s.getTrajectory(g[1]!.id).branch).toEqual(branch);
  });
  it('truncateAfter drops later steps and restores latest metrics', () => {
    const r = s.createRun({ name: 'resume' });
    for (let i = 1; i <= 8; i++) s.writeMetrics(r, i, { 'sft/loss': 1 / i }); // a warm start's own step axis
    expect(s.getRun(r).step).toBe(0);
    for (let i = 1; i <= 5; i++) s.writeMetrics(r, i, { x: i });
    expect(s.getRun(r).step).toBe(5);
    s.truncateAfter(r, 3);
    expect(s.metricSeries(r, 'x').step).toEqual([1, 2, 3]);
    expect(s.getRun(r).metrics.x).toBe(3);
    expect(s.getRun(r).step).toBe(3);
    expect(s.metricSeries(r, 'sft/loss').step).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(s.getRun(r).metrics['sft/loss']).toBe(1 / 8);
  });
  it('projects group runs: created on first use, listed with their run counts, filter the run list', () => {
    const p1 = s.createRun({ name: 'p1', project: 'search-r1' });
    const p2 = s.createRun({ name: 'p2', project: ' search-r1 ' });
    const p3 = s.createRun({ name: 'p3', project: 'ablations' });
    expect(s.getRun(p1).project).toBe('search-r1');
    expect(s.getRun(a).project).toBeNull();
    expect(
      s
        .listRuns({ project: 'search-r1' })
        .map((r) => r.id)
        .sort(),
    ).toEqual([p1, p2].sort());
    expect(s.listRuns({ project: 'ablations', sort: 'reward/mean' }).map((r) => r.id)).toEqual([p3]);
    expect(s.projects()).toEqual([
      { name: 'ablations', runs: 1 },
      { name: 'search-r1', runs: 2 },
    ]);
  });
  it('notes, tags, and a resumed run loses its old error', () => {
    const r = s.createRun({ name: 'n', tags: ['x'] });
    s.setNotes(r, 'lr 3e-4 diverged at step 40');
    s.setTags(r, ['sweep', ' sweep', '', 'lr']);
    expect(s.getRun(r)).toMatchObject({ notes: 'lr 3e-4 diverged at step 40', tags: ['sweep', 'lr'] });
    expect(s.listRuns({ tag: 'lr' }).map((x) => x.id)).toEqual([r]);
    expect(() => s.setNotes('missing', 'x')).toThrow('no run with id "missing"');
    s.setStatus(r, 'failed', 'out of memory');
    s.setStatus(r, 'stopped');
    expect(s.getRun(r).error).toBe('out of memory');
    s.setStatus(r, 'running');
    expect(s.getRun(r)).toMatchObject({ status: 'running', error: null });
  });
  it('the batch writer commits off the caller, and afterCommit runs once the rows can be read', async () => {
    const r = s.createRun({ name: 'w' });
    const w = new BatchWriter(s, { intervalMs: 5 });
    w.metrics(r, 1, { loss: 1 });
    w.trajectory(r, { step: 1, group: 0, sample: 0, reward: 1, turns: [{ role: 'model', text: 'x', tokenIds: [1] }] });
    let seen = -1;
    const done = new Promise<void>((res) =>
      w.afterCommit(() => {
        seen = s.searchTrajectories({ runId: r }).length;
        res();
      }),
    );
    expect(seen).toBe(-1); // not committed inside the caller's call
    expect(s.searchTrajectories({ runId: r }).length).toBe(0);
    await done;
    expect(seen).toBe(1);
    expect(s.metricSeries(r, 'loss').value).toEqual([1]);
  });
  it('checkpoints and logs', () => {
    const ck10 = mkdtempSync(join(tmpdir(), 'arbor-ck10-'));
    const ck20 = mkdtempSync(join(tmpdir(), 'arbor-ck20-'));
    s.addCheckpoint(a, 10, ck10);
    expect(s.checkpoints(a)).toMatchObject([{ step: 10, path: ck10 }]);
    // Rows follow the files: a pruned folder's row goes when the next checkpoint is recorded,
    // and is never listed meanwhile.
    rmSync(ck10, { recursive: true });
    expect(s.checkpoints(a)).toEqual([]);
    s.addCheckpoint(a, 20, ck20);
    expect(s.checkpoints(a).map((c) => c.step)).toEqual([20]);
    expect((s.db.prepare('SELECT COUNT(*) AS n FROM checkpoints WHERE run_id = ?').get(a) as { n: number }).n).toBe(1);
    const seq = s.log(a, 'info', 'hello');
    expect(s.logs(a, seq - 1)).toMatchObject([{ text: 'hello', level: 'info' }]);
  });
});

describe('import and export', () => {
  it('imports a verl rollout dump and exports CSV and JSONL', async () => {
    const dir = join(tmp(), 'dump');
    mkdirSync(dir);
    const line = (input: string, score: number, step: number) => JSON.stringify({ input, output: `<answer> x </answer>`, gts: 'x', score, step, acc: score });
    writeFileSync(join(dir, '1.jsonl'), [line('q1', 1, 1), line('q1', 0, 1), line('q2', 1, 1)].join('\n') + '\n');
    writeFileSync(join(dir, '2.jsonl'), [line('q1', 1, 2)].join('\n') + '\n');
    const s = new Store(openDatabase(join(tmp(), 'i.db')));
    const r = await importVerlDump(s, dir);
    expect(r).toMatchObject({ trajectories: 4, steps: [1, 2] });
    const g = s.group(r.runId, 1, 0);
    expect(g.map((t) => t.reward)).toEqual([1, 0]);
    expect(s.getTrajectory(g[0].id).outcomeData).toMatchObject({ components: { acc: 1 } });
    const out = tmp();
    expect(exportMetricsCsv(s, r.runId, join(out, 'm.csv'))).toBe(2);
    expect(readFileSync(join(out, 'm.csv'), 'utf8').split('\n')[0]).toBe('step,time,reward/mean,rollout/samples');
    expect(exportTrajectoriesJsonl(s, r.runId, join(out, 't.jsonl'))).toBe(4);
    writeFileSync(join(dir, '3.jsonl'), '{"input": "q", "output": "o"}\n');
    await expect(importVerlDump(s, dir)).rejects.toThrow(/3\.jsonl:1: missing field "score"/);
  });
});

describe('crash safety', () => {
  it('kill -9 of the writer loses at most the in-flight step and the database stays intact', async () => {
    const file = join(tmp(), 'crash.db');
    openDatabase(file).close();
    for (let round = 0; round < 3; round++) {
      const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'fixtures', 'writer.ts'), file, String(round)], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      await new Promise<void>((resolve) => {
        child.stdout.on('data', (d) => {
          out += d;
          // Kill at a different moment each round, in the middle of writing.
          if ((out.match(/step/g) ?? []).length >= 5 + round * 7) {
            child.kill('SIGKILL');
            resolve();
          }
        });
        child.on('exit', () => resolve());
      });
      await new Promise((r) => child.on('exit', r));
      const db = openDatabase(file);
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      const s = new Store(db);
      const run = s.listRuns({ search: `crash-${round}` })[0];
      const reported = (out.match(/step (\d+) committed/g) ?? []).map((m) => Number(m.split(' ')[1]));
      const lastReported = Math.max(0, ...reported);
      const steps = s.metricSeries(run.id, 'm0', 100000).step;
      // Every step the writer reported as committed is there, complete; nothing beyond one in-flight step.
      expect(steps.slice(0, lastReported)).toEqual(Array.from({ length: lastReported }, (_, i) => i + 1));
      expect(steps.length - lastReported).toBeLessThanOrEqual(1);
      for (let k = 0; k < 10; k++) expect(s.metricSeries(run.id, `m${k}`, 100000).step.length).toBe(steps.length);
      db.close();
    }
  }, 60_000);
});
