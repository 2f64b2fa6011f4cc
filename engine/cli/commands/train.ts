/**
 * `arbor train <config> [--resume <run>]`: RL training (rollout → reward → advantage → update)
 * with a live progress bar, Ctrl-C = stop after saving a checkpoint (twice = exit at once), and a
 * final summary table.
 */
import { Option, type Command } from 'commander';
import { intFlag } from '../flags';
import { loadConfig, type ExperimentConfig, type LoadedConfig } from '../../config/experiment';
import { applyOverrides, parseSeeds, runSweep } from './sweep';
import { runExperiment, type ExperimentResult } from '../../run/runner';
import { evalTable, progressBar } from '../progress';
import { openRunWithPlugins, type TaskSession } from '../../run/run-dir';
import { JsonlSink, memoryLimitWatcher, recordedRun, teeSink } from '../../run/sinks';
import { claimRunAndOpenTask, type CliStoreRun } from '../../run/store-run';
import { openSftRun } from '../../run/store-sink';
import { interruptSignal, note } from '../lifecycle';
import { bestCheckpoint, checkpointsKept, latestCheckpoint, retentionOf } from '../../train/checkpoints';
import type { SinkPort } from '../../train/loop';
import { fmtBytes, parseBytes } from '../../model/memory-plan';
import { checkRunMemory } from './plan';

/** The flags of `arbor train` (commander's camel-cased names). */
interface TrainCliOptions {
  resume?: string;
  runDir?: string;
  steps?: number;
  printConfig?: boolean;
  json?: boolean;
  store: boolean;
  seed?: number;
  set: string[];
  seeds?: string;
  parallel: number;
  group?: string;
  cell?: string;
  memory?: string;
}

