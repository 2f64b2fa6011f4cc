// The WebSocket transport against a real local WebSocket server: messages queued before the
// socket opens are delivered, a lost engine is reported and the transport reconnects by itself.
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, WebSocket as NodeWebSocket } from 'ws';
import type { AddressInfo } from 'node:net';
import { engineWsUrl, webSocketTransport, type Transport } from '../../renderer/src/api/transports';
import { rpcOverTransport } from '../../renderer/src/api/connection';
import type { ConnectionState } from '../../renderer/src/api/types';

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
        if (m.method === 'fail') sock.send(JSON.stringify({ id: m.id, error: { message: 'run "x" not found', code: 'not_found' } }));
        else sock.send(JSON.stringify({ id: m.id, result: { echoed: m.params } }));
        sock.send(JSON.stringify({ event: 'log', data: { runId: 'r', text: 'hi' } }));
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

describe('engine WebSocket URL', () => {
  it('uses the page host and the token from the query string', () => {
    expect(engineWsUrl({ protocol: 'http:', host: '127.0.0.1:5123', search: '?token=abc%2B1' })).toBe('ws://127.0.0.1:5123/ws?token=abc%2B1');
  });
});

describe('WebSocket transport + request correlation', () => {
  it('delivers requests sent before the socket opened and correlates responses, errors and events', async () => {
    const wss = await echoServer();
    cleanups.push(() => closeServer(wss));
    const t = webSocketTransport(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}/ws?token=t`, NodeWebSocket as unknown as typeof WebSocket);
    cleanups.push(() => t.close());
    const rpc = rpcOverTransport(t);
    const events: unknown[] = [];
    rpc.onEvent((e, d) => events.push([e, d]));
    const [a, b] = await Promise.all([rpc.request('x', { n: 1 }), rpc.request('y', { n: 2 })]);
    expect(a).toEqual({ echoed: { n: 1 } });
    expect(b).toEqual({ echoed: { n: 2 } });
    await expect(rpc.request('fail')).rejects.toThrow('run "x" not found');
    expect(events[0]).toEqual(['log', { runId: 'r', text: 'hi' }]);
  });

  it('reports a lost engine, queues requests made meanwhile, and reconnects when it is back', async () => {
    let wss = await echoServer();
    const port = (wss.address() as AddressInfo).port;
    const t = webSocketTransport(`ws://127.0.0.1:${port}/ws?token=t`, NodeWebSocket as unknown as typeof WebSocket);
    cleanups.push(() => t.close());
    const seen = states(t);
    const rpc = rpcOverTransport(t);
    await rpc.request('x', 1);
    await closeServer(wss);
    await expect.poll(() => seen.some((s) => s.state === 'closed'), { timeout: 5000 }).toBe(true);
    // a request made while the engine is away waits in the queue and is answered after reconnecting
    const pending = rpc.request('x', 'after');
    wss = await echoServer(port);
    cleanups.push(() => closeServer(wss));
    await expect(pending).resolves.toEqual({ echoed: 'after' });
    expect(seen.filter((s) => s.state === 'open').length).toBeGreaterThanOrEqual(2);
  });
});
