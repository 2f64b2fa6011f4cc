/**
 * `arbor mcp serve`: the official MCP SDK client connects to a workspace environment's sandboxed
 * TypeScript tools over stdio and over streamable HTTP, lists them with their schemas and calls
 * them; an HTTP request without the token is refused.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const ARBOR = join(ROOT, 'bin/arbor.mjs');

const TOOL = `import type { Tool } from 'arbor/env';
export const shout: Tool = {
  name: 'shout',
  description: 'upper-cases its text',
  parameters: { type: 'object', properties: { text: { type: 'string', description: 'what to shout' }, times: { type: 'integer', minimum: 1 } }, required: ['text'] },
  execute(args) {
    if (args.text === 'boom') throw new Error('no booming');
    return { content: String(args.text).toUpperCase().repeat(Number(args.times ?? 1)), success: true };
  },
};
`;

let dir: string;
let home: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'arbor-mcp-env-'));
  home = mkdtempSync(join(tmpdir(), 'arbor-mcp-home-'));
  mkdirSync(join(dir, 'tools'));
  writeFileSync(join(dir, 'tools/shout.ts'), TOOL);
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

async function checkTools(client: Client) {
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name)).toEqual(['shout']);
  expect(tools[0]!.description).toBe('upper-cases its text');
  expect(tools[0]!.inputSchema).toMatchObject({
    type: 'object',
    properties: { text: { type: 'string', description: 'what to shout' }, times: { type: 'integer', minimum: 1 } },
    required: ['text'],
  });
  const ok = await client.callTool({ name: 'shout', arguments: { text: 'hi', times: 2 } });
  expect(ok).toMatchObject({ content: [{ type: 'text', text: 'HIHI' }] });
  expect(ok.isError).toBeFalsy();
  // schema violations and throwing tools are isError results, with the field / the TypeScript line
  const bad = await client.callTool({ name: 'shout', arguments: { times: 0 } });
  expect(bad.isError).toBe(true);
  expect((bad.content as { text: string }[])[0]!.text).toMatch(/invalid arguments for "shout".*must have required property 'text'.*\/times must be >= 1/);
  const boom = await client.callTool({ name: 'shout', arguments: { text: 'boom' } });
  expect(boom.isError).toBe(true);
  expect((boom.content as { text: string }[])[0]!.text).toMatch(/tools\/shout\.ts:7:\d+: no booming/);
}

describe('arbor mcp serve', () => {
  it('stdio: the SDK client lists the workspace tools with their schemas and calls them', async () => {
    const client = new Client({ name: 'test', version: '1' });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [ARBOR, 'mcp', 'serve', '--env', dir, '--yes'],
      env: { PATH: process.env.PATH ?? '', ARBOR_HOME: home },
      stderr: 'pipe',
    });
    await client.connect(transport);
    try {
      await checkTools(client);
    } finally {
      await client.close();
    }
  }, 60_000);

  describe('streamable HTTP', () => {
    let proc: ChildProcess;
    let url: string;
    const token = 'test-token-0123456789';
    beforeAll(async () => {
      // the token through the environment (as run_verl.sh passes it), not argv where `ps` shows it
      proc = spawn(process.execPath, [ARBOR, 'mcp', 'serve', '--env', dir, '--http'], {
        env: { ...process.env, ARBOR_HOME: home, ARBOR_MCP_TOKEN: token },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      url = await new Promise<string>((resolve, reject) => {
        let out = '';
        let err = '';
        proc.stderr!.on('data', (d) => (err += d));
        proc.stdout!.on('data', (d) => {
          out += d;
          const m = /http:\/\/127\.0\.0\.1:\d+\/mcp/.exec(out);
          if (m && out.includes('\ntoken')) {
            expect(out).not.toContain(token);
            resolve(m[0]);
          }
        });
        proc.once('exit', (code) => reject(new Error(`arbor mcp serve exited ${code}: ${err}`)));
      });
    }, 60_000);
    afterAll(() => void proc?.kill('SIGTERM'));

    it('with the token: lists and calls', async () => {
      const client = new Client({ name: 'test', version: '1' });
      await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
      try {
        await checkTools(client);
      } finally {
        await client.close();
      }
    }, 30_000);

    it('without the token (or with a wrong one) the request is refused', async () => {
      const client = new Client({ name: 'test', version: '1' });
      await expect(client.connect(new StreamableHTTPClientTransport(new URL(url)))).rejects.toThrow(/401|token/i);
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'shout', arguments: { text: 'x' } } });
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
      const r = await fetch(url, { method: 'POST', headers: { ...headers, authorization: 'Bearer wrong-token-000000000' }, body });
      expect(r.status).toBe(401);
      // the same raw request with the token works (a stateless server: no session needed)
      const ok = await fetch(url, { method: 'POST', headers: { ...headers, authorization: `Bearer ${token}` }, body });
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as { result: { content: { text: string }[] } }).result.content[0]!.text).toBe('X');
    }, 30_000);
  });
});
