/**
 * `arbor rollout --task <task> (--model <folder> | --policy expert) --n 4 [--questions N]
 *  [--seed S] [--naive-rag] [--out file.jsonl] [--json]`: multi-turn rollouts written as JSONL
 * (one trajectory per line) with a progress bar and a summary (mean reward, exact match, tool
 * calls and errors per episode, tokens/s).
 */
import { modelArg } from '../../hub/cache';
import type { Command } from 'commander';
import { existsSync, statSync } from 'node:fs';
import { given, intFlag, numberFlag } from '../flags';
import { createWriteStream, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { arborHome } from '../../store/db';
import { rollout, rolloutTextPolicy } from '../../rollout/engine';
import { openRolloutSource, type RolloutSource } from '../../tasks/sources';
import { summarize, trajectoryToJsonLine, type RolloutSummary } from '../../rollout/summary';
import { progressBar, renderTable } from '../progress';
import '../../tasks/multihop/rollout';
import { loadConfig, taskKindNames, type ExperimentConfig, type LoadedConfig } from '../../config/experiment';
import { sizeLimits } from '../../run/limits';
import { branchingOptions } from '../../train/rollout-port';
import { openKitSource, rolloutConfig } from '../../tasks/rollout-source';
import { resolveProviders, setDefaultProviders } from '../../tensor/ort';
import { DEVICES, deviceOption } from '../device-option';

/** Where trajectories go without --out: the workspace's rollouts folder, named by task, source and time. */
function defaultOutFile(o: RolloutCliOptions): string {
  const source = o.model
    ? o.model
        .replace(/[\\/]+$/, '')
        .split(/[\\/]/)
        .pop()!
    : `policy-${o.policy ?? 'model'}`;
  const time = new Date().toISOString().replace(/[:.]/g, '-');
  return join(arborHome(), 'rollouts', `${o.task}-${source.replace(/[^A-Za-z0-9_.-]+/g, '_')}${o.naiveRag ? '-naive-rag' : ''}-${time}.jsonl`);
}

interface RolloutCliOptions {
  /** --step: a live rollout you can pause, of a stored checkpoint's task (engine/cli/step.ts). */
  step?: boolean;
  checkpoint?: string;
  device?: string;
  task?: string;
  config?: string;
  dataset?: string;
  tasks?: string;
  tools?: string;
  reward?: string;
  format?: string;
  model?: string;
  policy?: string;
  n: number;
  questions: number;
  seed: number;
  temperature: number;
  topP: number;
  topK: number;
  maxNewTokens?: number;
  maxTurns?: number;
  maxTotalLength?: number;
  batch: number;
  naiveRag?: boolean;
  hops: string;
  worldSeed: number;
  mistakeRate: number;
  out?: string;
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command('rollout')
    .description('run multi-turn tool-use rollouts of a model (or the scripted expert) on a task; trajectories as JSONL')
    .option('--task <task>', `task kind (${taskKindNames().join(', ')}); or give --config`)
    .option('--config <file>', 'an experiment config: its task and environment (format, tools, reward, task file) and rollout limits')
    .option('--dataset <file>', 'task qa: the JSONL dataset')
    .option('--tasks <file>', 'task custom: the JSONL task file ({id, prompt | messages, answers?, meta?})')
    .option('--tools <files>', 'your tool files, comma-separated (any tool names)')
    .option('--reward <file>', 'your reward file')
    .option('--format <name>', 'tool-call format: search-r1, hermes or tags')
    .option('--model <folder>', "HF model folder to sample from (default: the config's model.path)")
    .option('--policy <name>', "built-in text policy instead of a model (expert; replaces the config's model)")
    .option('--n <samples>', "samples per question (GRPO group size; default: the config's rollout.n, else 4)", intFlag('n', 1), 4)
    .option('--questions <count>', 'number of questions', intFlag('questions', 1), 8)
    .option('--seed <seed>', "sampling seed (and question draw; default: the config's seed, else 1)", intFlag('seed'), 1)
    .option('--temperature <t>', "sampling temperature (0 = greedy; default: the config's rollout.temperature, else 1)", numberFlag('temperature', 0), 1)
    .option('--top-p <p>', "nucleus sampling mass (default: the config's rollout.top_p, else 1)", numberFlag('top-p', 0), 1)
    .option('--top-k <k>', 'top-k sampling (0 = off)', intFlag('top-k'), 0)
    .option('--max-new-tokens <n>', "max tokens per model turn (default: the task's)", intFlag('max-new-tokens', 1))
    .option('--max-turns <n>', "max model turns (default: the task's)", intFlag('max-turns', 1))
    .option('--max-total-length <n>', "max prompt + turns tokens (default: the task's)", intFlag('max-total-length', 1))
    .option('--batch <n>', 'max sequences decoded together', intFlag('batch', 1), 16)
    .option('--hops <list>', 'question hop counts, comma-separated', '1,2')
    .option('--world-seed <seed>', 'seed of the synthetic world (questions come from --seed)', intFlag('world-seed'), 1001)
    .option('--mistake-rate <p>', 'expert policy: probability of one mistake per episode', numberFlag('mistake-rate', 0), 0)
    .option('--naive-rag', 'baseline: retrieve once with the question, then answer directly')
    .option('--out <file>', 'JSONL file for the trajectories (default: $ARBOR_HOME/rollouts/<task>-<source>-<time>.jsonl)')
    .option('--json', 'print the summary as one JSON object on stdout (no progress bar)')
    .option('--device <device>', `ONNX Runtime device of --model: ${DEVICES.join(', ')} (default: the config's, else cpu)`, deviceOption)
    .option('--step', 'one episode a step at a time: top-k at each token, force a token, edit a tool result (needs --checkpoint)')
    .option('--checkpoint <id>', 'with --step: a checkpoint of a run (its task and tools); `arbor show <run>` lists them')
    .action(async (o: RolloutCliOptions, cmd: Command) => {
      if (o.step) return stepFromCheckpoint(o);
      if (o.checkpoint) throw new Error('--checkpoint: only with --step (sample a model folder with --model)');
      const loaded = await resolveRolloutOptions(o, cmd);
      const src = await openSource(o, loaded);
      await writeRollouts(o, loaded?.cfg, src);
    });
}

/** `--step`: one live episode of a stored checkpoint (engine/cli/step.ts); the flags that pick a model or task are refused. */
async function stepFromCheckpoint(o: RolloutCliOptions): Promise<void> {
  const other = Object.entries({
    '--model': o.model,
    '--policy': o.policy,
    '--task': o.task,
    '--config': o.config,
    '--out': o.out,
    '--json': o.json,
  }).find(([, v]) => v);
  if (other) throw new Error(`${other[0]}: not with --step (the checkpoint's run gives the model, task and tools; the episode is stored in that run)`);
  const { stepRollout } = await import('../step');
  await stepRollout({ checkpoint: o.checkpoint, temperature: o.temperature, seed: o.seed });
}

/**
 * Check the flags and load --config; fill `o.task`, and the sampling flags the user did not give
 * from the config (a flag's default never overrides a config). Returns the config, if one was given.
 */
async function resolveRolloutOptions(o: RolloutCliOptions, cmd: Command): Promise<LoadedConfig | undefined> {
  if (!o.task && !o.config) throw new Error('give --task <kind> or --config <experiment config>');
  if (o.model && o.policy) throw new Error('give one of --model <folder> or --policy <name>, not both');
  if (o.model) o.model = modelArg(o.model, '--model');
  if (o.out && existsSync(o.out) && statSync(o.out).isDirectory()) throw new Error(`--out: ${o.out} is a folder; give the JSONL file to write`);
  const loaded = o.config ? await loadConfig(o.config, undefined, { job: 'rollout' }) : undefined;
  const base = loaded?.cfg;
  if (!o.model && !o.policy && !base?.model.path) throw new Error('give --model <folder> or --policy <name> (or a --config with model.path)');
  if (base && o.task && o.task !== base.task.kind)
    throw new Error(`--task: ${o.task} differs from the config's task.kind "${base.task.kind}"; give one of them`);
  if (base?.backend === 'tfjs')
    throw new Error('backend: "tfjs" does not apply to `arbor rollout` (it samples with ONNX Runtime\'s KV-cache decode graph); remove it');
  o.task ??= base!.task.kind;
  if (base) {
    if (!given(cmd, 'n')) o.n = base.rollout.n;
    if (!given(cmd, 'seed')) o.seed = base.seed;
    if (!given(cmd, 'temperature')) o.temperature = base.rollout.temperature;
    if (!given(cmd, 'topP')) o.topP = base.rollout.top_p;
  }
  return loaded;
}

/** Open what the rollouts sample from (a model or a text policy) and their tasks, on the chosen device. */
async function openSource(o: RolloutCliOptions, loaded: LoadedConfig | undefined): Promise<RolloutSource> {
  const base = loaded?.cfg;
  // The model's sessions run on this device (checked before anything is opened).
  const device = o.device ?? base?.device ?? 'cpu';
  if (o.model || (base?.model.path && !o.policy)) setDefaultProviders(await resolveProviders(device));
  const req = {
    task: o.task!,
    model: o.model,
    policy: o.policy,
    questions: o.questions,
    seed: o.seed,
    mode: (o.naiveRag ? 'naive-rag' : 'tools') as 'naive-rag' | 'tools',
    maxBatch: o.batch,
    options: {
      hops: o.hops.split(',').map(Number),
      worldSeed: o.worldSeed,
      mistakeRate: o.mistakeRate,
      ...(o.dataset ? { dataset: o.dataset } : {}),
      ...(o.tasks ? { tasks: o.tasks } : {}),
      ...(o.tools ? { tools: o.tools.split(',').map((t) => t.trim()) } : {}),
      ...(o.reward ? { reward: o.reward } : {}),
      ...(o.format ? { format: o.format } : {}),
    },
  };
  // The multi-hop world has its own opener (world and question seeds); every other kind is its training kit.
  const useKit = base !== undefined || o.task !== 'multihop' || o.format !== undefined || o.tools !== undefined || o.reward !== undefined;
  if (useKit && o.naiveRag) throw new Error("--naive-rag is the multi-hop task's baseline (arbor rollout --task multihop --naive-rag)");
  if (!useKit) return await openRolloutSource(req);
  // The limits neither the config nor a flag set are sized from the task, as training sized them
  // (else a call longer than the default max_new_tokens is cut and every such episode fails); a
  // limit a flag sets is the researcher's, checked against the task like a config's.
  const at = rolloutConfig(req, loaded);
  const flags = { max_new_tokens: o.maxNewTokens, max_turns: o.maxTurns, max_total_length: o.maxTotalLength };
  const auto = new Set([...at.defaults].filter((k) => flags[k] === undefined));
  for (const [k, v] of Object.entries(flags)) if (v !== undefined) at.cfg.rollout[k as keyof typeof flags] = v;
  return await openKitSource(at, req, async (kit) => {
    for (const w of await sizeLimits(at.cfg, auto, kit)) process.stderr.write(`warning: ${w}\n`);
  });
}

/** Sample every task `o.n` times into the JSONL file (a progress bar on stderr), then print the summary; closes the source. */
async function writeRollouts(o: RolloutCliOptions, base: ExperimentConfig | undefined, src: RolloutSource): Promise<void> {
  const outFile = o.out ?? defaultOutFile(o);
  mkdirSync(dirname(resolve(outFile)), { recursive: true });
  const out = createWriteStream(outFile);
  const bar = progressBar('rollout', src.tasks.length * o.n, { quiet: o.json, fields: ['tok/s'] });
  try {
    const res = await sample(o, base, src, {
      onTrajectory: (t) => out.write(trajectoryToJsonLine(t) + '\n'),
      onProgress: (p) => bar.update(p.done, { 'tok/s': p.generatedTokens / Math.max(1e-3, p.elapsedMs / 1000) }),
    });
    bar.stop();
    printSummary(o, src.tasks.length, summarize(res.trajectories, res.stats), outFile);
  } finally {
    bar.stop();
    await new Promise<void>((r) => out.end(r));
    await src.close();
  }
}

/** The rollouts themselves: a model with the flags' sampling (and the config's rollout.branching), or the text policy. */
async function sample(
  o: RolloutCliOptions,
  base: ExperimentConfig | undefined,
  src: RolloutSource,
  on: {
    onTrajectory: (t: Parameters<typeof trajectoryToJsonLine>[0]) => void;
    onProgress: (p: { done: number; generatedTokens: number; elapsedMs: number }) => void;
  },
) {
  const limits = {
    maxNewTokens: o.maxNewTokens ?? src.limits.maxNewTokens,
    maxTurns: o.maxTurns ?? src.limits.maxTurns,
    maxTotalLength: o.maxTotalLength ?? src.limits.maxTotalLength,
  };
  const common = { tasks: src.tasks, n: o.n, seed: o.seed, limits, tokenizer: src.tokenizer, ...on };
  // The config's rollout.branching (ARPO/AEPO) applies with --n as the per-prompt budget.
  const branching = base && base.rollout.branching.mode !== 'none' ? branchingOptions({ ...base, rollout: { ...base.rollout, n: o.n } }) : undefined;
  if (branching && !src.backend) throw new Error('rollout.branching: branching rollouts sample from a model (--model), not a text policy');
  return src.backend
    ? await rollout(src.backend, {
        ...common,
        sampling: { temperature: o.temperature, topP: o.topP, topK: o.topK },
        stop: src.stop,
        maxBatch: o.batch,
        ...(branching ? { branching } : {}),
      })
    : await rolloutTextPolicy(src.policy!, common);
}

/** The summary: one JSON object with --json, else a table of the metrics and where the trajectories went. */
function printSummary(o: RolloutCliOptions, questions: number, s: RolloutSummary, outFile: string): void {
  if (o.json) {
    const summary = {
      task: o.task,
      source: o.model ?? `policy:${o.policy}`,
      mode: o.naiveRag ? 'naive-rag' : 'tools',
      n: o.n,
      questions,
      seed: o.seed,
      ...s,
      out: outFile,
    };
    console.log(JSON.stringify(summary));
    return;
  }
  const rows: [string, number | string][] = [
    ['trajectories', s.trajectories],
    ['mean reward', s.meanReward],
    ['exact match', s.exactMatch],
    ['format ok', s.formatRate],
    ['tool calls / episode', s.toolCallsPerEpisode],
    ['tool errors / episode', s.toolErrorsPerEpisode],
    ['model turns / episode', s.modelTurnsPerEpisode],
    ['truncated', s.truncatedRate],
    ['generated tokens', s.generatedTokens],
    ['tokens / s', s.tokensPerSecond],
    ['seconds', s.wallSeconds],
    ...Object.entries(s.components).map(([k, v]) => [`reward/${k}`, v] as [string, number]),
  ];
  console.log(
    renderTable(
      ['metric', 'value'],
      rows.map(([k, v]) => [k, v]),
    ),
  );
  console.log(`trajectories → ${outFile}`);
}
