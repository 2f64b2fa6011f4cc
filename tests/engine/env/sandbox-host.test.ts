// A user environment's tools and reward loaded once into a sandbox worker for a run: the tools
// are ordinary Tools for runCall (ajv validation, error observations with the TypeScript line),
// a stuck call is stopped (QuickJS) or gets the process replaced (process engine), and the reward
// file scores episode summaries.
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxHost } from '../../../engine/env/sandbox-host';
import { runCall } from '../../../engine/env/tool';
import type { EpisodeSummary } from '../../../engine/env/rewards';

const TOOLS = `import type { Tool } from 'arbor/env';

export const shout: Tool = {
  name: 'shout',
  description: 'upper-cases its text',
  parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  async execute(args) {
    console.log('shout', args.text);
    if (args.text === 'boom') {
      throw new Error('no booming');
    }
    if (args.text === 'hog') {
      const a: string[] = [];
      for (;;) a.push('x'.repeat(1e5) + a.length);
    }
    if (args.text === 'hang') {
      await Promise.resolve();
      for (;;) {}
    }
    return { content: String(args.text).toUpperCase(), success: true, metadata: { n: String(args.text).length } };
  },
};

export const count: Tool = {
  name: 'count',
  description: 'counts words',
  parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  execute: (args) => ({ content: String(String(args.text).split(' ').length), success: true }),
};
`;

const REWARD = `import { f1Score } from 'arbor/env';
export function reward(e: { answer?: string; golds: string[]; toolCalls: number }) {
  const f1 = f1Score(e.answer ?? '', e.golds);
  return { reward: f1 - 0.1 * e.toolCalls, components: { f1 } };
}
`;

const summary: EpisodeSummary = {
  task: { id: 't' },
  history: [],
  answer: 'the river kerra',
  golds: ['Kerra'],
  turns: [],
  formatOk: true,
  toolCalls: 2,
  toolErrors: 0,
  retrieved: [],
  supporting: [],
};
const hosts: SandboxHost[] = [];
afterAll(async () => {
  for (const h of hosts) await h.close();
});

