/** `arbor eval <checkpoint> --task <task>`: held-out evaluation of an HF checkpoint folder. */
import type { Command } from 'commander';
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
    .option('--n <questions>', 'number of held-out questions', (v) => Number(v), 64)
    .option('--seed <seed>', 'held-out world seed', (v) => Number(v), 1001)
    .option('--hops <list>', 'hop counts, comma-separated', '1,2')
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
        const base = o.config ? (JSON.parse(JSON.stringify(loadConfig(o.config))) as Record<string, Record<string, unknown>>) : undefined;
        const task: Record<string, unknown> = base
          ? { ...base.task, ...(o.task ? { kind: o.task } : {}) }
          : { kind: o.task, eval_seed: o.seed, hops: o.hops.split(',').map(Number) };
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
            model: { path: checkpoint },
            task,
            environment,
            eval: { ...(base?.eval ?? {}), n_questions: o.n },
          },
          { file: o.config ?? '(command line)' },
        );
        o.task ??= cfg.task.kind;
        const session = await openTaskSession(cfg);
        try {
          const bar = progressBar('eval', o.n, { quiet: o.json });
          const res = evalMetrics(await session.evaluate(o.n, (done) => bar.update(done)));
          bar.stop();
          const rag = o.naiveRag && session.evaluateNaiveRag ? evalMetrics(await session.evaluateNaiveRag(o.n)) : undefined;
          if (o.json) console.log(JSON.stringify({ checkpoint, task: o.task, n: o.n, policy: res, naiveRag: rag }));
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
