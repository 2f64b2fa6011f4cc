// The user-code sandbox: tools and rewards written in the editor run compiled and isolated,
// with time and memory limits, and their errors point at the line in the user's TypeScript.
import { describe, expect, it } from 'vitest';
import { tryReward, tryTool } from '../../../engine/env/sandbox';
import type { EpisodeSummary } from '../../../engine/env/rewards';

const TOOL = `import type { Tool } from 'arbor/env';

export const tool: Tool = {
  name: 'shout',
  description: 'upper-cases its text',
  parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  async execute(args) {
    console.log('called with', args.text);
    if (args.text === 'boom') {
      throw new Error('no booming');
    }
    return { content: String(args.text).toUpperCase(), success: true };
  },
};
`;

const summary: EpisodeSummary = {
  task: { id: 't' },
  history: [],
  answer: 'Paris',
  golds: ['paris'],
  turns: ['<answer> Paris </answer>'],
  formatOk: true,
  toolCalls: 1,
  toolErrors: 0,
  retrieved: [],
  supporting: [],
};

describe('sandbox: tools', () => {
  it('runs a tool with arguments and returns its result and console output', async () => {
    const r = await tryTool({ source: TOOL, path: 'tools/shout.ts', args: { text: 'hi' } });
    expect(r.ok).toBe(true);
    expect(r.value).toMatchObject({ content: 'HI', success: true });
    expect(r.logs).toEqual(['called with hi']);
  }, 60_000);

  it('a throwing tool reports its message with the file and the TypeScript line of the throw', async () => {
    const r = await tryTool({ source: TOOL, path: 'tools/shout.ts', args: { text: 'boom' } });
    expect(r.ok).toBe(false);
    expect(r.error?.message).toContain('no booming');
    expect(r.error?.path).toBe('tools/shout.ts');
    expect(r.error?.line).toBe(10);
  }, 60_000);

  it('arguments are validated against the schema, naming the field', async () => {
    const r = await tryTool({ source: TOOL, path: 'tools/shout.ts', args: { text: 3 } });
    expect(r.ok).toBe(false);
    expect(r.error?.message).toMatch(/invalid arguments for "shout": \/text must be string/);
  }, 60_000);

  it('stops an endless loop at the time limit and a memory hog at the heap limit', async () => {
    const loop = TOOL.replace("console.log('called with', args.text);", 'while (true) {}');
    const t = await tryTool({ source: loop, path: 'tools/loop.ts', args: { text: 'x' } }, { timeoutMs: 500, memoryMb: 64 });
    expect(t.ok).toBe(false);
    expect(t.error?.message).toMatch(/tools\/loop\.ts: timed out after 500 ms/);
    const hog = TOOL.replace("console.log('called with', args.text);", "const a: string[] = []; for (;;) a.push('x'.repeat(1e5) + a.length);");
    const m = await tryTool({ source: hog, path: 'tools/hog.ts', args: { text: 'x' } }, { timeoutMs: 20_000, memoryMb: 32 });
    expect(m.ok).toBe(false);
    expect(m.error?.message).toMatch(/tools\/hog\.ts: exceeded the sandbox memory limit \(32 MB\)/);
    // Near its memory limit QuickJS collects garbage on every allocation, and a builtin's own loop
    // (fill) does not poll the interrupt handler: the call's time limit, and the host's kill just
    // after it, stop it all the same.
    const slow = TOOL.replace("console.log('called with', args.text);", 'const a: number[][] = []; for (;;) a.push(new Array(1e5).fill(1));');
    const s = await tryTool({ source: slow, path: 'tools/slow.ts', args: { text: 'x' } }, { timeoutMs: 1500, memoryMb: 32 });
    expect(s.ok).toBe(false);
    expect(s.error?.message).toMatch(/timed out|memory limit/);
  }, 120_000);

  it('has no handle on the engine: no process, no require of other modules; syntax errors have their line', async () => {
    const esc = TOOL.replace(
      "console.log('called with', args.text);",
      "return { content: String(typeof process) + ' ' + (() => { try { return require('node:fs') } catch (e) { return (e as Error).message } })(), success: true };",
    );
    const r = await tryTool({ source: esc, path: 'tools/esc.ts', args: { text: 'x' } });
    expect(r.value).toMatchObject({ content: "undefined require('node:fs') is not available in the sandbox (only 'arbor/env')" });
    // Nothing handed in leads back to the worker's realm (constructor chains stay in the context).
    const chain = TOOL.replace(
      "console.log('called with', args.text);",
      "return { content: [(args as object).constructor.constructor('return typeof process')(), console.log.constructor('return typeof process')(), (ctx.signal as object).constructor.constructor('return typeof process')()].join(','), success: true };",
    ).replace('async execute(args)', 'async execute(args, ctx)');
    const c = await tryTool({ source: chain, path: 'tools/chain.ts', args: { text: 'x' } });
    expect(c.value).toMatchObject({ content: 'undefined,undefined,undefined' });
    const bad = await tryTool({ source: 'export const x = {\n  a: 1,\n  b: ;\n};\n', path: 'tools/bad.ts', args: {} });
    expect(bad.ok).toBe(false);
    expect(bad.error?.line).toBe(3);
  }, 60_000);
});

describe('sandbox: rewards', () => {
  it('scores a summary, with the arbor/env helpers; a throwing reward points at its line', async () => {
    const src = `import { exactMatch } from 'arbor/env';
import type { RewardFn } from 'arbor/env';
export const reward: RewardFn = (e) => exactMatch(e.answer ?? '', e.golds) + 0.5 * (e.toolCalls > 0 ? 1 : 0);
`;
    const r = await tryReward({ source: src, path: 'rewards/em.ts', summary });
    expect(r.ok).toBe(true);
    expect(r.value).toEqual({ reward: 1.5 });
    const bad = await tryReward({
      source: `export function reward(e: { golds: string[] }) {\n  const g = e.golds[5];\n  return g.length;\n}\n`,
      path: 'rewards/bad.ts',
      summary,
    });
    expect(bad.ok).toBe(false);
    expect(bad.error?.line).toBe(3);
    // Every frame of the user's file in the returned stack is in TypeScript positions.
    const deep = await tryReward({
      source: `interface S { golds: string[] }\nfunction first(xs: string[]): string {\n  return xs[9]!.trim();\n}\nexport const reward = (e: S): number => first(e.golds).length;\n`,
      path: 'rewards/deep.ts',
      summary,
    });
    expect(deep.error?.line).toBe(3);
    expect(deep.error?.stack).toMatch(/rewards\/deep\.ts:3:\d+[\s\S]*rewards\/deep\.ts:5:\d+/);
    expect(deep.error?.stack).not.toMatch(/rewards\/deep\.ts:(?![35]\b)\d+/);
    const nan = await tryReward({ source: 'export const reward = () => "high";', path: 'rewards/nan.ts', summary });
    expect(nan.error?.message).toMatch(/returned "high"; expected a finite number/);
  }, 60_000);
});
