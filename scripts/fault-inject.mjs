#!/usr/bin/env node
// Fault injection for `arbor train`: kill -9 at random instants, resume, check the run.
//
//   node scripts/fault-inject.mjs [--kills 20] [--steps 120] [--seed 7] [--keep]
//
// One uninterrupted reference run, then the same config (same seed) trained in a second
// workspace that is killed with SIGKILL `--kills` times at random instants after training has
// started (uniform in 0–1.5 step times after the first progress line, the step time measured on
// the reference run, so a kill lands in rollout, update, checkpoint write or the store commit on
// a machine of any speed) and resumed each time with `arbor train --resume`, then run to the end.
// A resumed run that finishes before its kill lands ends the kills (counted as such, not failed). After every kill it checks, in the workspace database:
//   - integrity: PRAGMA integrity_check is "ok";
//   - the killed run shows `interrupted` (not `running`) once `arbor runs` opens the workspace;
//   - at most the in-flight step is lost: committed metric steps exceed the last complete
//     checkpoint by at most one;
// and after every resume and at the end: no duplicate (key, step) metric rows and no missing
// step (reward/mean has exactly steps 1..N). At the end the final metrics are compared with the
// reference run key by key (wall-clock keys time/* and perf/* excluded).
// Where a kill landed is read from what it left: a `.partial` checkpoint folder (checkpoint
// write), metrics of a step with no checkpoint yet (between the store commit and the checkpoint,
// or mid-step after the commit of the previous one), or nothing new (rollout/update).
// Prints a table; exit code 1 on any failed check.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const require = createRequire(import.meta.url);
const Database = require('better-sqlite3');
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = join(root, 'bin', 'arbor.mjs');

const { values: args } = parseArgs({
  options: {
    kills: { type: 'string', default: '20' },
    steps: { type: 'string', default: '120' },
    seed: { type: 'string', default: '7' },
    keep: { type: 'boolean', default: false },
  },
});
const KILLS = Number(args.kills);
const STEPS = Number(args.steps);
let rng = Number(args.seed) >>> 0;
const rand = () => (rng = (Math.imul(rng, 1664525) + 1013904223) >>> 0) / 2 ** 32;

const work = mkdtempSync(join(tmpdir(), 'arbor-fault-'));
const cfg = join(work, 'fault.yaml');
writeFileSync(
  cfg,
  [
    'name: fault',
    'seed: 11',
    'model: { init: tiny }',
    `steps: ${STEPS}`,
    'threads: 1',
    'rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 12 }',
    'eval: { every: 0, n_questions: 2 }',
    'checkpoint: { every: 1, keep: 2 }',
  ].join('\n'),
);

const env = (home) => ({ ...process.env, ARBOR_HOME: home });
const arbor = (home, ...a) => spawnSync(process.execPath, [bin, ...a], { encoding: 'utf8', env: env(home), timeout: 600_000 });
const open = (home) => new Database(join(home, 'arbor.db'), { readonly: true, fileMustExist: true });
const DETERMINISTIC = (k) => !/^(time|perf)\//.test(k);

function metrics(home, run) {
  const db = open(home);
  try {
    return db.prepare('SELECT key, step, value FROM metrics WHERE run_id = ? ORDER BY key, step').all(run);
  } finally {
    db.close();
  }
}

function checkRows(home, run, upTo) {
  const db = open(home);
  try {
    const dup = db.prepare('SELECT key, step, COUNT(*) AS n FROM metrics WHERE run_id = ? GROUP BY key, step HAVING n > 1').all(run);
    const steps = db
      .prepare("SELECT step FROM metrics WHERE run_id = ? AND key = 'reward/mean' ORDER BY step")
      .all(run)
      .map((r) => r.step);
    const n = upTo ?? steps.at(-1) ?? 0;
    const missing = [];
    for (let s = 1; s <= n; s++) if (!steps.includes(s)) missing.push(s);
    return { duplicates: dup.length, missing: missing.length, steps: steps.length };
  } finally {
    db.close();
  }
}

