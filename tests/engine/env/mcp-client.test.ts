/**
 * MCP servers as Arbor tools: a real server from npm (@modelcontextprotocol/server-everything,
 * run with node) and one written for the tests (../interop/fixtures/test-mcp-server.mjs) are started once,
 * their tools go through an Arbor episode (ToolEnv, Hermes format: results rendered as tool
 * messages by the chat template, the rollout runner), and a
 * timeout, an isError result and a killed server each become observations while the episode goes on.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hermesFormat } from '../../../engine/env/formats';
import { runCall } from '../../../engine/env/tool';
import { ToolEnv } from '../../../engine/env/toolenv';
import { McpToolSet, type McpEvent } from '../../../engine/env/mcp/client';
import { rolloutTextPolicy } from '../../../engine/rollout/engine';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const EVERYTHING = join(dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js');
const TEST_SERVER = join(here, '../interop/fixtures/test-mcp-server.mjs');

/** Characters as token ids: enough for the text-policy rollout path. */
const charTokenizer = {
  encode: (t: string) => Array.from(t, (c) => c.codePointAt(0)!),
  decode: (ids: number[]) => String.fromCodePoint(...ids),
  renderChat: (msgs: { role: string; content: string }[], o?: { tools?: unknown[] }) =>
    `${JSON.stringify(o?.tools ?? [])}\n${msgs.map((m) => `${m.role}: ${m.content}`).join('\n')}\nassistant:`,
};

