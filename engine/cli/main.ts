/**
 * The `arbor` CLI. Each command lives in its own module under ./commands/ and exports
 * `register(program)`; this file only collects them, so areas can add commands independently.
 * `arbor <command>` loads just the modules COMMAND_MODULES names for it (a new command belongs
 * there too: tests/engine/cli/dispatch.test.ts says so; until then it works, loading them all).
 */
// Every built-in estimator, loss, format and task kind registers itself before a command reads a config.
import '../builtins';
import { Command } from 'commander';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { guardOutput } from './lifecycle';
import { cliAsker, setConsentAsker } from '../env/consent';

export type RegisterCommand = (program: Command) => void;

/** Commands that may start MCP servers or load tool/reward files. */
const CONSENT_COMMANDS = [
  ['train'],
  ['sweep'],
  ['sft'],
  ['rollout'],
  ['eval'],
  ['verl-reward'],
  ['serve'],
  ['demo'],
  ['init-model'],
  ['mcp', 'serve'],
  ['export', 'verl'],
];

type CommandModule = { register?: RegisterCommand; extend?: RegisterCommand };

/**
 * Which command modules define each top-level command, so `arbor <command> …` loads only those
 * (loading every module costs a CLI start most of its time). Only a shortcut: a command missing
 * here, or one its modules turn out not to define, loads every module (tests/engine/cli/dispatch.test.ts
 * checks this table against what the modules register).
 */
export const COMMAND_MODULES: Record<string, string[]> = {
  bench: ['bench.ts'],
  demo: ['demo.ts'],
  doctor: ['doctor.ts'],
  eval: ['eval.ts'],
  'verl-reward': ['export-verl.ts'],
  // runs.ts defines `export <run>`; export-verl.ts's extend() adds `export verl`.
  export: ['runs.ts', 'export-verl.ts'],
  generate: ['generate.ts'],
  'init-model': ['init-model.ts'],
  mcp: ['mcp.ts'],
  merge: ['merge.ts'],
  models: ['models.ts'],
  plan: ['plan.ts'],
  pull: ['pull.ts'],
  replay: ['replay.ts'],
  report: ['report.ts'],
  rollout: ['rollout.ts'],
  runs: ['runs.ts'],
  show: ['runs.ts'],
  'import-verl': ['runs.ts'],
  note: ['runs.ts'],
  tag: ['runs.ts'],
  'serve-model': ['serve-model.ts'],
  serve: ['serve.ts'],
  sft: ['sft.ts'],
  sweep: ['sweep.ts'],
  train: ['train.ts'],
};

/**
 * `modules`: the command modules by file name, given by a build that has no commands/ folder to read (scripts/bundle.mjs).
 * `only`: load just these module files (COMMAND_MODULES); absent, every one (help, an unknown command).
 */
export async function buildProgram(modules?: Record<string, CommandModule>, only?: string[]): Promise<Command> {
  const program = new Command('arbor').description('Arbor: a desktop workbench for agentic RL on one machine').showHelpAfterError().enablePositionalOptions();
  const dir = join(dirname(fileURLToPath(import.meta.url)), 'commands');
  const files = (only ?? (modules ? Object.keys(modules) : readdirSync(dir).filter((f) => f.endsWith('.ts')))).sort();
  const extensions: RegisterCommand[] = [];
  for (const f of files) {
    const mod = modules?.[f] ?? ((await import(pathToFileURL(join(dir, f)).href)) as CommandModule);
    if (typeof mod.register !== 'function') throw new Error(`engine/cli/commands/${f} does not export register(program)`);
    mod.register(program);
    if (typeof mod.extend === 'function') extensions.push(mod.extend);
  }
  // `extend(program)` runs after every command exists, to add subcommands to another module's command (`arbor export verl`).
  for (const extend of extensions) extend(program);
  // Commands that open environments take --yes: approve the MCP server commands and tool/reward
  // files a config, folder or stored run would run (engine/env/consent.ts); without it a terminal
  // is asked y/N and no terminal means no.
  for (const path of CONSENT_COMMANDS) {
    let c: Command | undefined = program;
    for (const name of path) c = c?.commands.find((x) => x.name() === name);
    c?.option('--yes', 'approve the MCP server commands and tool/reward files this would run, after reading them (remembered per content hash)');
  }
  program.hook('preAction', (_root, action) => setConsentAsker(cliAsker({ yes: action.opts().yes === true })));
  return program;
}

export async function main(argv: string[], modules?: Record<string, CommandModule>): Promise<void> {
  // A closed output pipe (`arbor runs | head`) ends a command quietly; long jobs stop with a checkpoint.
  guardOutput();
  const program = await programFor(argv, modules);
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    console.error(`arbor: ${err instanceof Error ? err.message : String(err)}`);
    // ARBOR_DEBUG=1: the stack too (for reporting an internal error).
    if (process.env.ARBOR_DEBUG && process.env.ARBOR_DEBUG !== '0' && err instanceof Error && err.stack) console.error(err.stack);
    process.exitCode = 1;
  }
}

/** The program for `argv`: only the modules that define its command when COMMAND_MODULES knows it and they do define it; else all. */
async function programFor(argv: string[], modules?: Record<string, CommandModule>): Promise<Command> {
  const name = argv[0];
  const only = name === undefined || modules || !Object.hasOwn(COMMAND_MODULES, name) ? undefined : COMMAND_MODULES[name];
  if (only) {
    const program = await buildProgram(undefined, only);
    if (program.commands.some((c) => c.name() === name)) return program;
  }
  return buildProgram(modules);
}
