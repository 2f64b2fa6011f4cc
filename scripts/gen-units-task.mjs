#!/usr/bin/env node
// A second new two-tool environment written from README's "Write your own environment" (issue 38;
// docs/areas/train.md, "README's config on a task of invented names"), the kind the issue tried:
// unit conversion and date differences. "how many miles is 37 kilometres ?" (tool `convert`) and
// "how many days are there from 2020-11-20 to 2021-07-10 ?" (tool `days_between`); the answer is the
// tool's result, so the model copies numbers and dates from the question into its call and the
// result into its answer. README's reward and config as printed.
// Usage: node scripts/gen-units-task.mjs <folder> [--tasks 600] [--seed 11]
// then: cd <folder> && npx arbor train env.yaml --yes
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { tasks: { type: 'string', default: '600' }, seed: { type: 'string', default: '11' } },
});
const dir = positionals[0];
if (!dir) throw new Error('usage: node scripts/gen-units-task.mjs <folder> [--tasks N] [--seed S]');
const count = Number(values.tasks);
if (!Number.isInteger(count) || count < 5) throw new Error(`--tasks: "${values.tasks}" is not an integer ≥ 5`);

// mulberry32: a small seeded generator, so a seed gives the same tasks everywhere.
let state = Number(values.seed) >>> 0;
const rand = () => {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

// The tool's factors, so a demonstration's answer is what the tool returns.
const FACTORS = { 'km>mi': 0.621371, 'mi>km': 1.609344, 'kg>lb': 2.204623, 'lb>kg': 0.453592, 'm>ft': 3.28084, 'ft>m': 0.3048 };
const NAMES = { km: 'kilometres', mi: 'miles', kg: 'kilograms', lb: 'pounds', m: 'metres', ft: 'feet' };
const day = (d) => new Date(Date.UTC(2000, 0, 1) + d * 86400000).toISOString().slice(0, 10);

const tasks = [];
for (let i = 0; i < count; i++) {
  if (rand() < 0.5) {
    const pair = Object.keys(FACTORS)[int(0, 5)];
    const [from, to] = pair.split('>');
    const value = int(2, 999);
    const result = (value * FACTORS[pair]).toFixed(2);
    tasks.push({
      id: `u${i}`,
      prompt: `how many ${NAMES[to]} is ${value} ${NAMES[from]} ?`,
      answers: [result],
      meta: { kind: 'convert', demo: [{ calls: [{ name: 'convert', args: { value, from, to } }] }, { answer: result }] },
    });
  } else {
    const a = int(0, 9000);
    const days = int(1, 400);
    const [start, end] = [day(a), day(a + days)];
    tasks.push({
      id: `u${i}`,
      prompt: `how many days are there from ${start} to ${end} ?`,
      answers: [String(days)],
      meta: { kind: 'days', demo: [{ calls: [{ name: 'days_between', args: { start, end } }] }, { answer: String(days) }] },
    });
  }
}

mkdirSync(join(dir, 'tools'), { recursive: true });
writeFileSync(join(dir, 'tasks.jsonl'), tasks.map((t) => JSON.stringify(t)).join('\n') + '\n');
writeFileSync(
  join(dir, 'tools', 'convert.ts'),
  `import type { Tool } from 'arbor/env';
const factors: Record<string, number> = ${JSON.stringify(FACTORS)};
export const convert: Tool = {
  name: 'convert',
  description: 'convert a value between units (km, mi, kg, lb, m, ft)',
  parameters: { type: 'object', properties: { value: { type: 'number' }, from: { type: 'string' }, to: { type: 'string' } }, required: ['value', 'from', 'to'] },
  execute({ value, from, to }) {
    const f = factors[\`\${from}>\${to}\`];
    return f === undefined ? { content: \`cannot convert \${from} to \${to}\`, success: false } : { content: (Number(value) * f).toFixed(2), success: true };
  },
};
`,
);
writeFileSync(
  join(dir, 'tools', 'days.ts'),
  `import type { Tool } from 'arbor/env';
export const days_between: Tool = {
  name: 'days_between',
  description: 'the number of days from one date (YYYY-MM-DD) to another',
  parameters: { type: 'object', properties: { start: { type: 'string' }, end: { type: 'string' } }, required: ['start', 'end'] },
  execute({ start, end }) {
    const t = (s: unknown) => Date.parse(\`\${String(s)}T00:00:00Z\`);
    const [a, b] = [t(start), t(end)];
    if (Number.isNaN(a) || Number.isNaN(b)) return { content: \`not a date: \${Number.isNaN(a) ? start : end}\`, success: false };
    return { content: String(Math.round((b - a) / 86400000)), success: true };
  },
};
`,
);
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
  tools: [tools/convert.ts, tools/days.ts]
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
console.log(
  `${dir}: ${count} tasks (${tasks.filter((t) => t.meta.kind === 'days').length} date differences), tools/convert.ts, tools/days.ts, reward.ts, env.yaml`,
);