const call = (name: string, args: Record<string, unknown>) => `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;

describe('MCP servers as tools', () => {
  let set: McpToolSet;
  const events: McpEvent[] = [];
  beforeAll(async () => {
    set = await McpToolSet.open(
      {
        everything: { command: process.execPath, args: [EVERYTHING, 'stdio'], tools: ['echo', 'get-sum'] },
        local: { command: process.execPath, args: [TEST_SERVER], env: { ARBOR_TEST_VALUE: 'from-config' }, timeout_ms: 400 },
      },
      { onEvent: (e) => events.push(e) },
    );
  }, 120_000);
  afterAll(async () => set?.close());

  it('lists the tools of both servers with their JSON schemas (allow-list applied)', () => {
    const byName = new Map(set.tools.map((t) => [t.name, t]));
    expect([...byName.keys()].sort()).toEqual(['add', 'crash', 'echo', 'fail', 'get-sum', 'sleep', 'stats']);
    const sum = byName.get('get-sum')!.parameters as { properties: Record<string, { type: string }>; required: string[] };
    expect(sum.properties.a.type).toBe('number');
    expect(sum.required).toEqual(['a', 'b']);
    expect(byName.get('add')!.description).toBe('Add two numbers');
    expect(
      events
        .filter((e) => e.kind === 'mcp_started')
        .map((e) => e.server)
        .sort(),
    ).toEqual(['everything', 'local']);
  });

  it('an episode calls their tools; timeout, isError and a killed server become observations and the episode goes on', async () => {
    const script = [
      // 1: both servers, concurrently
      call('get-sum', { a: 2, b: 3 }) + call('add', { a: 4, b: 5 }),
      // 2: a failing tool (isError) and a call that outlives the server's 400 ms timeout
      call('fail', { why: 'no reason' }) + call('sleep', { ms: 20_000 }),
      // 3: the server saw the cancellation; the environment's schema check still applies
      call('stats', {}) + call('echo', { message: 7 }),
      // 4: the server dies mid-call
      call('crash', {}),
      // 5: restarted once: its tools answer again; the environment passed its env
      call('add', { a: 1, b: 1 }) + call('stats', {}),
      '<answer> 2 </answer>',
    ];
    const tools = set.tools;
    const task = {
      id: 'mcp-task',
      createEnv: () =>
        new ToolEnv({
          task: { id: 'mcp-task', question: 'what is 1 + 1 ?', answers: ['2'] },
          tools,
          format: hermesFormat(),
          tokenizer: charTokenizer,
          maxTurns: 8,
          limits: { timeoutMs: 5000, maxArgChars: 2000, maxResultChars: 2000 },
        }),
    };
    const res = await rolloutTextPolicy(
      { act: async ({ history }) => script[history.filter((h) => h.role === 'model').length] },
      {
        tasks: [task],
        n: 1,
        seed: 1,
        tokenizer: charTokenizer as never,
        limits: { maxNewTokens: 4000, maxTurns: 8, maxTotalLength: 100_000 },
      },
    );
    const t = res.trajectories[0];
    const model = t.turns.filter((u) => u.role === 'model');
    const obs = t.turns.filter((u) => u.role !== 'model').map((u) => u.text);
    expect(model).toHaveLength(6);
    expect(obs[0]).toContain('The sum of 2 and 3 is 5.');
    expect(obs[0]).toContain('tool: 9');
    // isError → an error observation with the server's text
    expect(obs[1]).toContain('refused: no reason');
    expect(model[1].toolCalls![0]).toMatchObject({ name: 'fail', error: 'refused: no reason' });
    // timeout → an error observation naming the tool and the server
    expect(model[1].toolCalls![1].error).toMatch(/mcp server "local".*timed out/i);
    const stats = JSON.parse((model[2].toolCalls![0] as { result: string }).result);
    expect(stats.cancelled).toBe(1);
    expect(model[2].toolCalls![1].error).toMatch(/invalid arguments for "echo".*message must be string/);
    // the crash → an error observation, then the server is back
    expect(model[3].toolCalls![0].error).toMatch(/mcp server "local" exited during the call to "crash".*crashing on purpose/s);
    expect(obs[4]).toContain('tool: 2');
    const after = JSON.parse((model[4].toolCalls![1] as { result: string }).result);
    expect(after.env).toBe('from-config');
    expect(after.pid).not.toBe(stats.pid);
    expect(after.calls).toBe(1);
    expect(t.outcome.reward).toBe(1);
    expect(set.restarts).toEqual({ everything: 0, local: 1 });
    expect(events.map((e) => `${e.server}:${e.kind}`)).toEqual(expect.arrayContaining(['local:mcp_exit', 'local:mcp_restart']));
  }, 30_000);

  it('a server killed a second time stays down: its tools answer with an error, the other server works', async () => {
    const pid = set.pids().local!;
    process.kill(pid, 'SIGKILL');
    await vi_waitFor(() => events.some((e) => e.kind === 'mcp_down'));
    const tools = new Map(set.tools.map((t) => [t.name, t]));
    const down = await runCall(tools, { name: 'add', args: { a: 1, b: 2 } });
    expect(down.success).toBe(false);
    expect(down.result).toMatch(/mcp server "local" is down/);
    const up = await runCall(tools, { name: 'echo', args: { message: 'still here' } });
    expect(up).toMatchObject({ success: true, result: 'Echo: still here' });
    expect(set.restarts.local).toBe(1);
  }, 30_000);

  it('the environment timeout aborts the call (ctx.signal) before the server limit', async () => {
    const s = await McpToolSet.open({ local: { command: process.execPath, args: [TEST_SERVER], timeout_ms: 60_000 } });
    try {
      const tools = new Map(s.tools.map((t) => [t.name, t]));
      const r = await runCall(tools, { name: 'sleep', args: { ms: 20_000 } }, { timeoutMs: 300, maxArgChars: 2000, maxResultChars: 2000 });
      expect(r.success).toBe(false);
      expect(r.error).toMatch(/timed out after 300 ms/);
      const stats = await runCall(tools, { name: 'stats', args: {} });
      expect(JSON.parse(stats.result).cancelled).toBe(1);
    } finally {
      await s.close();
    }
  }, 30_000);

  it('refuses a bad configuration naming the server or the tool', async () => {
    await expect(McpToolSet.open({ local: { command: process.execPath, args: [TEST_SERVER], tools: ['add', 'nope'] } })).rejects.toThrow(
      /mcp_servers\.local\.tools: "nope" not offered by the server \(it has: add, fail, sleep, crash, stats\)/,
    );
    await expect(McpToolSet.open({ ghost: { command: join(here, 'no-such-binary') } })).rejects.toThrow(/mcp server "ghost" .* did not start/);
    await expect(
      McpToolSet.open({ a: { command: process.execPath, args: [TEST_SERVER] }, b: { command: process.execPath, args: [TEST_SERVER] } }),
    ).rejects.toThrow(/tool "add" is offered by both "a" and "b"/);
  }, 30_000);
});

async function vi_waitFor(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
