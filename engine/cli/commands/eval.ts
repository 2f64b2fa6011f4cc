/** `arbor eval <checkpoint> --task <task>`: held-out evaluation of an HF checkpoint folder. */
import type { Command } from 'commander';
import { existsSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { listCheckpoints } from '../../train/checkpoints';
import { TASK_KINDS, validateConfig } from '../../train/config';
import { progressBar, renderTable } from '../../train/report';
import { evalMetrics } from '../../train/run';
import { openTaskSession } from '../../train/wiring';

export function register(program: Command): void {
  program
    .command('eval')
    .description('evaluate a checkpoint (HF model folder) on held-out questions of a task')
    .argument('<checkpoint>', 'HF model folder (e.g. <run>/checkpoints/step-000040)')
    .requiredOption('--task <task>', `task kind (${TASK_KINDS.join(', ')})`)
    .option('--n <questions>', 'number of held-out questions', (v) => Number(v), 64)
    .option('--seed <seed>', 'held-out world seed', (v) => Number(v), 1001)
    .option('--hops <list>', 'hop counts, comma-separated', '1,2')
    .option('--dataset <file>', 'task qa: the JSONL dataset (its held-out fifth is evaluated)')
    .option('--naive-rag', 'also run the naive RAG baseline on the same questions')
    .option('--json', 'print the result as one JSON object on stdout')
    .action(async (checkpoint: string, o: { task: string; n: number; seed: number; hops: string; dataset?: string; naiveRag?: boolean; json?: boolean }) => {
      if (!existsSync(checkpoint) || !statSync(checkpoint).isDirectory()) {
        // Most often a checkpoint that `checkpoint.keep` pruned after newer ones were saved.
        const runDir = dirname(dirname(resolve(checkpoint)));
        const left = basename(dirname(resolve(checkpoint))) === 'checkpoints' ? listCheckpoints(runDir).map((c) => c.dir) : [];
        throw new Error(
          `checkpoint folder not found: ${checkpoint}${left.length ? ` (checkpoint.keep may have pruned it; this run keeps ${left.join(', ')})` : ' (`arbor show <run>` lists the checkpoints that exist)'}`,
        );
      }
      const task = { kind: o.task, eval_seed: o.seed, hops: o.hops.split(',').map(Number), ...(o.dataset ? { dataset: o.dataset } : {}) };
      const cfg = validateConfig(
        { model: { path: checkpoint }, task, eval: { n_questions: o.n } },
        { file: '(command line)' },
      );
      const session = await openTaskSession(cfg);
      try {
        const bar = progressBar('eval', o.n, { quiet: o.json });
        const res = evalMetrics(await session.evaluate(o.n, (done) => bar.update(done)));
        bar.stop();
        const rag = o.naiveRag && session.evaluateNaiveRag ? evalMetrics(await session.evaluateNaiveRag(o.n)) : undefined;
        if (o.json) console.log(JSON.stringify({ checkpoint, task: o.task, n: o.n, policy: res, naiveRag: rag }));
        else {
          const keys = Object.keys(res);
          console.log(renderTable(rag ? ['metric', 'policy', 'naive RAG'] : ['metric', 'policy'], keys.map((k) => (rag ? [k, res[k]!, rag[k] ?? NaN] : [k, res[k]!]))));
        }
      } finally {
        await session.close();
      }
    });
}
