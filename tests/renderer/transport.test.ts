// The protocol client (engine/server/client.ts, shared by the renderer and the CLI) over the
// WebSocket transport against a real local WebSocket server: messages queued before the socket
// opens are delivered, results and events are checked against the protocol on receipt, a lost
// engine is reported and the transport reconnects by itself.
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, WebSocket as NodeWebSocket } from 'ws';
import type { AddressInfo } from 'node:net';
import { engineWsUrl, pageToken, webSocketTransport, type Transport } from '../../renderer/src/api/transports';
import { createClient, tokenFromProtocols, tokenProtocols, type ConnectionState } from '../../engine/server/client';

const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function echoServer(port = 0): Promise<WebSocketServer> {
  return new Promise((resolve) => {
    const wss: WebSocketServer = new WebSocketServer({ host: '127.0.0.1', port }, (): void => resolve(wss));
    wss.on('connection', (sock: NodeWebSocket) =>
      sock.on('message', (raw: Buffer) => {
        const m = JSON.parse(String(raw));
        // runs.get fails, runs.list answers off-protocol (an id that is a number), env.read echoes
        if (m.method === 'runs.get') sock.send(JSON.stringify({ id: m.id, error: { message: 'no run with id "x"', code: 'failed' } }));
        else if (m.method === 'runs.list') sock.send(JSON.stringify({ id: m.id, result: [{ id: 5, name: 'n' }] }));
        else sock.send(JSON.stringify({ id: m.id, result: `echo:${m.params.path}` }));
        sock.send(JSON.stringify({ event: 'log', data: { runId: 'r', text: 'off-protocol: no line' } }));
        sock.send(JSON.stringify({ event: 'log', data: { runId: 'r', line: { seq: 1, time: 2, level: 'info', text: 'hi' } } }));
      }),
    );
  });
}
const closeServer = (wss: WebSocketServer) =>
  new Promise<void>((r) => {
    for (const c of wss.clients) c.terminate();
    wss.close(() => r());
  });

function states(t: Transport): ConnectionState[] {
  const out: ConnectionState[] = [];
  t.onState((s) => out.push(s));
  return out;
}

describe('engine WebSocket URL and token', () => {
  it('uses the page host, with no token in the URL', () => {
    expect(engineWsUrl({ protocol: 'http:', host: '127.0.0.1:5123' })).toBe('ws://127.0.0.1:5123/ws');
  });
  it('moves the first load’s ?token= out of the URL and history at once, and keeps it for reloads of this tab', () => {
    const store = new Map<string, string>();
    const replaced: string[] = [];
    const win = (search: string) => ({
      location: { pathname: '/', search, hash: '#/runs' },
      history: { state: null, replaceState: (_d: unknown, _u: string, url?: string) => void replaced.push(url ?? '') },
      sessionStorage: { getItem: (k: string) => store.get(k) ?? null, setItem: (k: string, v: string) => void store.set(k, v) },
    });
    expect(pageToken(win('?token=abc%2B1&x=2'))).toBe('abc+1');
    expect(replaced).toEqual(['/?x=2#/runs']);
    // a reload: the URL has no token any more; the tab's sessionStorage has it
    expect(pageToken(win(''))).toBe('abc+1');
    expect(replaced).toHaveLength(1);
  });
  it('sends the token as a WebSocket subprotocol, not in the URL', async () => {
    const seen: { url: string; protocol: string | undefined }[] = [];
    const wss: WebSocketServer = await new Promise((resolve) => {
      const w: WebSocketServer = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: () => 'arbor' }, () => resolve(w));
    });
    wss.on('connection', (_s, req) => seen.push({ url: req.url ?? '', protocol: req.headers['sec-websocket-protocol'] }));
    cleanups.push(() => closeServer(wss));
    const t = webSocketTransport(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}/ws?token=s3cret`, NodeWebSocket as unknown as typeof WebSocket);
    cleanups.push(() => t.close());
    await expect.poll(() => seen.length, { timeout: 5000 }).toBe(1);
    expect(seen[0]!.url).toBe('/ws');
    expect(tokenFromProtocols(seen[0]!.protocol)).toBe('s3cret');
    expect(tokenProtocols('s3cret')).toEqual(['arbor', `arbor.token.${Buffer.from('s3cret').toString('hex')}`]);
  });
});

describe('WebSocket transport + request correlation', () => {
  it('delivers requests sent before the socket opened and correlates responses, errors and events', async () => {
    const wss = await echoServer();
    cleanups.push(() => closeServer(wss));
    const t = webSocketTransport(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}/ws?token=t`, NodeWebSocket as unknown as typeof WebSocket);
    cleanups.push(() => t.close());
    const refused: string[] = [];
    const rpc = createClient(t, { onProtocolError: (m) => refused.push(m) });
    const events: unknown[] = [];
    rpc.onEvent((e) => events.push(e));
    const [a, b] = await Promise.all([rpc.request('env.read', { path: 'tools/a.ts' }), rpc.request('env.read', { path: 'tools/b.ts' })]);
    expect(a).toBe('echo:tools/a.ts');
    expect(b).toBe('echo:tools/b.ts');
    await expect(rpc.request('runs.get', { id: 'x' })).rejects.toMatchObject({ name: 'EngineError', code: 'failed', message: 'no run with id "x"' });
    await expect(rpc.request('runs.list')).rejects.toThrow(/^the engine's answer to runs.list does not match the protocol: 0\.id: .*; 0\.status: /);
    expect(events[0]).toEqual({ event: 'log', data: { runId: 'r', line: { seq: 1, time: 2, level: 'info', text: 'hi' } } });
    expect(events).toHaveLength(4);
    expect(refused[0]).toMatch(/^event "log" does not match the protocol: line: /);
  });

  it('reports a lost engine, queues requests made meanwhile, and reconnects when it is back', async () => {
    let wss = await echoServer();
    const port = (wss.address() as AddressInfo).port;
    const t = webSocketTransport(`ws://127.0.0.1:${port}/ws?token=t`, NodeWebSocket as unknown as typeof WebSocket);
    cleanups.push(() => t.close());
    const seen = states(t);
    const rpc = createClient(t, { onProtocolError: () => {} });
    await rpc.request('env.read', { path: 'before' });
    await closeServer(wss);
    await expect.poll(() => seen.some((s) => s.state === 'closed'), { timeout: 5000 }).toBe(true);
    // a request made while the engine is away waits in the queue and is answered after reconnecting
    const pending = rpc.request('env.read', { path: 'after' });
    wss = await echoServer(port);
    cleanups.push(() => closeServer(wss));
    await expect(pending).resolves.toBe('echo:after');
    expect(seen.filter((s) => s.state === 'open').length).toBeGreaterThanOrEqual(2);
  });
});
