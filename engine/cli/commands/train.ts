/**
 * `arbor train <config> [--resume <run>]`: RL training (rollout → reward → advantage → update)
 * with a live progress bar, Ctrl-C = stop after saving a checkpoint (twice = exit at once), and a
 * final summary table.
 */
import type { Command } from 'commander';
import { loadConfig } from '../../train/config';
import { runExperiment } from '../../train/experiment';
import { progressBar, renderTable } from '../../train/report';
import { createRunDir, openRun } from '../../train/run';
import { JsonlSink, teeSink } from '../../train/sinks';
import { openCliStoreRun } from '../store-run';
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
    .option('--no-store', 'do not record the run in the workspace database (metrics.jsonl only)')
    .action(async (configFile: string | undefined, o: { resume?: string; runDir?: string; steps?: number; printConfig?: boolean; json?: boolean; store: boolean }) => {
      if (!configFile && !o.resume) throw new Error('give a config file, or --resume <run>');
      const run = o.resume ? openRun(o.resume) : undefined;
      const cfg = configFile ? loadConfig(configFile, (raw) => o.steps !== undefined && (raw.steps = o.steps)) : run!.cfg;
      if (o.steps !== undefined) cfg.steps = o.steps;
      if (o.printConfig) {
        console.log(JSON.stringify(cfg, null, 2));
        return;
      }
      // The task first: a config it refuses (a tool the format cannot call, a file that does not
      // load) fails before a run folder exists, so no empty run is left behind.
      const session = await openTaskSession(cfg);
      for (const w of session.warnings ?? []) process.stderr.write(`warning: ${w}\n`);
      let created: { id: string; dir: string };
      try {
        created = run ?? createRunDir(cfg, o.runDir);
      } catch (e) {
        await session.close();
        throw e;
      }
      const { id, dir } = created;
      const rec = o.store ? openCliStoreRun(id, cfg, { resume: !!run, template: cfg.task.kind, dir }) : undefined;
      let bar = progressBar('train', cfg.steps, { quiet: true });
      const stop = interruptSignal(() => process.stderr.write('\nstopping after this step (checkpoint will be saved); Ctrl-C again to quit now\n'));
      try {
        const res = await runExperiment(cfg, {
          runDir: dir,
          session,
          sink: rec ? teeSink(new JsonlSink(dir), rec.sink) : new JsonlSink(dir),
          resume: !!run,
          signal: stop.signal,
          onPhase: (phase, total) => {
            bar.stop();
            bar = progressBar(phase, total, { quiet: o.json, fields: phase === 'sft' ? ['loss'] : phase === 'rl' ? ['reward', 'em', 'tools'] : [] });
          },
          onStep: (phase, step, m) =>
            bar.update(step, phase === 'sft' ? { loss: m['sft/loss']! } : { reward: m['reward/mean']!, em: m['exact_match']!, tools: m['tool_calls_per_episode']! }),
        });
        bar.stop();
        const rl = res.rl;
        // A stop during the SFT warm start ends the job with no RL result: still 'stopped'.
        rec?.finish(res.stopped ? 'stopped' : 'completed');
        const summary = { run: id, dir, sft: res.sft, firstStep: rl?.firstStep, lastStep: rl?.lastStep, stopped: res.stopped, lastCheckpoint: rl?.lastCheckpoint?.dir, sftEval: res.sftEval, eval: res.eval };
        if (o.json) console.log(JSON.stringify(summary));
        else {
          const s = res.sft;
          if (s)
            console.log(
              `SFT warm start: ${s.skipped ? 'loaded from ' + s.checkpoint : `${s.resumedFrom !== undefined ? `continued from step ${s.resumedFrom}, ` : ''}${s.steps}${s.total ? '/' + s.total : ''} steps, final loss ${s.finalLoss.toFixed(4)}`}` +
                (s.complete ? '' : ` (stopped; \`arbor train --resume ${id}\` continues it)`),
            );
          if (rl) console.log(`run ${id} ${rl.stopped ? 'stopped' : 'finished'} at step ${rl.lastStep} (started at ${rl.firstStep}); checkpoint ${rl.lastCheckpoint?.dir ?? '-'}`);
          if (res.eval && res.sftEval) console.log(renderTable(['held-out metric', 'SFT alone', 'after RL'], Object.entries(res.eval).map(([k, v]) => [k, res.sftEval![k] ?? '-', v])));
          else if (res.eval) console.log(renderTable(['held-out metric', 'value'], Object.entries(res.eval).map(([k, v]) => [k, v])));
        }
      } catch (e) {
        rec?.finish('failed', e instanceof Error ? e.message : String(e));
        throw e;
      } finally {
        stop.dispose();
        await session.close();
      }
    });
}
