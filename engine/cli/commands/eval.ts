/** `arbor eval <checkpoint> --task <task>`: held-out evaluation of an HF checkpoint folder. */
import type { Command } from 'commander';
import { given, intFlag } from '../flags';
import { existsSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { listCheckpoints } from '../../train/checkpoints';
import { loadConfig, TASK_KINDS, validateConfig } from '../../config/experiment';
import { progressBar, renderTable } from '../../experiment/report';
import { evalMetrics } from '../../tasks/kit';
import { openTaskSession } from '../../experiment/open';
import { DEVICES, deviceOption } from '../device-option';

export function register(program: Command): void {
  program
    .command('eval')
    .description('evaluate a checkpoint (HF model folder) on held-out questions of a task')
    .argument('<checkpoint>', 'HF model folder (e.g. <run>/checkpoints/step-000040)')
    .option('--task <task>', `task kind (${TASK_KINDS.join(', ')}); or give --config`)
    .option('--config <file>', 'an experiment config: its task and environment (format, tools, reward, task file)')
    .option('--tasks <file>', 'task custom: the JSONL task file (its held-out fifth is evaluated)')
    .option('--tools <files>', 'your tool files, comma-separated')
    .option('--reward <file>', 'your reward file')
    .option('--format <name>', 'tool-call format: search-r1, hermes or tags')
    .option('--n <questions>', "number of held-out questions (default: the config's eval.n_questions, else 64)", intFlag('n', 1), 64)
    .option('--seed <seed>', "held-out world seed (default: the config's task.eval_seed, else 1001)", intFlag('seed'), 1001)
    .option('--hops <list>', "hop counts, comma-separated (default: the config's task.hops, else 1,2)", '1,2')
    .option('--dataset <file>', 'task qa: the JSONL dataset (its held-out fifth is evaluated)')
    .option('--naive-rag', 'also run the naive RAG baseline on the same questions')
    .option('--json', 'print the result as one JSON object on stdout')
    .option('--device <device>', `ONNX Runtime device: ${DEVICES.join(', ')} (default: the config's device)`, deviceOption)
    .action(
      async (
        checkpoint: string,
        o: {
          task?: string;
          config?: string;
          n: number;
          seed: number;
          hops: string;
          dataset?: string;
          tasks?: string;
          tools?: string;
          reward?: string;
          format?: string;
          naiveRag?: boolean;
          json?: boolean;
          device?: string;
        },
        cmd: Command,
      ) => {
        if (!existsSync(checkpoint) || !statSync(checkpoint).isDirectory()) {
          // Most often a checkpoint that `checkpoint.keep` pruned after newer ones were saved.
          const runDir = dirname(dirname(resolve(checkpoint)));
          const left = basename(dirname(resolve(checkpoint))) === 'checkpoints' ? listCheckpoints(runDir).map((c) => c.dir) : [];
          throw new Error(
            `checkpoint folder not found: ${checkpoint}${left.length ? ` (checkpoint.keep may have pruned it; this run keeps ${left.join(', ')})` : ' (`arbor show <run>` lists the checkpoints that exist)'}`,
          );
        }
        if (!o.task && !o.config) throw new Error('give --task <kind> or --config <experiment config>');
        const base = o.config
          ? (JSON.parse(JSON.stringify(loadConfig(o.config, undefined, { job: 'eval' }))) as Record<string, Record<string, unknown>>)
          : undefined;
        if (base && o.task && o.task !== base.task!.kind)
          throw new Error(`--task: ${o.task} differs from the config's task.kind "${String(base.task!.kind)}"; give one of them`);
        const hops = o.hops.split(',').map(Number);
        if (hops.some((h) => !Number.isInteger(h) || h < 1)) throw new Error(`--hops must be hop counts, comma-separated (got "${o.hops}")`);
        // A flag overrides the config's key only when given.
        const task: Record<string, unknown> = base
          ? { ...base.task, ...(given(cmd, 'seed') ? { eval_seed: o.seed } : {}), ...(given(cmd, 'hops') ? { hops } : {}) }
          : { kind: o.task, eval_seed: o.seed, hops };
        if (o.dataset) task.dataset = o.dataset;
        const environment: Record<string, unknown> = { ...(base?.environment ?? {}) };
        if (o.tasks) environment.tasks = o.tasks;
        if (o.tools) environment.tools = o.tools.split(',').map((t) => t.trim());
        if (o.reward) environment.reward = o.reward;
        if (o.format) environment.format = o.format;
        const cfg = validateConfig(
          {
            ...(base ?? {}),
            ...(o.device ? { device: o.device } : {}),
            model: { ...(base?.model ?? {}), path: checkpoint, init: undefined, hidden_size: undefined, layers: undefined },
            task,
            environment,
            eval: { ...(base?.eval ?? {}), n_questions: base && !given(cmd, 'n') ? base.eval!.n_questions : o.n },
          },
          { file: o.config ?? '(command line)', job: 'eval', warn: () => undefined },
        );
        const n = cfg.eval.n_questions;
        o.task ??= cfg.task.kind;
        const session = await openTaskSession(cfg);
        try {
          const bar = progressBar('eval', n, { quiet: o.json });
          // The task may hold fewer held-out questions than asked for: the bar's total follows.
          const res = evalMetrics(
            await session.evaluate(n, (done, total) => {
              if (total !== n) bar.setTotal(total);
              bar.update(done);
            }),
          );
          bar.stop();
          const rag = o.naiveRag && session.evaluateNaiveRag ? evalMetrics(await session.evaluateNaiveRag(n)) : undefined;
          if (o.json) console.log(JSON.stringify({ checkpoint, task: o.task, n, policy: res, naiveRag: rag }));
          else {
            const keys = Object.keys(res);
            console.log(
              renderTable(
                rag ? ['metric', 'policy', 'naive RAG'] : ['metric', 'policy'],
                keys.map((k) => (rag ? [k, res[k]!, rag[k] ?? NaN] : [k, res[k]!])),
              ),
            );
          }
        } finally {
          await session.close();
        }
      },
    );
}
