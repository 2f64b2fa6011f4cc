/**
 * `arbor train <config> [--resume <run>]`: RL training (rollout → reward → advantage → update)
 * with a live progress bar, Ctrl-C = stop after saving a checkpoint (twice = exit at once), and a
 * final summary table.
 */
import type { Command } from 'commander';
import { loadConfig } from '../../train/config';
import { runTrainingLoop } from '../../train/loop';
import { progressBar, renderTable } from '../../train/report';
import { createRunDir, openRun } from '../../train/run';
import { JsonlSink } from '../../train/sinks';
import { openTaskSession } from '../../train/wiring';

/** Ctrl-C: first press aborts the signal (the job saves and stops); a second one exits now. */
export function interruptSignal(onFirst: () => void): { signal: AbortSignal; dispose: () => void } {
  const ac = new AbortController();
  const handler = () => {
    if (ac.signal.aborted) process.exit(130);
    onFirst();
    ac.abort();
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return { signal: ac.signal, dispose: () => (process.off('SIGINT', handler), process.off('SIGTERM', handler)) };
}

export function register(program: Command): void {
  program
    .command('train')
    .description('train an agent with RL (GRPO/PPO family) from an experiment config (YAML or JSON)')
    .argument('[config]', 'experiment config file (optional with --resume)')
    .option('--resume <run>', 'continue a run (id or folder) from its last checkpoint')
    .option('--run-dir <dir>', 'where to keep the run (default: $ARBOR_HOME/runs/<name>-<time>)')
    .option('--steps <n>', 'override steps', (v) => Number(v))
    .option('--print-config', 'print the resolved config (all defaults filled) and exit')
    .option('--json', 'print the final result as one JSON object on stdout')
    .action(async (configFile: string | undefined, o: { resume?: string; runDir?: string; steps?: number; printConfig?: boolean; json?: boolean }) => {
      if (!configFile && !o.resume) throw new Error('give a config file, or --resume <run>');
      const run = o.resume ? openRun(o.resume) : undefined;
      const cfg = configFile ? loadConfig(configFile, (raw) => o.steps !== undefined && (raw.steps = o.steps)) : run!.cfg;
      if (o.steps !== undefined) cfg.steps = o.steps;
      if (o.printConfig) {
        console.log(JSON.stringify(cfg, null, 2));
        return;
      }
      const { id, dir } = run ?? createRunDir(cfg, o.runDir);
      const session = await openTaskSession(cfg);
      const bar = progressBar('train', cfg.steps, { quiet: o.json, fields: ['reward', 'em', 'tools'] });
      const stop = interruptSignal(() => process.stderr.write('\nstopping after this step (checkpoint will be saved); Ctrl-C again to quit now\n'));
      try {
        const res = await runTrainingLoop(cfg, { ...session.ports, sink: new JsonlSink(dir) }, {
          runDir: dir,
          resume: !!run,
          signal: stop.signal,
          onStep: (step, m) => bar.update(step, { reward: m['reward/mean']!, em: m['exact_match']!, tools: m['tool_calls_per_episode']! }),
        });
        bar.stop();
        const summary = { run: id, dir, ...res, lastCheckpoint: res.lastCheckpoint?.dir };
        if (o.json) console.log(JSON.stringify(summary));
        else {
          console.log(`run ${id} ${res.stopped ? 'stopped' : 'finished'} at step ${res.lastStep} (started at ${res.firstStep}); checkpoint ${res.lastCheckpoint?.dir ?? '-'}`);
          if (res.lastEval) console.log(renderTable(['metric', 'value'], Object.entries(res.lastEval).map(([k, v]) => [k, v])));
        }
      } finally {
        stop.dispose();
        await session.close();
      }
    });
}