describe('SandboxHost', () => {
  it('serves the tools through runCall and scores with the reward file', async () => {
    const host = await SandboxHost.open(
      { tools: [{ path: 'tools/text.ts', source: TOOLS }], reward: { path: 'rewards/f1.ts', source: REWARD } },
      { timeoutMs: 1000, memoryMb: 64 },
    );
    hosts.push(host);
    expect([...host.tools.keys()].sort()).toEqual(['count', 'shout']);
    const ok = await runCall(host.tools, { name: 'shout', args: { text: 'hi' } });
    expect(ok).toMatchObject({ success: true, result: 'HI', metadata: { n: 2 } });
    expect((await runCall(host.tools, { name: 'count', args: { text: 'a b c' } })).result).toBe('3');
    expect(host.takeLogs()).toEqual(['shout hi']);
    const bad = await runCall(host.tools, { name: 'shout', args: { text: 7 } });
    expect(bad.error).toMatch(/invalid arguments for "shout": \/text must be string/);
    const threw = await runCall(host.tools, { name: 'shout', args: { text: 'boom' } });
    expect(threw.success).toBe(false);
    expect(threw.error).toContain('tools/text.ts:10:');
    expect(threw.error).toContain('no booming');
    const r = await host.reward(summary);
    // normalised "river kerra" vs "kerra": precision 1/2, recall 1
    expect(r.components!.f1).toBeCloseTo((2 * 0.5 * 1) / (0.5 + 1), 6);
    expect(r.reward).toBeCloseTo(r.components!.f1! - 0.2, 6);
  }, 60_000);

  it('stops a call stuck after an await (QuickJS: the engine interrupts it, the process stays; process engine: the process is replaced); the next call works', async () => {
    for (const engine of ['quickjs', 'process'] as const) {
      const host = await SandboxHost.open({ tools: [{ path: 'tools/text.ts', source: TOOLS }] }, { timeoutMs: 400, memoryMb: 64 }, undefined, { engine });
      hosts.push(host);
      const stuck = await runCall(host.tools, { name: 'shout', args: { text: 'hang' } }, { timeoutMs: 10_000, maxArgChars: 1000, maxResultChars: 1000 });
      expect(stuck.error).toMatch(/tools\/text\.ts: timed out after 400 ms/);
      // QuickJS interrupts the loop inside the async function (its promise rejects): the process stays.
      expect(host.restarts).toBe(engine === 'quickjs' ? 0 : 1);
      expect((await runCall(host.tools, { name: 'shout', args: { text: 'again' } })).result).toBe('AGAIN');
    }
  }, 120_000);

  it("a call queued behind others' work is timed from when it starts, not from when it was sent", async () => {
    // Each call busy-waits 600 ms of the worker's one thread; four sent at once finish at about
    // 0.6, 1.2, 1.8 and 2.4 s. With a 1 s limit counted from the send, the last two were killed
    // (and the worker replaced, failing the rest); counted from the start, all four answer.
    const BUSY = `export const busy = { name: 'busy', description: 'waits', parameters: { type: 'object', properties: { n: { type: 'number' } } },
  execute(args: { n: number }) { const end = Date.now() + 600; while (Date.now() < end) {} return { content: 'done ' + args.n, success: true }; } };
`;
    const host = await SandboxHost.open({ tools: [{ path: 'tools/busy.ts', source: BUSY }] }, { timeoutMs: 1000, memoryMb: 64 });
    hosts.push(host);
    const limits = { timeoutMs: 30_000, maxArgChars: 2000, maxResultChars: 4000 };
    const outs = await Promise.all([1, 2, 3, 4].map((n) => runCall(host.tools, { name: 'busy', args: { n } }, limits)));
    expect(outs.map((o) => o.result)).toEqual(['done 1', 'done 2', 'done 3', 'done 4']);
    expect(host.restarts).toBe(0);
  }, 120_000);

  it('stops a call that exceeds the memory limit (QuickJS: an error in the guest; process engine: the process is replaced)', async () => {
    for (const engine of ['quickjs', 'process'] as const) {
      const host = await SandboxHost.open({ tools: [{ path: 'tools/text.ts', source: TOOLS }] }, { timeoutMs: 20_000, memoryMb: 32 }, undefined, { engine });
      hosts.push(host);
      const hog = await runCall(host.tools, { name: 'shout', args: { text: 'hog' } }, { timeoutMs: 30_000, maxArgChars: 1000, maxResultChars: 1000 });
      expect(hog.error).toMatch(/exceeded the sandbox memory limit \(32 MB\)/);
      expect(host.restarts).toBe(engine === 'quickjs' ? 0 : 1);
      expect((await runCall(host.tools, { name: 'shout', args: { text: 'fine' } })).result).toBe('FINE');
    }
  }, 120_000);

  it('refuses files that do not compile or load, naming the file and line', async () => {
    await expect(SandboxHost.open({ tools: [{ path: 'tools/bad.ts', source: 'export const t = {\n  a: ;\n};\n' }] })).rejects.toThrow(/^tools\/bad\.ts:2:/);
    await expect(SandboxHost.open({ tools: [{ path: 'tools/none.ts', source: 'export const x = 1;\n' }] })).rejects.toThrow(/tools\/none\.ts: exports no tool/);
    await expect(SandboxHost.open({ tools: [{ path: 'tools/top.ts', source: 'const a = 1;\nthrow new Error("top level");\n' }] })).rejects.toThrow(
      /^tools\/top\.ts:2:\d+: top level/,
    );
    await expect(SandboxHost.open({ reward: { path: 'rewards/r.ts', source: 'export const x = 1;\n' } })).rejects.toThrow(
      /rewards\/r\.ts: export a reward function/,
    );
  }, 120_000);
});
