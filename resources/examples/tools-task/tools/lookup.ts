// A lookup tool: the fact sentence about an organisation or a person, from world.json next to
// this environment (read once per episode through the context's read-only workspace access and
// kept in ctx.episode, which the tools of one episode share).
import type { Tool } from 'arbor/env';

export const lookup: Tool = {
  name: 'lookup',
  description: 'the fact about an organisation or a person',
  parameters: { type: 'object', properties: { entity: { type: 'string', maxLength: 60 } }, required: ['entity'] },
  async execute({ entity }, ctx) {
    const facts = (ctx.episode.facts ??= JSON.parse(await ctx.readFile('world.json')).facts) as Record<string, string>;
    const key = String(entity).trim().toLowerCase().replace(/^the /, '');
    const fact = facts[key];
    return fact ? { content: fact, success: true } : { content: `no entry for ${key}`, success: false };
  },
};
