/**
 * `npm run bench:store -- [--runs 1000] [--metrics 10] [--steps 10000] [--reps 200] [--db file] [--keep] [--json]`
 *
 * ARCHITECTURE §7 claim: with 1,000 runs × 10 metrics × 10,000 steps (100M metric rows) the run
 * list and one metric series each answer in under 50 ms. This builds that database with the
 * real schema (engine/store/db.ts migrations), then times the Store's own queries:
 *  - `listRuns` default (newest first, 1,000 rows with their latest metrics),
 *  - `listRuns` with a filter and a metric sort (status + name search, sorted by reward/mean),
 *  - `metricSeries` (SQL-downsampled to ~1,500 points) of a random run/key per repetition,
 * and naive peers in the same run, so ratios are reported:
 *  - the full series (10,000 points, same index),
 *  - the full series downsampled in JS (what the query would cost without SQL downsampling),
 *  - the series with the index disabled (`NOT INDEXED`: a scan of every metric row; few reps),
 *  - the run list with one latest-metrics query per run (N+1).
 * The database is built in a temp dir (removed afterwards unless --keep; --db reuses a built one).
 * Rows are generated inside SQLite by one prepared statement per (run, key) — a recursive CTE of
 * 10,000 steps — inside transactions of 10 runs, journal off while building; WAL afterwards, as
 * Arbor opens it.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../engine/store/db';
import { Store } from '../../engine/store/store';

const args = process.argv.slice(2);
const opt = (name: string, def: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const strOpt = (name: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const RUNS = opt('runs', 1000);
const METRICS = opt('metrics', 10);
const STEPS = opt('steps', 10000);
const REPS = opt('reps', 200);
const json = args.includes('--json');
const keep = args.includes('--keep');
const log = (s: string) => !json && process.stderr.write(s + '\n');

const KEYS = ['reward/mean', 'reward/std', 'loss/policy', 'loss/total', 'kl', 'entropy', 'grad_norm', 'lr', 'em', 'response_length'].slice(0, METRICS);
while (KEYS.length < METRICS) KEYS.push(`extra/${KEYS.length}`);
const STATUSES = ['completed', 'completed', 'completed', 'failed', 'stopped', 'running'];
const ALGOS = ['grpo', 'ppo', 'rloo', 'drgrpo'];
const runId = (i: number) => `r${String(i).padStart(5, '0')}`;

const dbArg = strOpt('db');
const dir = dbArg ? null : mkdtempSync(join(tmpdir(), 'arbor-bench-store-'));
const file = dbArg ?? join(dir!, 'arbor.db');
const reuse = !!dbArg && existsSync(file);

function build(): { seconds: number; rows: number } {
  const db = openDatabase(file);
  db.pragma('journal_mode = OFF');
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -262144'); // 256 MiB while building
  const t0 = performance.now();
  const insRun = db.prepare(
    `INSERT INTO runs (id, name, template, status, config, seed, tags, created_at, started_at, ended_at, step) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
  );
  const insParam = db.prepare('INSERT INTO params (run_id, key, value) VALUES (?,?,?)');
  // One statement makes a whole series inside SQLite: a curve with noise, ordered by step so the
  // (run_id, key, step) index grows at its right edge.
  const insSeries = db.prepare(`
    WITH RECURSIVE s(step) AS (SELECT 0 UNION ALL SELECT step + 1 FROM s WHERE step < ? - 1)
    INSERT INTO metrics (run_id, key, step, time, value)
    SELECT ?, ?, step, ? + step * 1.5, ? + ? * step / ? + (random() % 1000000) / 1e7 FROM s`);
  const insLatest = db.prepare(`INSERT INTO latest_metrics (run_id, key, step, time, value)
    SELECT run_id, key, step, time, value FROM metrics WHERE run_id = ? AND key = ? ORDER BY step DESC LIMIT 1`);
  const sortedKeys = [...KEYS].sort();
  const base = 1.7e9;
  const perTx = 10;
  for (let start = 0; start < RUNS; start += perTx) {
    db.transaction(() => {
      for (let i = start; i < Math.min(RUNS, start + perTx); i++) {
        const id = runId(i);
        const algo = ALGOS[i % ALGOS.length];
        const created = base + i * 3600;
        const config = { algorithm: { name: algo, lr: 1e-6 * (1 + (i % 7)), clip_ratio: 0.2 }, rollout: { n: 4 + (i % 5) * 4 }, seed: i };
        insRun.run(
          id,
          `${algo}-multihop-${i}`,
          'multihop',
          STATUSES[i % STATUSES.length],
          JSON.stringify(config),
          i,
          JSON.stringify([algo, i % 3 === 0 ? 'sweep' : 'main']),
          created,
          created + 5,
          created + 5 + STEPS * 1.5,
          STEPS - 1,
        );
        insParam.run(id, 'algorithm.name', JSON.stringify(algo));
        insParam.run(id, 'algorithm.lr', JSON.stringify(config.algorithm.lr));
        insParam.run(id, 'rollout.n', JSON.stringify(config.rollout.n));
        for (const [k, key] of sortedKeys.entries()) {
          insSeries.run(STEPS, id, key, created, (k % 3) * 0.1, 0.5 + ((i * 7 + k) % 10) / 20, STEPS);
          insLatest.run(id, key);
        }
      }
    })();
    if (((start / perTx) | 0) % 10 === 0 || start + perTx >= RUNS) {
      const done = Math.min(RUNS, start + perTx);
      const s = (performance.now() - t0) / 1000;
      log(
        `  built ${done}/${RUNS} runs (${((done * METRICS * STEPS) / 1e6).toFixed(1)}M metric rows) in ${s.toFixed(0)} s, ~${((s / done) * (RUNS - done)).toFixed(0)} s left`,
      );
    }
  }
  db.pragma('journal_mode = WAL');
  db.exec('ANALYZE');
  db.close();
  return { seconds: (performance.now() - t0) / 1000, rows: RUNS * METRICS * STEPS };
}

interface Timing {
  name: string;
  reps: number;
  medianMs: number;
  p95Ms: number;
  minMs: number;
  points?: number;
}

function time(name: string, reps: number, fn: (i: number) => number | void): Timing {
  fn(0); // warm-up (statement preparation, first page reads)
  const t: number[] = [];
  let points: number | undefined;
  for (let i = 0; i < reps; i++) {
    const s = performance.now();
    const p = fn(i + 1);
    t.push(performance.now() - s);
    if (typeof p === 'number') points = p;
  }
  t.sort((a, b) => a - b);
  const q = (f: number) => t[Math.min(t.length - 1, Math.floor(f * t.length))];
  const r = { name, reps, medianMs: q(0.5), p95Ms: q(0.95), minMs: t[0], points };
  log(`  ${name}: median ${r.medianMs.toFixed(2)} ms, p95 ${r.p95Ms.toFixed(2)} ms${points !== undefined ? `, ${points} points` : ''}`);
  return r;
}

/** First/last/min/max per bucket, done in JS over the full series (the naive peer of the SQL downsampling). */
function downsampleJs(step: number[], value: number[], maxPoints: number): number {
  const buckets = Math.max(1, Math.floor(maxPoints / 4));
  const lo = step[0],
    hi = step[step.length - 1];
  const width = (hi - lo + 1) / buckets;
  const keepIdx = new Set<number>();
  let b = -1,
    first = 0,
    minI = 0,
    maxI = 0;
  const flush = (last: number) => {
    keepIdx.add(first);
    keepIdx.add(last);
    keepIdx.add(minI);
    keepIdx.add(maxI);
  };
  for (let i = 0; i < step.length; i++) {
    const bi = Math.floor((step[i] - lo) / width);
    if (bi !== b) {
      if (b >= 0) flush(i - 1);
      b = bi;
      first = minI = maxI = i;
    } else {
      if (value[i] < value[minI]) minI = i;
      if (value[i] > value[maxI]) maxI = i;
    }
  }
  flush(step.length - 1);
  return keepIdx.size;
}

