/**
 * Transports for the engine server: WebSocket on 127.0.0.1 with a per-launch token (and the
 * built renderer served over HTTP on the same port), a MessagePort (Electron utility
 * process), and stdio (JSON lines).
 */
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { extname, join, normalize, sep } from 'node:path';
import { createInterface } from 'node:readline';
import { WebSocketServer } from 'ws';
import type { EngineServer } from './server';

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.css': 'text/css',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ttf': 'font/ttf',
  '.woff2': 'font/woff2',
  '.wasm': 'application/wasm',
};

export interface WebServer {
  url: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

/** Serve the engine on 127.0.0.1 only. A WebSocket at /ws?token=… without the right token is refused (close 4401). */
export async function serveWebSocket(engine: EngineServer, opts: { port?: number; staticDir?: string; token?: string } = {}): Promise<WebServer> {
  const token = opts.token ?? randomBytes(18).toString('base64url');
  const http: Server = createServer((req, res) => {
    const dir = opts.staticDir;
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (!dir || !existsSync(dir)) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Arbor engine: no renderer build to serve (run `npm run build:renderer`).');
      return;
    }
    let file = normalize(join(dir, decodeURIComponent(url.pathname)));
    if (!file.startsWith(normalize(dir) + sep) && file !== normalize(dir)) {
      res.writeHead(403).end();
      return;
    }
    if (!existsSync(file) || statSync(file).isDirectory()) file = join(dir, 'index.html');
    res.writeHead(200, { 'content-type': MIME[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-cache' });
    createReadStream(file).pipe(res);
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024 });
  http.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    wss.handleUpgrade(req, socket, head, (ws) => {
      if (url.pathname !== '/ws' || url.searchParams.get('token') !== token) {
        ws.close(4401, 'missing or wrong token');
        return;
      }
      const client = {
        send: (m: unknown) => {
          if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(m));
        },
      };
      const off = engine.connect(client);
      ws.on('message', (data) => void engine.handle(client, data.toString()));
      ws.on('close', off);
      ws.on('error', off);
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (http.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/?token=${token}`,
    port,
    token,
    close: () =>
      new Promise<void>((r) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        http.close(() => r());
      }),
  };
}

/** A MessagePort-like endpoint (Electron's MessagePortMain, or Node's MessagePort in tests). */
export interface PortLike {
  postMessage(message: unknown): void;
  on(event: 'message', listener: (e: unknown) => void): unknown;
  start?(): void;
}

export function attachPort(engine: EngineServer, port: PortLike): () => void {
  const client = { send: (m: unknown) => port.postMessage(m) };
  const off = engine.connect(client);
  port.on('message', (e: unknown) => {
    // Electron's MessagePortMain delivers { data }; Node's MessagePort delivers the value.
    const data = e && typeof e === 'object' && 'data' in (e as object) && !('id' in (e as object)) ? (e as { data: unknown }).data : e;
    void engine.handle(client, data);
  });
  port.start?.();
  return off;
}

/** JSON lines over stdin/stdout. */
export function attachStdio(engine: EngineServer): void {
  const client = { send: (m: unknown) => process.stdout.write(JSON.stringify(m) + '\n') };
  engine.connect(client);
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => void engine.handle(client, line));
}
