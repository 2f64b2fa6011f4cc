/**
 * `node scripts/bench/run.mjs tool-call-rollout [--reps N] [--questions Q]`: the two-tool task's
 * rollout time (resources/configs/tools.yaml) with the default QuickJS sandbox against
 * `environment.sandbox: process` (V8 vm contexts, before issue 37), same seed, alternating
 * A B A B so that a change of load hits both. Each run is a whole `arbor rollout` command (its
 * start, the sandbox's start, the rollouts, the reward), once with a randomly initialised tiny
 * model (the task's decode plus whatever calls it makes) and once with `--policy expert` (every
 * turn a valid tool call: the sandbox's worst case). Prints each run's wall and CPU seconds (user
 * + system of the whole process tree, from GNU time: steadier than wall on a loaded machine), the
 * medians and their ratios, and the load average before and after (report it with the figures).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const reps = arg('reps', 3);
const questions = arg('questions', 32);
const root = resolve(import.meta.dirname, '../..');
const tmp = mkdtempSync(join(tmpdir(), 'arbor-bench-rollout-'));
const env = { ...process.env, ARBOR_HOME: join(tmp, 'home') };
const base = readFileSync(join(root, 'resources/configs/tools.yaml'), 'utf8').replaceAll('../examples', join(root, 'resources/examples'));
const configs = {
  quickjs: join(tmp, 'tools-quickjs.yaml'),
  process: join(tmp, 'tools-process.yaml'),
};
writeFileSync(configs.quickjs, base);
writeFileSync(configs.process, base.replace(/^ {2}max_calls_per_turn: 2$/m, '  max_calls_per_turn: 2\n  sandbox: process'));
const arbor = join(root, 'bin/arbor.mjs');
const model = join(tmp, 'tiny');
execFileSync(process.execPath, [arbor, 'init-model', '--tiny', '--config', configs.quickjs, '--yes', model], { env, stdio: 'ignore' });

/** One command's wall seconds and CPU seconds (user + system of the command and the processes it waited for: its sandbox). */
const run = (engine: keyof typeof configs, policy: 'model' | 'expert'): { wall: number; cpu: number } => {
  const times = join(tmp, 'time.txt');
  execFileSync(
    '/usr/bin/time',
    [
      '-f',
      '%e %U %S',
      '-o',
      times,
      process.execPath,
      arbor,
      'rollout',
      '--config',
      configs[engine],
      ...(policy === 'model' ? ['--model', model] : ['--policy', 'expert']),
      '--questions',
      String(questions),
      '--seed',
      '1',
      '--out',
      join(tmp, `${engine}-${policy}.jsonl`),
      '--yes',
    ],
    { env, stdio: 'ignore' },
  );
  const [wall, user, sys] = readFileSync(times, 'utf8').trim().split('\n').at(-1)!.split(' ').map(Number);
  return { wall: wall!, cpu: user! + sys! };
};

const load0 = loadavg();
// One untimed run of each first: esbuild's bundle of the sandbox, the approvals, the disk cache.
for (const e of ['quickjs', 'process'] as const) run(e, 'expert');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const list = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(', ');
console.log(`two-tool task rollout (${questions} questions × n 8, seed 1), ${reps} alternating runs each; whole \`arbor rollout\` commands`);
console.log('policy  engine   wall s (each run)                    median   CPU s (each run)                     median   QuickJS/V8 wall, CPU');
for (const policy of ['model', 'expert'] as const) {
  const t = { quickjs: [] as { wall: number; cpu: number }[], process: [] as { wall: number; cpu: number }[] };
  for (let r = 0; r < reps; r++) for (const e of ['quickjs', 'process'] as const) t[e].push(run(e, policy));
  const med = (e: 'quickjs' | 'process', k: 'wall' | 'cpu') => median(t[e].map((x) => x[k]));
  for (const e of ['process', 'quickjs'] as const) {
    const ratio =
      e === 'quickjs' ? `${(med('quickjs', 'wall') / med('process', 'wall')).toFixed(3)}, ${(med('quickjs', 'cpu') / med('process', 'cpu')).toFixed(3)}` : '';
    const cols = [policy.padEnd(7), (e === 'process' ? 'V8 vm' : 'QuickJS').padEnd(8), list(t[e].map((x) => x.wall)).padEnd(36)];
    cols.push(med(e, 'wall').toFixed(2).padStart(6), ' ', list(t[e].map((x) => x.cpu)).padEnd(36), med(e, 'cpu').toFixed(2).padStart(6), ' ', ratio);
    console.log(cols.join(' '));
  }
}
const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
console.log(`load average before ${load(load0)}, after ${load(loadavg())} (${availableParallelism()} cores)`);
rmSync(tmp, { recursive: true, force: true });
