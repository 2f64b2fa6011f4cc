/**
 * `arbor sft <config>`: supervised warm start on demonstrations (scripted expert or
 * sft.demos_path). The run is recorded in the workspace store (template "sft"; metrics, the
 * checkpoint, the held-out evaluation) unless --no-store; Ctrl-C stops after the current batch and
 * saves the model (the run is then "stopped").
 */
import { join } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../../config/experiment';
import { evalTable, progressBar } from '../progress';
import { evalMetrics } from '../../tasks/kit';
import { recordedRun, runSink } from '../../run/sinks';
import { claimRunAndOpenTask } from '../../run/store-run';
import { warmStart } from '../../run/runner';
import { interruptSignal, note } from '../lifecycle';

export function register(program: Command): void {
  program
    .command('sft')
    .description('supervised warm start: next-token loss on the model tokens of demonstration trajectories')
    .argument('<config>', 'experiment config file (YAML or JSON)')
    .option('--run-dir <dir>', 'where to keep the run (default: $ARBOR_HOME/runs/<name>-<time>)')
    .option('--no-eval', 'skip the held-out evaluation after training')
    .option('--json', 'print the final result as one JSON object on stdout')
    .option('--no-store', 'do not record the run in the workspace database (metrics.jsonl only)')
    .action(async (configFile: string, o: { runDir?: string; eval: boolean; json?: boolean; store: boolean }) => {
      const loaded = await loadConfig(configFile, undefined, { job: 'sft' });
      const { cfg } = loaded;
      const { id, dir, rec, session } = await claimRunAndOpenTask(loaded, { store: o.store, template: 'sft', runDir: o.runDir });
      const stop = interruptSignal((why) => note(`\nstopping after this batch (${why}; the model will be saved); Ctrl-C again to quit now\n`));
      await recordedRun(
        rec,
        async () => {
          const demos = await session.demos();
          const sftDir = join(dir, 'sft');
          // This run is the SFT (its record is the job's, ended below after the evaluation): its curve as runSft writes it.
          const sink = runSink(sftDir, rec);
          let bar: ReturnType<typeof progressBar> | undefined;
          const res = await warmStart(cfg, session, {
            dir: sftDir,
            demos,
            sink: () => sink,
            signal: stop.signal,
            onStep: (s, total, m) => {
              bar ??= progressBar('sft', total, { quiet: o.json, fields: ['loss'] });
              bar.update(s, { loss: m['sft/loss']! });
            },
          });
          bar?.stop();
          const ev = o.eval && res.complete ? evalMetrics(await session.evaluate(cfg.eval.n_questions)) : undefined;
          if (ev) await sink.metrics(res.steps, Object.fromEntries(Object.entries(ev).map(([k, v]) => [`eval/${k}`, v])));
          rec?.finish(res.complete ? 'completed' : 'stopped');
          const out = {
            run: id,
            demos: demos.length,
            steps: res.steps,
            total: res.total,
            complete: res.complete,
            finalLoss: res.finalLoss,
            checkpoint: res.start,
            ...(res.best ? { best: { step: res.best.step, validationExactMatch: res.best.value } } : {}),
            eval: ev,
          };
          if (o.json) console.log(JSON.stringify(out));
          else {
            console.log(
              `SFT on ${demos.length} demonstrations: ${res.steps}/${res.total} steps${res.complete ? '' : ' (stopped)'}, final loss ${res.finalLoss.toFixed(4)}; model saved to ${res.checkpoint?.dir}`,
            );
            if (res.best) console.log(`best validation exact match ${res.best.value.toFixed(3)} at step ${res.best.step} (sft.keep_best): ${res.best.dir}`);
            if (ev) console.log(evalTable(ev));
          }
        },
        () => {
          stop.dispose();
          return session.close();
        },
      );
    });
}
