/**
 * Hostile input against the two local servers, `arbor serve` (serveWebSocket: the workbench page
 * and the engine WebSocket) and `arbor mcp serve --http` (serveMcpHttp): malformed paths, foreign
 * Host and Origin headers, bad bodies and bad WebSocket frames. Each must be answered (400, 403,
 * 401, …) or the socket closed, and the server must keep serving afterwards. Raw TCP is used where
 * an HTTP client would clean the request up first (`/%ff`, null bytes, a missing Host).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { EngineServer } from '../../../engine/server/server';
import { serveWebSocket, type WebServer } from '../../../engine/server/transports';
import { tokenProtocols } from '../../../engine/server/client';
import { serveMcpHttp, type McpHttpHandle } from '../../../engine/interop/mcp-server';
import type { Tool } from '../../../engine/env/tool';

/** Send raw bytes, return the status code of the answer (0 when the server closed without one) and the text. */
function raw(port: number, request: string | Buffer, keepUpgraded = false): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let text = '';
    sock.on('data', (d) => {
      text += d.toString('latin1');
      // an accepted upgrade stays open: its status line is the answer
      if (!keepUpgraded && text.startsWith('HTTP/1.1 101') && text.includes('\r\n\r\n')) sock.destroy();
    });
    sock.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' || e.code === 'EPIPE' ? undefined : reject(e)));
    sock.on('close', () => resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0), text }));
    sock.setTimeout(10_000, () => sock.destroy());
    sock.write(request);
  });
}
const get = (port: number, path: string, headers: Record<string, string> = { host: `127.0.0.1:${port}` }) =>
  raw(
    port,
    `GET ${path} HTTP/1.1\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}connection: close\r\n\r\n`,
  );

let home: string;
let engine: EngineServer;
let web: WebServer;
let mcp: McpHttpHandle;
const echo: Tool = {
  name: 'echo',
  description: 'echo the text',
  parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  execute: (a) => ({ content: String(a.text), success: true }),
};

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'arbor-fuzz-'));
  const dist = join(home, 'dist');
  mkdirSync(join(dist, 'assets'), { recursive: true });
  writeFileSync(join(dist, 'index.html'), '<!doctype html><title>workbench</title>');
  writeFileSync(join(dist, 'assets', 'a.js'), 'console.log(1)');
  writeFileSync(join(home, 'secret.txt'), 'TOP SECRET');
  engine = new EngineServer({ home });
  web = await serveWebSocket(engine, { staticDir: dist });
  mcp = await serveMcpHttp([echo], { token: 'fuzz-token-0123456789' });
});
afterAll(async () => {
  await web.close();
  engine.close();
  await mcp.close();
});

/** Open a WebSocket with the token; resolves once open, with a helper that waits for the next message. */
function openWs(headers: Record<string, string> = {}, token = web.token) {
  const ws = new WebSocket(`ws://127.0.0.1:${web.port}/ws`, tokenProtocols(token), { headers });
  const messages: any[] = [];
  ws.on('message', (d) => messages.push(JSON.parse(d.toString())));
  const closed = new Promise<number>((r) => ws.on('close', (c) => r(c)));
  const opened = new Promise<void>((r, j) => {
    ws.once('open', () => r());
    ws.once('error', j);
  });
  return { ws, messages, closed, opened };
}

async function stillServing() {
  expect((await get(web.port, '/')).status).toBe(200);
  const c = openWs();
  await c.opened;
  c.ws.send(JSON.stringify({ id: 7, method: 'engine.info' }));
  await expect.poll(() => c.messages.find((m) => m.id === 7)?.result?.pid, { timeout: 5000 }).toBe(process.pid);
  c.ws.close();
  const r = await fetch(mcp.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${mcp.token}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'alive' } } }),
  });
  expect(r.status).toBe(200);
  expect(((await r.json()) as any).result.content[0].text).toBe('alive');
}

