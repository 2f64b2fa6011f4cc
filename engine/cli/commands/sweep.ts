/**
 * `arbor sweep <config> --grid key=v1,v2 … --seeds 0,1,2,3 [--parallel N]` (and `arbor train
 * <config> --seeds …`): one group of runs, a run per (configuration, seed). Each run is a normal
 * `arbor train` in a child process (its own memory; one failing run does not end the group),
 * recorded in the workspace with its group and cell; one at a time by default (a small machine),
 * `--parallel N` at a time otherwise. The group's report (`arbor report <group>`) is printed at
 * the end. Ctrl-C stops the running runs after their step (checkpoint saved) and starts no more.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../../config/experiment';
import { askConfigConsent } from '../../tasks/open';
import { openDatabase } from '../../store/db';
import { Store } from '../../store/store';
import { createRunGroup, runGroupMembers, getRunGroup, setRunGroupStatus, type RunGroupPlanEntry } from '../../store/groups';
import { buildRunGroupReport } from '../../stats/group-report';
import { interruptSignal, note } from '../lifecycle';
import { printRunGroupReport } from './report';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bin', 'arbor.mjs');

/** "0,1,2,3", "0-3" or a mix ("0-2,7"): distinct non-negative integers, in order. */
export function parseSeeds(text: string, flag: string): number[] {
  const out: number[] = [];
  for (const part of text.split(',').map((p) => p.trim())) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) throw new Error(`${flag}: "${part}" is not a seed (non-negative integers: 0,1,2,3 or 0-3)`);
    const a = Number(m[1]);
    const b = m[2] !== undefined ? Number(m[2]) : a;
    if (b < a) throw new Error(`${flag}: "${part}" is an empty range`);
    for (let s = a; s <= b; s++) if (!out.includes(s)) out.push(s);
  }
  if (!out.length) throw new Error(`${flag}: give at least one seed`);
  return out;
}

/** Set `a.b.c` in a raw config object to a YAML-parsed value ("0.1" → 0.1, "true" → true, "[1,2]" → [1, 2]). */
export function setPath(raw: Record<string, unknown>, path: string, text: string): void {
  const keys = path.split('.');
  if (keys.some((k) => !k)) throw new Error(`--set/--grid: "${path}" is not a config key (dotted path, e.g. sft.steps)`);
  let o = raw;
  for (const k of keys.slice(0, -1)) {
    const next = o[k];
    if (next === undefined || next === null) o = o[k] = {};
    else if (typeof next === 'object' && !Array.isArray(next)) o = next as Record<string, unknown>;
    else throw new Error(`--set/--grid: "${path}": ${k} is not a section of the config`);
  }
  o[keys[keys.length - 1]!] = parseYaml(text) as unknown;
}

/** Apply `key=value` overrides (from --set) to a raw config. */
export function applyOverrides(raw: Record<string, unknown>, sets: readonly string[]): void {
  for (const s of sets) {
    const i = s.indexOf('=');
    if (i <= 0) throw new Error(`--set: "${s}" is not key=value`);
    setPath(raw, s.slice(0, i).trim(), s.slice(i + 1));
  }
}

/** `--grid key=v1,v2` flags → the configurations (the cartesian product), each with a label. */
export function gridCells(grid: readonly string[]): { cell: string; overrides: Record<string, string> }[] {
  let cells: { cell: string; overrides: Record<string, string> }[] = [{ cell: 'base', overrides: {} }];
  for (const g of grid) {
    const i = g.indexOf('=');
    if (i <= 0) throw new Error(`--grid: "${g}" is not key=v1,v2,…`);
    const key = g.slice(0, i).trim();
    // Values split on commas outside brackets, so a list value ([1,2]) stays whole.
    const values = g
      .slice(i + 1)
      .split(/,(?![^[{]*[\]}])/)
      .map((v) => v.trim())
      .filter(Boolean);
    if (!values.length) throw new Error(`--grid: "${g}" has no values`);
    cells = cells.flatMap((c) =>
      values.map((v) => ({ cell: c.cell === 'base' ? `${key}=${v}` : `${c.cell} ${key}=${v}`, overrides: { ...c.overrides, [key]: v } })),
    );
  }
  return cells;
}

export interface SweepOptions {
  seeds: number[];
  grid: string[];
  /** --set overrides applied to every run. */
  set: string[];
  steps?: number;
  parallel: number;
  json?: boolean;
  store: boolean;
  name?: string;
}