function checkpointSteps(runDir) {
  const d = join(runDir, 'checkpoints');
  if (!existsSync(d)) return { complete: [], partial: 0 };
  const names = readdirSync(d);
  const complete = names
    .filter((n) => /^step-\d+$/.test(n) && existsSync(join(d, n, 'trainer_state.json')))
    .map((n) => Number(n.slice(5)))
    .sort((a, b) => a - b);
  return { complete, partial: names.filter((n) => n.endsWith('.partial')).length };
}

function start(home, a) {
  const child = spawn(process.execPath, [bin, 'train', ...a], { env: env(home), stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const exited = new Promise((res) => child.on('exit', (code, sig) => res({ code, sig })));
  const started = new Promise((res) => {
    child.stderr.on('data', (d) => {
      err += d;
      if (/^rl \d+\//m.test(err)) res(true);
    });
    void exited.then(() => res(false));
  });
  return { child, exited, started, stderr: () => err };
}

const t0 = Date.now();
// ---- reference: one uninterrupted run --------------------------------------------------------
const refHome = join(work, 'ref');
const ref = arbor(refHome, 'train', cfg, '--run-dir', join(work, 'ref-run'), '--json');
if (ref.status !== 0) throw new Error(`reference run failed:\n${ref.stderr}`);
const refRows = metrics(refHome, 'ref-run');
const refSeconds = (Date.now() - t0) / 1000;
// One step's time on this machine: the median of the reference run's rollout + scoring + update.
const stepSeconds = (() => {
  const per = new Map();
  for (const r of refRows) if (/^time\/(rollout|score|update)_s$/.test(r.key)) per.set(r.step, (per.get(r.step) ?? 0) + r.value);
  const xs = [...per.values()].sort((a, b) => a - b);
  return xs.length ? xs[Math.floor(xs.length / 2)] : 1;
})();

// ---- faulted run ------------------------------------------------------------------------------
const home = join(work, 'faulted');
const runDir = join(work, 'run');
const results = [];
let failures = 0;
let first = true;
let completedEarly = false;
for (let k = 0; k < KILLS; k++) {
  const p = start(home, first ? [cfg, '--run-dir', runDir] : ['--resume', runDir]);
  first = false;
  if (!(await p.started)) {
    const e = await p.exited;
    if (e.code === 0) {
      completedEarly = true; // finished before this kill: nothing left to interrupt
      break;
    }
    throw new Error(`train exited (${e.code}) before its first step:\n${p.stderr()}`);
  }
  // The kill, or the run's own end, whichever comes first.
  const landed = await Promise.race([new Promise((r) => setTimeout(() => r(true), rand() * 1.5 * stepSeconds * 1000)), p.exited.then(() => false)]);
  if (!landed) {
    const e = await p.exited;
    if (e.code !== 0) throw new Error(`train exited (${e.code}) before the kill:\n${p.stderr()}`);
    completedEarly = true;
    process.stderr.write(`kill ${k + 1}: the run completed before it landed; no more kills\n`);
    break;
  }
  p.child.kill('SIGKILL');
  const { sig } = await p.exited;
  const db = open(home);
  const integrity = db.pragma('integrity_check', { simple: true });
  const committed = db.prepare("SELECT MAX(step) AS s FROM metrics WHERE run_id = 'run' AND key = 'reward/mean'").get().s ?? 0;
  db.close();
  const ck = checkpointSteps(runDir);
  const lastCk = ck.complete.at(-1) ?? 0;
  const listed = JSON.parse(arbor(home, 'runs', '--json').stdout).find((r) => r.id === 'run');
  const where = sig !== 'SIGKILL' ? 'exited first' : ck.partial ? 'checkpoint write' : committed > lastCk ? 'after store commit' : 'rollout/update';
  const rows = checkRows(home, 'run');
  const lostOk = committed - lastCk <= 1;
  const ok = integrity === 'ok' && listed?.status === 'interrupted' && lostOk && rows.duplicates === 0 && rows.missing === 0;
  if (!ok) failures++;
  results.push({
    kill: k + 1,
    where,
    committed,
    checkpoint: lastCk,
    status: listed?.status,
    integrity,
    duplicates: rows.duplicates,
    missing: rows.missing,
    ok,
  });
  process.stderr.write(
    `kill ${k + 1}: ${where}, committed step ${committed}, checkpoint ${lastCk}, ${listed?.status}, integrity ${integrity}${ok ? '' : '  <-- FAILED'}\n`,
  );
}
// Run to the end, unless a resumed run already reached it.
if ((checkpointSteps(runDir).complete.at(-1) ?? 0) < STEPS) {
  const fin = arbor(home, 'train', '--resume', runDir, '--json');
  if (fin.status !== 0) throw new Error(`final resume failed:\n${fin.stderr}`);
}
const end = checkRows(home, 'run', STEPS);
if (end.duplicates || end.missing) failures++;

// ---- final metrics vs the reference -----------------------------------------------------------
const got = new Map(metrics(home, 'run').map((r) => [`${r.key}@${r.step}`, r.value]));
let compared = 0;
let differing = 0;
let maxAbs = 0;
for (const r of refRows) {
  if (!DETERMINISTIC(r.key)) continue;
  compared++;
  const v = got.get(`${r.key}@${r.step}`);
  const d = v === undefined || v === null || r.value === null ? (v === r.value ? 0 : Infinity) : Math.abs(v - r.value);
  if (d > 0) differing++;
  maxAbs = Math.max(maxAbs, d);
}
const lastRef = Object.fromEntries(refRows.filter((r) => r.step === STEPS && DETERMINISTIC(r.key)).map((r) => [r.key, r.value]));

const count = (w) => results.filter((r) => r.where === w).length;
console.log(
  `\nfault injection: ${results.length} kills (SIGKILL) of \`arbor train\` over ${STEPS} steps, seed ${args.seed}; ${((Date.now() - t0) / 1000).toFixed(0)} s (reference run ${refSeconds.toFixed(0)} s, step ${stepSeconds.toFixed(2)} s)${completedEarly ? `; the run completed before kill ${results.length + 1} of ${KILLS}` : ''}\n`,
);
console.log('| check | result |');
console.log('|---|---|');
console.log(
  `| kills landing in rollout/update / after a store commit / during a checkpoint write | ${count('rollout/update')} / ${count('after store commit')} / ${count('checkpoint write')} |`,
);
console.log(`| database integrity_check failures | ${results.filter((r) => r.integrity !== 'ok').length} |`);
console.log(`| killed run shown \`interrupted\` by the next \`arbor runs\` | ${results.filter((r) => r.status === 'interrupted').length}/${results.length} |`);
console.log(`| kills losing more than the in-flight step | ${results.filter((r) => r.committed - r.checkpoint > 1).length} |`);
console.log(`| duplicate (key, step) metric rows, after kills / at the end | ${results.reduce((a, r) => a + r.duplicates, 0)} / ${end.duplicates} |`);
console.log(`| missing steps, after kills / at the end | ${results.reduce((a, r) => a + r.missing, 0)} / ${end.missing} |`);
console.log(
  `| final metrics vs the uninterrupted run (${compared} values, time/* and perf/* excluded) | ${differing} differ, max abs diff ${maxAbs.toExponential(2)} |`,
);
console.log(`| reward/mean at step ${STEPS} (reference / faulted) | ${lastRef['reward/mean']} / ${got.get(`reward/mean@${STEPS}`)} |`);
console.log(`\n${failures ? `FAILED: ${failures} check(s)` : 'all checks passed'}${args.keep ? `; kept ${work}` : ''}`);
if (!args.keep) rmSync(work, { recursive: true, force: true });
process.exit(failures ? 1 : 0);
