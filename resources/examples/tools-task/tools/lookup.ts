// A lookup tool: the fact sentence about an organisation or a person, from world.json in the
// environment's workspace folder (read-only, through ctx.readFile; parsed once and kept for the
// worker's lifetime).
import type { Tool } from 'arbor/env';

let facts: Record<string, string> | undefined;

export const lookup: Tool = {
  name: 'lookup',
  description: 'the fact about an organisation or a person',
  parameters: { type: 'object', properties: { entity: { type: 'string', maxLength: 60 } }, required: ['entity'] },
  execute({ entity }, ctx) {
    facts ??= JSON.parse(ctx.readFile('world.json')).facts as Record<string, string>;
    const key = String(entity).trim().toLowerCase().replace(/^the /, '');
    const fact = facts[key];
    return fact ? { content: fact, success: true } : { content: `no entry for ${key}`, success: false };
  },
};