describe('arbor serve (HTTP)', () => {
  it('binds 127.0.0.1 only', () => {
    expect(web.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=/);
  });
  it('answers malformed, hostile and huge paths with 4xx, serves no file outside the build, and keeps serving', async () => {
    expect((await get(web.port, '/%ff')).status).toBe(400);
    expect((await get(web.port, '/%')).status).toBe(400);
    expect((await get(web.port, '/assets/%e0%a4%a')).status).toBe(400);
    expect((await get(web.port, '/a%00b')).status).toBe(400);
    // a literal null byte in the request line: the HTTP parser refuses it
    expect((await raw(web.port, Buffer.from(`GET /a\0b HTTP/1.1\r\nhost: 127.0.0.1:${web.port}\r\n\r\n`, 'latin1'))).status).toBe(400);
    // encoded traversal: blocked (403), or normalised by the URL parser into the build (index.html)
    for (const p of ['/..%2f..%2fsecret.txt', '/..%2fsecret.txt', '/%2e%2e/%2e%2e/secret.txt', '/..%5c..%5csecret.txt', '/assets/..%2f..%2f..%2fsecret.txt']) {
      const r = await get(web.port, p);
      expect(r.text, p).not.toContain('TOP SECRET');
      expect([200, 403], p).toContain(r.status);
    }
    expect((await get(web.port, '/..%2f..%2fsecret.txt')).status).toBe(403);
    expect((await get(web.port, '/' + 'a'.repeat(100_000))).status).toBe(431);
    expect((await get(web.port, '/assets/a.js')).text).toContain('console.log(1)');
    // not an HTTP request at all
    expect((await raw(web.port, '\x16\x03\x01garbage\r\n\r\n')).status).toBe(400);
    await stillServing();
  });
  it('refuses a foreign Host, a missing Host and a foreign Origin (403), and sends no CORS headers', async () => {
    expect((await get(web.port, '/', { host: 'evil.example' })).status).toBe(403);
    expect((await get(web.port, '/', { host: `evil.example:${web.port}` })).status).toBe(403);
    expect((await raw(web.port, 'GET / HTTP/1.0\r\n\r\n')).status).toBe(403);
    expect((await get(web.port, '/', { host: `127.0.0.1:${web.port}`, origin: 'http://evil.example' })).status).toBe(403);
    expect((await get(web.port, '/', { host: `127.0.0.1:${web.port}`, origin: `http://127.0.0.1:${web.port + 1}` })).status).toBe(403);
    const own = await get(web.port, '/', { host: `localhost:${web.port}`, origin: `http://localhost:${web.port}` });
    expect(own.status).toBe(200);
    const pre = await raw(
      web.port,
      `OPTIONS / HTTP/1.1\r\nhost: 127.0.0.1:${web.port}\r\norigin: http://127.0.0.1:${web.port}\r\naccess-control-request-method: POST\r\nconnection: close\r\n\r\n`,
    );
    expect(pre.status).toBe(405);
    expect(pre.text.toLowerCase()).not.toContain('access-control-allow');
    expect(own.text.toLowerCase()).not.toContain('access-control-allow');
  });
  it('answers a body sent to the page server with 405, whatever it holds', async () => {
    const body = Buffer.alloc(200_000, 0xff);
    const r = await raw(
      web.port,
      Buffer.concat([Buffer.from(`POST / HTTP/1.1\r\nhost: 127.0.0.1:${web.port}\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`), body]),
    );
    expect(r.status).toBe(405);
    await stillServing();
  });
});

describe('arbor serve (WebSocket)', () => {
  it('refuses an upgrade with a foreign Host or Origin (403) or to another path (404)', async () => {
    const up = (path: string, extra: string) =>
      raw(
        web.port,
        `GET ${path} HTTP/1.1\r\n${extra}connection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-protocol: ${tokenProtocols(web.token).join(', ')}\r\n\r\n`,
      );
    expect((await up('/ws', 'host: evil.example\r\n')).status).toBe(403);
    expect((await up('/ws', `host: 127.0.0.1:${web.port}\r\norigin: http://evil.example\r\n`)).status).toBe(403);
    expect((await up('/%ff', `host: 127.0.0.1:${web.port}\r\n`)).status).toBe(404);
    expect((await up('/elsewhere', `host: 127.0.0.1:${web.port}\r\n`)).status).toBe(404);
    expect((await up('/ws', `host: 127.0.0.1:${web.port}\r\n`)).status).toBe(101);
    const foreign = openWs({ origin: 'http://evil.example' });
    await expect(foreign.opened).rejects.toThrow(/403/);
  });
  it('a wrong or garbled token is closed with 4401', async () => {
    expect(await openWs({}, 'wrong').closed).toBe(4401);
    const garbled = new WebSocket(`ws://127.0.0.1:${web.port}/ws`, ['arbor', 'arbor.token.zz']);
    expect(await new Promise((r) => garbled.on('close', (c) => r(c)))).toBe(4401);
  });
  it('answers binary garbage and invalid JSON with errors, closes on a huge frame, and keeps serving', async () => {
    const c = openWs();
    await c.opened;
    c.ws.send(Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x80]));
    c.ws.send('{"id": 1, "method": ');
    c.ws.send('null');
    c.ws.send(JSON.stringify({ id: 2, method: 'env.read', params: { path: '../../secret.txt' } }));
    c.ws.send(JSON.stringify({ id: 3, method: 'x'.repeat(100_000), params: [1, 2, 3] }));
    await expect.poll(() => c.messages.filter((m) => m.error).length, { timeout: 5000 }).toBe(5);
    const errors = c.messages.filter((m) => m.error).map((m) => m.error.message as string);
    expect(errors[0]).toMatch(/binary frames/);
    expect(errors[1]).toBe('malformed message: not JSON');
    expect(errors.join('\n')).not.toContain('TOP SECRET');
    // frames that break the WebSocket protocol itself (unmasked, reserved opcode, garbage): the socket is dropped
    for (const frame of [
      Buffer.from([0x81, 0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f]),
      Buffer.from([0x8b, 0x80, 1, 2, 3, 4]),
      Buffer.from('\x00\xff garbage \r\n\r\n'),
    ]) {
      const r = await raw(
        web.port,
        Buffer.concat([
          Buffer.from(
            `GET /ws HTTP/1.1\r\nhost: 127.0.0.1:${web.port}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-protocol: ${tokenProtocols(web.token).join(', ')}\r\n\r\n`,
          ),
          frame,
        ]),
        true,
      );
      expect(r.status).toBe(101);
    }
    const huge = openWs();
    await huge.opened;
    huge.ws.send(Buffer.alloc(17 * 1024 * 1024, 0x61), { binary: false });
    expect(await huge.closed).toBe(1009);
    await stillServing();
  });
});

