/**
 * The editor's try-it for MCP servers through a real engine (protocol `mcp.tryTool`): list a
 * server's tools with schemas, run one call, get a server-side failure and bad input as errors.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, inProcessTransport } from '../../../engine/server/client';
import { createEngine } from '../../../engine/server/engine';
import type { EngineServer } from '../../../engine/server/server';

const SERVER = join(dirname(fileURLToPath(import.meta.url)), 'fixtures/test-mcp-server.mjs');
let engine: EngineServer;
beforeAll(async () => {
  engine = await createEngine({ home: mkdtempSync(join(tmpdir(), 'arbor-mcp-try-')) });
});
afterAll(() => engine?.close());

describe('mcp.tryTool', () => {
  it('lists the tools with schemas, runs a call, and reports isError and bad input as errors', async () => {
    const c = createClient(inProcessTransport(engine));
    const servers = { local: { command: process.execPath, args: [SERVER] } };
    try {
      const list = await c.request('mcp.tryTool', { servers });
      expect(list.ok, JSON.stringify(list.error)).toBe(true);
      const tools = (list.value as { tools: { name: string; parameters: { required?: string[] } }[] }).tools;
      expect(tools.map((t) => t.name)).toEqual(['add', 'fail', 'sleep', 'crash', 'stats']);
      expect(tools[0]!.parameters.required).toEqual(['a', 'b']);
      const add = await c.request('mcp.tryTool', { servers, tool: 'add', args: { a: 20, b: 22 } });
      expect(add).toMatchObject({ ok: true, value: { result: '42' } });
      const fail = await c.request('mcp.tryTool', { servers, tool: 'fail', args: { why: 'testing' } });
      expect(fail).toMatchObject({ ok: false, error: { message: 'refused: testing', path: 'mcp:fail' } });
      const bad = await c.request('mcp.tryTool', { servers, tool: 'add', args: { a: 'x' } });
      expect(bad.ok).toBe(false);
      expect(bad.error!.message).toMatch(/invalid arguments for "add"/);
      const noCmd = await c.request('mcp.tryTool', { servers: { s: { args: [] } } });
      expect(noCmd).toMatchObject({ ok: false, error: { path: 'mcp_servers' } });
      expect(noCmd.error!.message).toMatch(/^s\.command: /);
    } finally {
      c.close();
    }
  }, 60_000);
});
