// What scripts/gen-capitals-task.mjs and scripts/gen-units-task.mjs share: their command line
// (<folder> [--tasks N] [--seed S]), a seeded generator, and README's reward and config as printed
// ("Write your own environment"), with the task's tool files.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

/** The folder, task count and seeded `rand()` (mulberry32: a seed gives the same tasks everywhere). */
export function taskGenArgs(script, defaultSeed) {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: { tasks: { type: 'string', default: '600' }, seed: { type: 'string', default: String(defaultSeed) } },
  });
  const dir = positionals[0];
  if (!dir) throw new Error(`usage: node scripts/${script} <folder> [--tasks N] [--seed S]`);
  const count = Number(values.tasks);
  if (!Number.isInteger(count) || count < 5) throw new Error(`--tasks: "${values.tasks}" is not an integer ≥ 5`);
  let state = Number(values.seed) >>> 0;
  const rand = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { dir, count, rand };
}

/** tasks.jsonl, tools/<name>.ts for each of `tools` ({ file: source }), README's reward.ts and env.yaml. */
export function writeReadmeEnv(dir, tasks, tools) {
  mkdirSync(join(dir, 'tools'), { recursive: true });
  writeFileSync(join(dir, 'tasks.jsonl'), tasks.map((t) => JSON.stringify(t)).join('\n') + '\n');
  for (const [file, source] of Object.entries(tools)) writeFileSync(join(dir, 'tools', file), source);
  // README's reward, as printed.
  writeFileSync(
    join(dir, 'reward.ts'),
    `import { exactMatch, type RewardFn } from 'arbor/env';
export const reward: RewardFn = (episode) => {
  const calls = episode.history.flatMap((turn) => turn.calls);
  return {
    reward: episode.answer === undefined ? 0 : exactMatch(episode.answer, episode.golds),
    components: { failed_calls: calls.filter((c) => !c.success).length },
  };
};
`,
  );
  // README's config, as printed (the tool file names are this task's).
  writeFileSync(
    join(dir, 'env.yaml'),
    `model: { init: tiny }
task: { kind: custom }
environment:
  format: hermes
  tools: [${Object.keys(tools)
    .map((f) => `tools/${f}`)
    .join(', ')}]
  reward: reward.ts
  tasks: tasks.jsonl
  workspace: .
  sandbox: quickjs
  max_calls_per_turn: 2
  tool_timeout_ms: 5000
  max_observation_tokens: 256
sft: { warm_start: true }
`,
  );
}