let buildInfo: { seconds: number; rows: number } | null = null;
log(`bench:store — ${RUNS} runs × ${METRICS} metrics × ${STEPS} steps = ${((RUNS * METRICS * STEPS) / 1e6).toFixed(1)}M metric rows, ${file}`);
if (!reuse) buildInfo = build();
else log('  reusing the existing database (--db)');
const sizeBytes = statSync(file).size;
log(
  `  database: ${(sizeBytes / 2 ** 30).toFixed(2)} GiB${buildInfo ? `, built in ${buildInfo.seconds.toFixed(0)} s (${(buildInfo.rows / buildInfo.seconds / 1e6).toFixed(2)}M rows/s)` : ''}`,
);

const db = openDatabase(file);
const store = new Store(db);
const actualRuns = (db.prepare('SELECT COUNT(*) AS n FROM runs').get() as { n: number }).n;
let seed = 12345;
const rand = (n: number) => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed % n;
};

const timings: Timing[] = [];
log('queries:');
timings.push(time('runs list (newest first, 1,000 rows + latest metrics)', Math.max(10, REPS / 10), () => store.listRuns({ limit: 1000 }).length));
timings.push(
  time(
    'runs list (status + name filter, sort by reward/mean)',
    Math.max(10, REPS / 10),
    () => store.listRuns({ status: 'completed', search: 'grpo', sort: 'reward/mean', desc: true }).length,
  ),
);
const latestOne = db.prepare('SELECT key, value FROM latest_metrics WHERE run_id = ?');
timings.push(
  time('peer: runs list, latest metrics one query per run (N+1)', Math.max(10, REPS / 10), () => {
    const rows = db.prepare('SELECT * FROM runs ORDER BY created_at DESC LIMIT 1000').all() as { id: string }[];
    for (const r of rows) latestOne.all(r.id);
    return rows.length;
  }),
);
timings.push(
  time('metric series, SQL-downsampled (store.metricSeries)', REPS, () => store.metricSeries(runId(rand(actualRuns)), KEYS[rand(KEYS.length)]).step.length),
);
const full = db.prepare('SELECT step, value FROM metrics WHERE run_id = ? AND key = ? ORDER BY step');
timings.push(time('peer: full series, no downsampling', REPS, () => full.all(runId(rand(actualRuns)), KEYS[rand(KEYS.length)]).length));
timings.push(
  time('peer: full series downsampled in JS', REPS, () => {
    const rows = full.all(runId(rand(actualRuns)), KEYS[rand(KEYS.length)]) as { step: number; value: number }[];
    return downsampleJs(
      rows.map((r) => r.step),
      rows.map((r) => r.value),
      1500,
    );
  }),
);
const noIndexReps = Math.max(1, opt('noindex-reps', RUNS * METRICS * STEPS > 2e7 ? 3 : 20));
const scan = db.prepare('SELECT step, value FROM metrics NOT INDEXED WHERE run_id = ? AND key = ? ORDER BY step');
timings.push(
  time('peer: full series without the index (NOT INDEXED scan)', noIndexReps, () => scan.all(runId(rand(actualRuns)), KEYS[rand(KEYS.length)]).length),
);
db.close();