export async function runSweep(configFile: string, o: SweepOptions): Promise<string> {
  if (!o.store) throw new Error('--seeds / --grid: a group lives in the workspace database; drop --no-store');
  if (!Number.isInteger(o.parallel) || o.parallel < 1) throw new Error(`--parallel: "${o.parallel}" is not a positive integer`);
  const file = resolve(configFile);
  const cells = gridCells(o.grid);
  // Every configuration is checked before the first run starts: a bad grid value fails now, naming it.
  // What the configurations would run is approved here, once (--yes or the terminal): the runs
  // are child processes without a terminal, and find the approvals remembered.
  let name = o.name;
  for (const c of cells) {
    const loaded = await loadConfig(file, (raw) => {
      applyOverrides(raw, o.set);
      applyOverrides(
        raw,
        Object.entries(c.overrides).map(([k, v]) => `${k}=${v}`),
      );
    });
    await askConfigConsent(loaded, `the runs of ${configFile}`);
    name ??= loaded.cfg.name ?? 'sweep';
  }
  const plan: RunGroupPlanEntry[] = cells.flatMap((c) => o.seeds.map((seed) => ({ cell: c.cell, overrides: c.overrides, seed })));
  const store = new Store(openDatabase());
  const groupId = createRunGroup(store, {
    name: `${name}-${new Date().toISOString().slice(0, 16)}`,
    kind: o.grid.length ? 'grid' : 'seeds',
    configFile: file,
    plan,
  });
  note(`group ${groupId}: ${plan.length} run(s) (${cells.length} configuration(s) × seeds ${o.seeds.join(',')}), ${o.parallel} at a time\n`);

  const live = new Set<ChildProcess>();
  const stop = interruptSignal((why) => note(`\nstopping the group (${why}): running runs stop after their step with a checkpoint; no new run starts\n`));
  stop.signal.addEventListener('abort', () => {
    for (const c of live) c.kill('SIGINT');
  });
  // A second signal quits at once (interruptSignal exits): the runs get their second signal too.
  const onExit = () => {
    for (const c of live) c.kill('SIGINT');
  };
  process.on('exit', onExit);
  // One run at a time: its own progress bars on this terminal's stderr. Several: their stderr is
  // kept for failure reasons, and a line per live run says where each is every 30 s.
  const inherit = o.parallel === 1;
  const ticker = inherit
    ? undefined
    : setInterval(() => {
        const live = runGroupMembers(store, groupId).filter((r) => r.status === 'running');
        if (live.length) note(`  ${live.map((r) => `${r.cell === 'base' ? '' : `${r.cell} `}seed ${r.seed}: step ${r.step}`).join(' · ')}\n`);
      }, 30_000);
  ticker?.unref();
  let next = 0;
  let done = 0;
  const failures: string[] = [];
  const worker = async () => {
    while (next < plan.length && !stop.signal.aborted) {
      const i = next++;
      const p = plan[i]!;
      const label = `${p.cell === 'base' ? '' : `${p.cell}, `}seed ${p.seed}`;
      note(`[${i + 1}/${plan.length}] ${label}: started\n`);
      const args = [BIN, 'train', file, '--seed', String(p.seed), '--group', groupId, '--cell', p.cell];
      for (const s of o.set) args.push('--set', s);
      for (const [k, v] of Object.entries(p.overrides)) args.push('--set', `${k}=${v}`);
      if (o.steps !== undefined) args.push('--steps', String(o.steps));
      // Its own process group: a terminal's Ctrl-C reaches this process, which passes it on once.
      const child = spawn(process.execPath, args, {
        stdio: inherit ? ['ignore', o.json ? 'ignore' : 'inherit', 'inherit'] : ['ignore', 'ignore', 'pipe'],
        detached: true,
      });
      live.add(child);
      let tail = '';
      child.stderr?.on('data', (d: Buffer) => (tail = (tail + d.toString()).slice(-2000)));
      const code = await new Promise<number | null>((res) => child.on('close', (c) => res(c)));
      live.delete(child);
      done++;
      if (code !== 0) {
        const why = tail.trim().split('\n').filter(Boolean).pop() ?? `exit code ${code}`;
        failures.push(`${label}: ${why}`);
        note(`[${done}/${plan.length} done] ${label}: failed (${why})\n`);
      } else note(`[${done}/${plan.length} done] ${label}: finished\n`);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(o.parallel, plan.length) }, () => worker()));
  } finally {
    stop.dispose();
    process.off('exit', onExit);
    if (ticker) clearInterval(ticker);
  }
  setRunGroupStatus(store, groupId, stop.signal.aborted ? 'stopped' : failures.length ? 'failed' : 'completed');
  const report = buildRunGroupReport(getRunGroup(store, groupId), runGroupMembers(store, groupId));
  store.db.close();
  if (o.json) console.log(JSON.stringify(report));
  else printRunGroupReport(report);
  if (failures.length || stop.signal.aborted) process.exitCode = 1;
  return groupId;
}

export function register(program: Command): void {
  program
    .command('sweep')
    .description('run a config over a grid of values and seeds as one group of runs (then `arbor report <group>`)')
    .argument('<config>', 'experiment config file (YAML or JSON)')
    .option(
      '--grid <key=v1,v2>',
      'a config key and its values (dotted path, YAML values); repeat for a product grid',
      (v: string, acc: string[]) => [...acc, v],
      [] as string[],
    )
    .option('--seeds <list>', 'seeds per configuration (0,1,2,3 or 0-3)', '0')
    .option('--set <key=value>', 'override a config key in every run; repeatable', (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option('--steps <n>', 'override steps', (v) => Number(v))
    .option('--parallel <n>', 'runs at a time (default 1: one after another)', (v) => Number(v), 1)
    .option('--name <name>', "the group's name (default: the config's name and the time)")
    .option('--json', 'print the group report as one JSON object on stdout')
    .action(
      async (configFile: string, o: { grid: string[]; seeds: string; set: string[]; steps?: number; parallel: number; name?: string; json?: boolean }) => {
        await runSweep(configFile, { ...o, seeds: parseSeeds(o.seeds, '--seeds'), store: true });
      },
    );
}