export function register(program: Command): void {
  program
    .command('train')
    .description('train an agent with RL (GRPO/PPO family) from an experiment config (YAML or JSON)')
    .argument('[config]', 'experiment config file (optional with --resume)')
    .option('--resume <run>', 'continue a run (id or folder) from its last checkpoint')
    .option('--run-dir <dir>', 'where to keep the run (default: $ARBOR_HOME/runs/<name>-<time>)')
    .option('--steps <n>', 'override steps', intFlag('steps', 1))
    .option('--print-config', 'print the resolved config (all defaults filled) and exit')
    .option('--json', 'print the final result as one JSON object on stdout')
    .option('--no-store', 'do not record the run in the workspace database (metrics.jsonl only)')
    .option('--seed <n>', "override the config's seed", (v) => parseSeeds(v, '--seed')[0]!)
    .option('--set <key=value>', 'override a config key (dotted path, YAML value); repeatable', (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option('--seeds <list>', 'run the config once per seed (e.g. 0,1,2,3 or 0-3) as one group; `arbor report <group>` summarises it')
    .option('--parallel <n>', 'with --seeds: runs at a time (default 1: one after another)', (v) => Number(v), 1)
    .option(
      '--memory <bytes>',
      "the memory the run must fit (e.g. 24GiB; default: the machine's RAM on the CPU); a run whose memory plan exceeds it is refused",
    )
    .addOption(new Option('--group <id>', 'record the run in this group (set by `arbor sweep`)').hideHelp())
    .addOption(new Option('--cell <label>', "the run's configuration in its group (set by `arbor sweep`)").hideHelp())
    .action(train);
}

/** `arbor train`: a group of runs (--seeds), or one run, new or resumed (--resume). */
async function train(configFile: string | undefined, o: TrainCliOptions): Promise<void> {
  if (!configFile && !o.resume) throw new Error('give a config file, or --resume <run>');
  const memory = o.memory !== undefined ? parseBytes(o.memory) : undefined;
  if (o.seeds !== undefined) return trainSeedGroup(configFile, o.seeds, o, memory);
  if (o.parallel !== 1) throw new Error('--parallel applies to --seeds (a group of runs); give --seeds too');
  if (o.resume && (o.seed !== undefined || o.set.length)) throw new Error("--seed / --set change a new run's config; a resumed run keeps its own");
  if ((o.group || o.cell) && !o.store) throw new Error('--group: a group lives in the workspace database; drop --no-store');
  const run = o.resume ? await openRunWithPlugins(o.resume) : undefined;
  const loaded = await trainConfig(configFile, o, run);
  const { cfg } = loaded;
  if (o.printConfig) {
    console.log(JSON.stringify(cfg, null, 2));
    return;
  }
  // The memory plan (engine/model/memory-plan.ts): its one-line total, and a run that cannot fit is refused before it exists.
  const plan = checkRunMemory(cfg, { memory });
  if (run) refuseFinishedRun(run, cfg, o.steps);
  const { id, dir, rec, session } = await claimRunAndOpenTask(loaded, {
    store: o.store,
    template: cfg.task.kind,
    runDir: o.runDir,
    run,
    runGroup: o.group ? { id: o.group, cell: o.cell ?? 'base' } : undefined,
  });
  for (const w of session.warnings ?? []) process.stderr.write(`warning: ${w}\n`);
  await trainRun(cfg, { id, dir, rec, session, resume: !!run, json: o.json, planTotal: plan?.total });
}

/** `--seeds`: the config once per seed, as one group (engine/cli/commands/sweep.ts). */
async function trainSeedGroup(configFile: string | undefined, seeds: string, o: TrainCliOptions, memory: number | undefined): Promise<void> {
  if (!configFile) throw new Error('--seeds needs a config file (a group is new runs; --resume continues one run)');
  if (o.resume || o.runDir || o.seed !== undefined || o.printConfig || memory !== undefined)
    throw new Error(
      '--seeds cannot be combined with --resume, --run-dir, --seed, --print-config or --memory (each run of a group checks its plan against the RAM)',
    );
  await runSweep(configFile, {
    seeds: parseSeeds(seeds, '--seeds'),
    grid: [],
    set: o.set,
    steps: o.steps,
    parallel: o.parallel,
    json: o.json,
    store: o.store,
  });
}

/** The run's config: the file with --set, --seed and --steps applied, or a resumed run's own (--steps still applies). */
async function trainConfig(configFile: string | undefined, o: TrainCliOptions, run: { loaded: LoadedConfig } | undefined): Promise<LoadedConfig> {
  const loaded = configFile
    ? await loadConfig(
        configFile,
        (raw) => {
          applyOverrides(raw, o.set);
          if (o.seed !== undefined) raw.seed = o.seed;
          if (o.steps !== undefined) raw.steps = o.steps;
        },
        { job: 'train' },
      )
    : run!.loaded;
  if (o.steps !== undefined) loaded.cfg.steps = o.steps;
  return loaded;
}

/** A run that already reached its steps: training on needs a larger --steps, said plainly. */
function refuseFinishedRun(run: { id: string; dir: string }, cfg: ExperimentConfig, steps: number | undefined): void {
  const ck = latestCheckpoint(run.dir);
  if (ck?.state.phase === 'rl' && ck.step >= cfg.steps) {
    throw new Error(
      `run ${run.id} already reached step ${ck.step}${steps === undefined ? ` (its config has steps: ${cfg.steps})` : ` (--steps ${steps} is not larger)`}; to train on, resume with --steps larger than ${ck.step}, e.g. --steps ${ck.step + Math.max(1, cfg.checkpoint.every)}`,
    );
  }
}

/** The claimed run, its folder and store record, and how to report on it. */
interface ClaimedRun {
  id: string;
  dir: string;
  rec: CliStoreRun | undefined;
  session: TaskSession;
  resume: boolean;
  json: boolean | undefined;
  /** The memory plan's total, if there is one (shown beside the peak). */
  planTotal: number | undefined;
}

/**
 * Train the claimed run (SFT warm start if configured, then RL) with progress bars and Ctrl-C =
 * stop after a checkpoint, then print its result; the store record ends completed, stopped or failed.
 */
async function trainRun(cfg: ExperimentConfig, r: ClaimedRun): Promise<void> {
  const { id, dir, rec, session } = r;
  const progress = phaseProgress(cfg.steps, r.json);
  const limits = memoryLimitWatcher((step, hits) =>
    note(`\nwarning: step ${step}: ${hits.length} tool call(s) exceeded the sandbox memory limit (${hits[0]!.name}: ${hits[0]!.error})\n`),
  );
  const notices = runNotices(cfg);
  const stop = interruptSignal((why) => note(`\nstopping after this step (${why}; a checkpoint will be saved); Ctrl-C again to quit now\n`));
  await recordedRun(
    rec,
    async () => {
      const jsonl = new JsonlSink(dir);
      const res = await runExperiment(cfg, {
        runDir: dir,
        session,
        sink: rec ? teeSink(jsonl, rec.sink, limits, notices.sink) : teeSink(jsonl, limits, notices.sink),
        // The SFT warm start as its own run in the workspace, this run's parent (its rows also in the run folder's metrics.jsonl).
        sftRun: rec
          ? (so) => {
              const sft = openSftRun(rec.store, id, so);
              return sft && { ...sft, sink: teeSink(sft.sink, { metrics: (s, v) => jsonl.metrics(s, v), truncateAfter: () => {} }) };
            }
          : undefined,
        resume: r.resume,
        signal: stop.signal,
        onPhase: progress.onPhase,
        onStep: progress.onStep,
      });
      progress.stop();
      // A stop during the SFT warm start ends the job with no RL result: still 'stopped'.
      rec?.finish(res.stopped ? 'stopped' : 'completed');
      const summary = trainSummary(res, {
        id,
        dir,
        warnings: notices.warnings,
        limitHits: limits.count(),
        stepTimes: progress.stepTimes,
        planTotal: r.planTotal,
      });
      if (r.json) console.log(JSON.stringify(summary));
      else printTrainResult(res, summary, cfg.checkpoint.best_metric);
    },
    () => {
      stop.dispose();
      return session.close();
    },
  );
}

/**
 * The progress bar of each phase (SFT: loss; RL: reward, exact match, tool calls; quiet with
 * --json), and the RL steps' times (time/*) for the summary.
 */
function phaseProgress(steps: number, json: boolean | undefined) {
  let bar = progressBar('train', steps, { quiet: true });
  const stepTimes: Record<string, number[]> = {};
  return {
    stepTimes,
    stop: () => bar.stop(),
    onPhase: (phase: 'sft' | 'rl' | 'eval', total: number) => {
      bar.stop();
      bar = progressBar(phase, total, { quiet: json, fields: phase === 'sft' ? ['loss'] : phase === 'rl' ? ['reward', 'em', 'tools'] : [] });
    },
    onStep: (phase: 'sft' | 'rl', step: number, m: Record<string, number>) => {
      if (phase === 'rl') for (const [k, v] of Object.entries(m)) if (k.startsWith('time/')) (stepTimes[k.slice(5)] ??= []).push(v);
      bar.update(step, phase === 'sft' ? { loss: m['sft/loss']! } : { reward: m['reward/mean']!, em: m['exact_match']!, tools: m['tool_calls_per_episode']! });
    },
  };
}

/**
 * A sink that says at once (and keeps for the summary) the "why didn't it learn" warnings (groups
 * flat for 10 steps, no more tool calls), and the first RL checkpoint's size with what the run's
 * retention keeps of them.
 */
function runNotices(cfg: ExperimentConfig): { sink: SinkPort; warnings: string[] } {
  const warnings: string[] = [];
  let sizeSaid = false;
  const sink: SinkPort = {
    metrics() {},
    truncateAfter() {},
    event(kind, p) {
      if (kind === 'checkpoint' && typeof p.bytes === 'number' && Number(p.step) > 0 && !sizeSaid) {
        sizeSaid = true;
        const r = retentionOf(cfg);
        const n = checkpointsKept(cfg.steps, cfg.checkpoint.every, r, cfg.checkpoint.keep_best);
        note(
          `\ncheckpoints: ${fmtBytes(p.bytes)} each; this run keeps at most ${n} (${fmtBytes(n * p.bytes)}): the last ${r.keep}` +
            `${r.keepEvery > 0 ? `, every ${r.keepEvery} steps` : ''}${cfg.checkpoint.keep_best ? ' and the best' : ''} (checkpoint.keep, checkpoint.keep_every, checkpoint.keep_best)\n`,
        );
      }
      if (kind !== 'warning' || typeof p.message !== 'string') return;
      warnings.push(`step ${String(p.step)}: ${p.message}`);
      note(`\nwarning: step ${String(p.step)}: ${p.message}\n`);
    },
  };
  return { sink, warnings };
}

/** The run's result as `--json` prints it. */
function trainSummary(
  res: ExperimentResult,
  r: { id: string; dir: string; warnings: string[]; limitHits: number; stepTimes: Record<string, number[]>; planTotal: number | undefined },
) {
  const rl = res.rl;
  return {
    run: r.id,
    dir: r.dir,
    toolMemoryLimitHits: r.limitHits,
    warnings: r.warnings,
    bestCheckpoint: bestCheckpoint(r.dir)?.dir,
    sft: res.sft,
    firstStep: rl?.firstStep,
    lastStep: rl?.lastStep,
    stopped: res.stopped,
    lastCheckpoint: rl?.lastCheckpoint?.dir,
    sftEval: res.sftEval,
    eval: res.eval,
    // Mean seconds per RL step of this invocation: rollout, update, and with environment.agent its agent / decode split.
    stepTime: Object.keys(r.stepTimes).length
      ? {
          steps: r.stepTimes.rollout_s?.length ?? 0,
          ...Object.fromEntries(Object.entries(r.stepTimes).map(([k, v]) => [k, v.reduce((a, b) => a + b, 0) / v.length])),
        }
      : undefined,
    // The memory plan's total beside what the process peaked at (engine/model/memory-plan.ts).
    memory: { plan: r.planTotal ?? null, peakRss: process.resourceUsage().maxRSS * 1024 },
  };
}

/** The run's result as lines: the SFT warm start, where RL ended, the best checkpoint, warnings, the held-out table, memory. */
function printTrainResult(res: ExperimentResult, summary: ReturnType<typeof trainSummary>, bestMetric: string): void {
  const { sft: s, rl } = res;
  const id = summary.run;
  if (s)
    console.log(
      `SFT warm start: ${s.skipped ? 'loaded from ' + s.checkpoint : `${s.resumedFrom !== undefined ? `continued from step ${s.resumedFrom}, ` : ''}${s.steps}${s.total ? '/' + s.total : ''} steps, final loss ${s.finalLoss.toFixed(4)}`}` +
        (s.complete ? '' : ` (stopped; \`arbor train --resume ${id}\` continues it)`) +
        (s.best ? `; RL starts from step ${s.best.step}, the best validation exact match (${s.best.exactMatch.toFixed(3)}; sft.keep_best)` : ''),
    );
  if (rl)
    console.log(
      `run ${id} ${rl.stopped ? 'stopped' : 'finished'} at step ${rl.lastStep} (started at ${rl.firstStep}); checkpoint ${rl.lastCheckpoint?.dir ?? '-'}`,
    );
  const best = summary.bestCheckpoint;
  if (best !== undefined && best !== rl?.lastCheckpoint?.dir) console.log(`best checkpoint by held-out ${bestMetric}: ${best}`);
  for (const w of summary.warnings) console.log(`warning: ${w}`);
  if (summary.toolMemoryLimitHits)
    console.log(
      `warning: ${summary.toolMemoryLimitHits} tool call(s) exceeded the sandbox memory limit during this run (each became an error observation; see the run's log)`,
    );
  if (res.eval) console.log(evalTable(res.eval, res.sftEval));
  const plan = summary.memory.plan;
  console.log(`memory: peak ${fmtBytes(summary.memory.peakRss)}${plan !== null ? ` (plan ${fmtBytes(plan)})` : ''}`);
}