const byName = (prefix: string) => timings.find((t) => t.name.startsWith(prefix))!;
const series = byName('metric series');
const list = byName('runs list (status');
const ratios = {
  fullSeriesOverDownsampled: byName('peer: full series, no').medianMs / series.medianMs,
  jsDownsampleOverSql: byName('peer: full series downsampled').medianMs / series.medianMs,
  noIndexOverDownsampled: byName('peer: full series without').medianMs / series.medianMs,
  nPlusOneOverList: byName('peer: runs list, latest').medianMs / byName('runs list (newest').medianMs,
};
const claim = { budgetMs: 50, runListP95Ms: Math.max(list.p95Ms, byName('runs list (newest').p95Ms), seriesP95Ms: series.p95Ms };
const result = {
  runs: actualRuns,
  metrics: METRICS,
  steps: STEPS,
  rows: actualRuns * METRICS * STEPS,
  file,
  sizeBytes,
  buildSeconds: buildInfo?.seconds ?? null,
  timings,
  ratios,
  claim: { ...claim, holds: claim.runListP95Ms < 50 && claim.seriesP95Ms < 50 },
};
if (json) console.log(JSON.stringify(result, null, 2));
else {
  console.log(
    `\n${actualRuns} runs × ${METRICS} metrics × ${STEPS} steps (${(result.rows / 1e6).toFixed(0)}M rows), ${(sizeBytes / 2 ** 30).toFixed(2)} GiB${buildInfo ? `, built in ${buildInfo.seconds.toFixed(0)} s` : ''}\n`,
  );
  const w = Math.max(...timings.map((t) => t.name.length));
  console.log(`${'query'.padEnd(w)}  ${'reps'.padStart(4)}  ${'median ms'.padStart(9)}  ${'p95 ms'.padStart(8)}  ${'rows'.padStart(6)}`);
  for (const t of timings)
    console.log(
      `${t.name.padEnd(w)}  ${String(t.reps).padStart(4)}  ${t.medianMs.toFixed(2).padStart(9)}  ${t.p95Ms.toFixed(2).padStart(8)}  ${String(t.points ?? '').padStart(6)}`,
    );
  console.log(
    `\nratios (median): full series / downsampled ${ratios.fullSeriesOverDownsampled.toFixed(2)}×, JS downsampling / SQL ${ratios.jsDownsampleOverSql.toFixed(2)}×, no index / downsampled ${ratios.noIndexOverDownsampled.toFixed(0)}×, N+1 run list / batched ${ratios.nPlusOneOverList.toFixed(2)}×`,
  );
  console.log(
    `claim "run list and one metric series each under 50 ms": run list p95 ${claim.runListP95Ms.toFixed(1)} ms, series p95 ${claim.seriesP95Ms.toFixed(1)} ms → ${result.claim.holds ? 'holds' : 'does NOT hold'}`,
  );
}
if (dir && !keep) rmSync(dir, { recursive: true, force: true });
else if (dir) log(`kept ${file} (reuse with --db ${file})`);
