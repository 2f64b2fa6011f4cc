#!/usr/bin/env node
// A second new two-tool environment written from README's "Write your own environment" (issue 38;
// docs/areas/train.md, "README's config on a task of invented names"), the kind the issue tried:
// unit conversion and date differences. "how many miles is 37 kilometres ?" (tool `convert`) and
// "how many days are there from 2020-11-20 to 2021-07-10 ?" (tool `days_between`); the answer is the
// tool's result, so the model copies numbers and dates from the question into its call and the
// result into its answer. README's reward and config as printed.
// Usage: node scripts/gen-units-task.mjs <folder> [--tasks 600] [--seed 11]
// then: cd <folder> && npx arbor train env.yaml --yes
import { taskGenArgs, writeReadmeEnv } from './task-gen.mjs';

const { dir, count, rand } = taskGenArgs('gen-units-task.mjs', 11);
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

writeReadmeEnv(dir, tasks, {
  'convert.ts': `import type { Tool } from 'arbor/env';
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
  'days.ts': `import type { Tool } from 'arbor/env';
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
});
console.log(
  `${dir}: ${count} tasks (${tasks.filter((t) => t.meta.kind === 'days').length} date differences), tools/convert.ts, tools/days.ts, reward.ts, env.yaml`,
);
