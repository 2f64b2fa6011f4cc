// @vitest-environment node
// (node: the engine side registers its handlers with import.meta.url paths, which jsdom cannot resolve.)
// The editor's try-it for MCP servers, driven through the renderer's store and protocol client
// against a real engine over WebSocket: a workspace JSON file in the mcpServers layout (the test
// MCP server of tests/engine/interop), its tools listed with their schemas, one call with JSON
// arguments, an isError result and a bad file shown as errors.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineServer } from '../../engine/server/server';
import { registerAreaHandlers } from '../../engine/server/templates';
import type { WebServer } from '../../engine/server/transports';
import type { Transport } from '../../renderer/src/api/transports';
import type { ArborStore } from '../../renderer/src/store';
import { argsSkeleton, isMcpServersFile } from '../../renderer/src/store/editor';
import { storeOverWebSocket } from '../engine/server/fixtures/ws-store';

const SERVER = resolve(__dirname, '../engine/interop/fixtures/test-mcp-server.mjs');
let home: string;
let engine: EngineServer;
let web: WebServer;
let transport: Transport;
let store: ArborStore;
const file = JSON.stringify({ mcpServers: { t: { command: process.execPath, args: [SERVER], tools: ['add', 'fail'] } } }, null, 2);

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'arbor-mcp-try-'));
  engine = new EngineServer({ home });
  await registerAreaHandlers(engine); // env.*, sandbox.* and mcp.tryTool, as the engine registers them
  ({ web, transport, store } = await storeOverWebSocket(engine));
});

afterAll(async () => {
  transport?.close();
  await web?.close();
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('editor try-it for MCP servers', () => {
  it('lists the servers tools with schemas, calls one, and shows isError results as errors', async () => {
    const s = () => store.getState();
    s().editorActions.newFile('envs/mcp.json', file);
    expect(await s().editorActions.saveFile()).toBe(true);
    await s().editorActions.openFile('envs/mcp.json');
    expect(isMcpServersFile(s().editor.filePath, s().editor.source)).toBe(true);
    await s().editorActions.listMcpTools();
    expect(s().editor.tryResult).toMatchObject({ ok: true });
    expect(s().editor.mcpTools.map((t) => t.name)).toEqual(['add', 'fail']);
    expect(s().editor.mcpTools[0]!.parameters).toMatchObject({
      type: 'object',
      properties: { a: { type: 'number' }, b: { type: 'number' } },
      required: ['a', 'b'],
    });
    // The first tool is picked, its arguments filled from its schema.
    expect(s().editor.mcpTool).toBe('add');
    expect(JSON.parse(s().editor.tryArgs)).toEqual({ a: 0, b: 0 });
    s().editorActions.setTryArgs('{"a": 2, "b": 40}');
    await s().editorActions.tryIt();
    expect(s().editor.tryResult).toMatchObject({ ok: true, value: { result: '42' } });
    s().editorActions.setMcpTool('fail');
    expect(JSON.parse(s().editor.tryArgs)).toEqual({ why: '' });
    s().editorActions.setTryArgs('{"why": "no reason"}');
    await s().editorActions.tryIt();
    expect(s().editor.tryResult).toMatchObject({ ok: false, error: { message: expect.stringContaining('refused: no reason') } });
    // Arguments that break the schema are refused before the call, naming the field.
    s().editorActions.setTryArgs('{"why": 3}');
    await s().editorActions.tryIt();
    expect(s().editor.tryResult!.ok).toBe(false);
    expect(s().editor.tryResult!.error!.message).toMatch(/why/);
  });

  it('names what is wrong: bad JSON arguments, a bad server entry, a server that cannot start', async () => {
    const s = () => store.getState();
    s().editorActions.setTryArgs('{oops');
    await s().editorActions.tryIt();
    expect(s().editor.tryResult!.error!.message).toMatch(/Tool arguments are not valid JSON/);
    s().editorActions.newFile('envs/bad.json', JSON.stringify({ mcpServers: { t: { args: [] } } }));
    await s().editorActions.listMcpTools();
    expect(s().editor.tryResult).toMatchObject({ ok: false, error: { message: expect.stringMatching(/t\.command/) } });
    s().editorActions.newFile('envs/gone.json', JSON.stringify({ mcpServers: { gone: { command: join(home, 'no-such-binary') } } }));
    await s().editorActions.listMcpTools();
    expect(s().editor.tryResult).toMatchObject({ ok: false, error: { message: expect.stringContaining('gone') } });
    s().editorActions.newFile('envs/list.json', '{"mcpServers": [1]}');
    await s().editorActions.listMcpTools();
    expect(s().editor.tryResult!.error!.message).toMatch(/mcpServers must be an object/);
  });

  it('tells MCP files from other JSON and builds argument skeletons', () => {
    expect(isMcpServersFile('envs/a.json', '{"mcpServers": {}}')).toBe(true);
    expect(isMcpServersFile('envs/a.json', '{"mcpServers": {')).toBe(true);
    expect(isMcpServersFile('envs/a.json', '{"tasks": []}')).toBe(false);
    expect(isMcpServersFile('tools/a.ts', '{"mcpServers": {}}')).toBe(false);
    expect(argsSkeleton({ properties: { q: { type: 'string' }, n: { type: 'integer', default: 3 }, x: { type: 'boolean' } }, required: ['q', 'n'] })).toBe(
      '{"q":"","n":3}',
    );
  });
});