describe('arbor mcp serve --http', () => {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
  const post = (headers: Record<string, string>, b: string | Buffer = body, path = '/mcp') =>
    raw(
      mcp.port,
      Buffer.concat([
        Buffer.from(
          `POST ${path} HTTP/1.1\r\n${Object.entries({
            host: `127.0.0.1:${mcp.port}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'content-length': String(Buffer.byteLength(b)),
            connection: 'close',
            ...headers,
          })
            .map(([k, v]) => `${k}: ${v}\r\n`)
            .join('')}\r\n`,
        ),
        Buffer.from(b),
      ]),
    );
  const auth = { authorization: 'Bearer fuzz-token-0123456789' };
  it('binds 127.0.0.1 and answers with the token', async () => {
    expect(mcp.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const r = await post(auth);
    expect(r.status).toBe(200);
    expect(r.text).toContain('"echo"');
    expect(r.text.toLowerCase()).not.toContain('access-control-allow');
  });
  it('refuses no token, a wrong one and one in the query string (401)', async () => {
    expect((await post({})).status).toBe(401);
    expect((await post({ authorization: 'Bearer fuzz-token-0123456780' })).status).toBe(401);
    expect((await post({}, body, `/mcp?token=${mcp.token}`)).status).toBe(401);
  });
  it('refuses a foreign Host, a missing Host or a foreign Origin even with the token (403)', async () => {
    expect((await post({ ...auth, host: 'evil.example' })).status).toBe(403);
    expect((await post({ ...auth, host: `evil.example:${mcp.port}` })).status).toBe(403);
    expect((await post({ ...auth, origin: 'http://evil.example' })).status).toBe(403);
    expect((await post({ ...auth, origin: 'null' })).status).toBe(403);
    expect((await post({ ...auth, origin: `http://localhost:${mcp.port}` })).status).toBe(200);
    const noHost = await raw(mcp.port, `POST /mcp HTTP/1.0\r\nauthorization: Bearer ${mcp.token}\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    expect(noHost.status).toBe(403);
  });
  it('answers bad paths and bad bodies with 4xx and keeps serving', async () => {
    expect((await post(auth, body, '/%ff')).status).toBe(400);
    expect((await post(auth, body, '/mcp%')).status).toBe(400);
    expect((await post(auth, body, '/mc%00p')).status).toBe(404);
    expect((await post(auth, body, '/' + 'm'.repeat(100_000))).status).toBeGreaterThanOrEqual(400);
    expect((await post(auth, '{"jsonrpc": "2.0", ')).status).toBe(400);
    expect((await post(auth, Buffer.from([0xff, 0x00, 0xfe]))).status).toBe(400);
    expect((await post(auth, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'nope', arguments: 5 } }))).status).toBeLessThan(
      500,
    );
    expect((await post({ ...auth, 'content-type': 'text/plain' })).status).toBe(415);
    const huge = await post(auth, Buffer.alloc(5 * 1024 * 1024, 0x20));
    expect([0, 413]).toContain(huge.status);
    await stillServing();
  });
});
