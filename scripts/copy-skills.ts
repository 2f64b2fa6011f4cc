/**
 * `npx tsx scripts/copy-skills.ts <checkpoint> [--config resources/configs/tools.yaml] [--n 60]`
 *
 * Which copy does a two-tool-task model get wrong? Greedy episodes of the checkpoint on the first
 * N held-out questions (the task kit's evaluation split, in-process), and for each question kind
 * the share of episodes that wrote each copied piece right: the organisation's adjective, noun and
 * kind in the first lookup (copied from the question), the person's first and last name in the
 * second lookup (from the first result for founder-age, from the question for person-age), the
 * founding and birth years in the calculator call (from the two results), and the answer (the
 * calculator's result). The task rows' `meta.entities` and `meta.expression` are the truth. Used
 * for docs/areas/train.md ("Which copy fails, per seed").
 */
import { resolve } from 'node:path';
import { Command } from 'commander';
import '../engine/builtins'; // the built-in estimators, losses, formats and task kinds, before a config is read
import { loadConfig } from '../engine/config/experiment';
import { openEnvironmentKit } from '../engine/tasks/open';
import { PolicyModel } from '../engine/model/runtime';
import { policyDecodeBackend } from '../engine/rollout/model-backend';
import { rollout } from '../engine/rollout/engine';

const o = new Command('copy-skills')
  .argument('<checkpoint>', 'model folder of a two-tool-task run (e.g. <run>/sft/checkpoints/step-001200)')
  .option('--config <file>', 'the experiment config (its task, tools and limits)', 'resources/configs/tools.yaml')
  .option('--n <n>', 'held-out questions', (v) => Number(v), 60)
  .parse();
const [checkpoint] = o.args as [string];
const opts = o.opts<{ config: string; n: number }>();

const loaded = await loadConfig(
  opts.config,
  (raw) => {
    raw.model = { path: resolve(checkpoint) };
  },
  { job: 'rollout', warn: () => undefined },
);
const { cfg } = loaded;
if (cfg.task.kind !== 'tools') throw new Error(`--config: task.kind is "${cfg.task.kind}"; this script reads the two-tool task's meta (task.kind tools)`);
const { env, kit } = await openEnvironmentKit(loaded);
const model = PolicyModel.load(checkpoint, { tokenizerFolder: kit.tokenizerFolder });
const backend = policyDecodeBackend(model, { maxBatch: 16, maxLength: cfg.rollout.max_total_length });
const tasks = kit.evalTasks.slice(0, opts.n);
const limits = { maxNewTokens: cfg.rollout.max_new_tokens, maxTurns: cfg.rollout.max_turns, maxTotalLength: cfg.rollout.max_total_length };
const { trajectories } = await rollout(backend, { tasks, n: 1, seed: 1, sampling: { temperature: 0 }, limits, stop: kit.stop, tokenizer: kit.tokenizer });

const PIECES = ['org adjective', 'org noun', 'org kind', 'person first', 'person last', 'founding year', 'birth year', 'answer'] as const;
const tally = new Map<string, { n: number; right: Record<string, number> }>();
for (const t of trajectories) {
  const meta = tasks.find((x) => x.id === t.taskId)!.meta as { kind: string; entities: [string, string]; expression: string };
  const texts = t.turns.filter((u) => u.role === 'model').map((u) => u.text);
  const args = (key: string) => texts.map((x) => new RegExp(`"${key}": "([^"]*)"`).exec(x)?.[1]).filter((x): x is string => x !== undefined);
  const [lookup1 = '', lookup2 = ''] = args('entity');
  const [expression = ''] = args('expression');
  const answer = texts.flatMap((x) => /<answer>\s*(.*?)\s*<\/answer>/.exec(x)?.[1] ?? []).pop() ?? '';
  const [org, person] = meta.entities;
  const [founded, born] = meta.expression.split(' - ');
  // Word by word, each name padded to its length (a shorter lookup does not shift the next name's words).
  const words = (got: string, want: string) => want.split(' ').map((w, i) => got.split(' ')[i] === w);
  const names = [...words(lookup1, org), ...words(lookup2, person)];
  const [year1, year2] = expression.split(' - ');
  const ok = [...names, year1 === founded, year2 === born, answer === String(Number(founded) - Number(born))];
  const row = tally.get(meta.kind) ?? { n: 0, right: {} };
  row.n++;
  PIECES.forEach((p, i) => (row.right[p] = (row.right[p] ?? 0) + (ok[i] ? 1 : 0)));
  tally.set(meta.kind, row);
}
console.log(`${checkpoint}: ${trajectories.length} held-out questions, greedy; share of episodes with each piece right`);
console.log(['kind', 'n', ...PIECES].join(' | '));
for (const [kind, row] of tally) console.log([kind, row.n, ...PIECES.map((p) => (row.right[p]! / row.n).toFixed(2))].join(' | '));
await backend.close?.();
await model.dispose();
await env.close();
