#!/usr/bin/env node
// A new two-tool environment written from README's "Write your own environment", for checking that
// README's config learns on a task it was not tuned on (issue 38; docs/areas/train.md, "README's
// config on a task of invented names"): invented countries, their capitals and the capitals' time
// zones. 1-hop: "what is the capital of X ?" (tool `capital`); 2-hop: "what time zone is the capital
// of X in ?" (`capital`, then `timezone`). Each country is in one task, so the model has to copy
// names it has not seen from the question and the observations into its calls and answer.
// Usage: node scripts/gen-capitals-task.mjs <folder> [--tasks 600] [--seed 7]
// then: cd <folder> && npx arbor train env.yaml --yes
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { taskGenArgs, writeReadmeEnv } from './task-gen.mjs';

const { dir, count, rand } = taskGenArgs('gen-capitals-task.mjs', 7);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const seen = new Set();
const name = (syllables) => {
  for (;;) {
    let w = '';
    for (let i = 0; i < syllables; i++) w += pick([...'bcdfghklmnprstvz']) + pick([...'aeiou']);
    w += pick(['', 'n', 'r', 'l', 's']);
    if (!seen.has(w)) return (seen.add(w), w);
  }
};

const capitals = {};
const zones = {};
const tasks = [];
for (let i = 0; i < count; i++) {
  const country = name(3);
  const city = name(2);
  const zone = `utc${pick(['+', '-'])}${1 + Math.floor(rand() * 11)}`;
  capitals[country] = city;
  zones[city] = zone;
  const call = (tool, args) => ({ calls: [{ name: tool, args }] });
  tasks.push(
    rand() < 0.4
      ? {
          id: `q${i}`,
          prompt: `what is the capital of ${country} ?`,
          answers: [city],
          meta: { hops: 1, demo: [call('capital', { country }), { answer: city }] },
        }
      : {
          id: `q${i}`,
          prompt: `what time zone is the capital of ${country} in ?`,
          answers: [zone],
          meta: { hops: 2, demo: [call('capital', { country }), call('timezone', { city }), { answer: zone }] },
        },
  );
}

const tool = (exportName, description, arg, table, missing) => `import type { Tool } from 'arbor/env';
let table: Record<string, string> | undefined;
export const ${exportName}: Tool = {
  name: '${exportName}',
  description: '${description}',
  parameters: { type: 'object', properties: { ${arg}: { type: 'string', maxLength: 40 } }, required: ['${arg}'] },
  execute({ ${arg} }, ctx) {
    table ??= JSON.parse(ctx.readFile('world.json')).${table};
    const found = table![String(${arg}).trim().toLowerCase()];
    return found ? { content: found, success: true } : { content: \`${missing} \${${arg}}\`, success: false };
  },
};
`;
writeReadmeEnv(dir, tasks, {
  'capital.ts': tool('capital', 'the capital city of a country', 'country', 'capitals', 'no country called'),
  'timezone.ts': tool('timezone', 'the time zone of a city', 'city', 'zones', 'no city called'),
});
writeFileSync(join(dir, 'world.json'), JSON.stringify({ capitals, zones }));
console.log(`${dir}: ${count} tasks (${tasks.filter((t) => t.meta.hops === 2).length} 2-hop), tools/capital.ts, tools/timezone.ts, reward.ts, env.yaml`);
