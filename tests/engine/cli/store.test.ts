// `arbor train` records its run in the workspace database: `arbor runs` lists it with its latest
// metrics, `arbor show` has its trajectories, and a resume continues the same store run.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import { HfTokenizer } from '../../../engine/model/tokenizer';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');

describe('arbor train → workspace store', () => {
  it('lists a CLI run with its metrics and trajectories, and resume keeps one store run without duplicated steps', () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-home-'));
    const env = { ...process.env, ARBOR_HOME: home };
    const arbor = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env, timeout: 240_000 });
    const dir = mkdtempSync(join(tmpdir(), 'arbor-cli-'));
    const cfg = join(dir, 'c.yaml');
    writeFileSync(
      cfg,
      [
        'name: cli-store',
        'model: { init: tiny }',
        'steps: 2',
        'rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 12 }',
        'eval: { every: 0, n_questions: 4 }',
        'checkpoint: { every: 1, keep: 1, keep_every: 0 }',
        'logging: { full_trajectories_every: 2 }',
      ].join('\n'),
    );
    const r = arbor('train', cfg, '--json');
    expect(r.status, r.stderr).toBe(0);
    const { run } = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string };

    const runs = JSON.parse(arbor('runs', '--json').stdout) as { id: string; status: string; template: string }[];
    const row = runs.find((x) => x.id === run);
    expect(row?.status).toBe('completed');
    expect(row?.template).toBe('multihop');

    const store = new Store(openDatabase(join(home, 'arbor.db')));
    const series = store.metricSeries(run, 'reward/mean');
    expect(series.step).toEqual([1, 2]);
    // Retention: full turns only for step 2; summaries for both steps.
    const all = store.searchTrajectories({ runId: run });
    expect(new Set(all.map((t) => t.step))).toEqual(new Set([1, 2]));
    expect(all.length).toBe(8);
    const step2 = all.find((t) => t.step === 2)!;
    const step1 = all.find((t) => t.step === 1)!;
    expect(store.getTrajectory(step2.id).turnsData.some((u) => u.role === 'model')).toBe(true);
    expect(store.getTrajectory(step1.id).turnsData.length).toBe(0);
    // checkpoint.keep: 1 pruned step 1's folder, and its row went with it.
    expect(store.checkpoints(run).map((c) => c.step)).toEqual([2]);
    // Checkpoints are complete HF folders: the tokenizer travels with the weights.
    const ck = store.checkpoints(run).at(-1)!;
    expect(HfTokenizer.load(ck.path).encode('<search> alvin </search>').length).toBe(3);
    store.db.close();

    // Seeded and reproducible: a fresh run of the same config gives the same step-1 metrics
    // (everything but wall-clock timings and throughput).
    const again1 = arbor('train', cfg, '--steps', '1', '--json');
    expect(again1.status, again1.stderr).toBe(0);
    const run2 = (JSON.parse(again1.stdout.trim().split('\n').pop()!) as { run: string }).run;
    const s1 = new Store(openDatabase(join(home, 'arbor.db')));
    const deterministic = (id: string) =>
      Object.fromEntries(
        s1
          .metricKeys(id)
          .filter((k) => !/^(time|perf)\//.test(k))
          .map((k) => [k, s1.metricSeries(id, k).value[0]]),
      );
    expect(Object.keys(deterministic(run)).length).toBeGreaterThan(20);
    expect(deterministic(run2)).toEqual(deterministic(run));
    s1.db.close();

    // Resume with more steps continues the same store run.
    const again = arbor('train', '--resume', run, '--steps', '3', '--json');
    expect(again.status, again.stderr).toBe(0);
    const s2 = new Store(openDatabase(join(home, 'arbor.db')));
    expect(s2.metricSeries(run, 'reward/mean').step).toEqual([1, 2, 3]);
    expect(s2.listRuns().filter((x) => x.id === run).length).toBe(1);
    s2.db.close();
  }, 300_000);
});
