/**
 * Transports for the engine server: WebSocket on 127.0.0.1 with a per-launch token (and the
 * built renderer served over HTTP on the same port; Host/Origin checked, see serveWebSocket), a MessagePort (Electron utility
 * process), and stdio (JSON lines).
 */
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { extname, join, normalize, sep } from 'node:path';
import { createInterface } from 'node:readline';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { tokenFromProtocols, WS_PROTOCOL } from './client';
import { BAD_REQUEST, guardRequest, HEADERS_TOO_LARGE, refusal, safeDecode, safeEqual } from '../base/http-guard';
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

/**
 * Serve the engine on 127.0.0.1 only. Every request first passes the shared Host/Origin check
 * (http-guard.ts: a loopback Host, and an Origin, when sent, of this server), so a page on
 * another site, or one reached by DNS rebinding, gets 403. A malformed path answers 400 and never
 * throws. The WebSocket is at /ws: the token comes as a subprotocol (client.ts tokenProtocols),
 * compared in constant time; without the right one the socket is closed with 4401. The page
 * itself is served without a token (it holds no data): the printed URL carries `?token=` once,
 * and the page moves it out of its URL at once (renderer/src/api/transports.ts).
 */
export async function serveWebSocket(engine: EngineServer, opts: { port?: number; staticDir?: string; token?: string } = {}): Promise<WebServer> {
  const token = opts.token ?? randomBytes(18).toString('base64url');
  let port = 0;
  const http: Server = createServer((req, res) => {
    try {
      serveStatic(req, res, port, opts.staticDir);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`internal error: ${e instanceof Error ? e.message : String(e)}\n`);
    }
  });
  http.on('clientError', (e: NodeJS.ErrnoException, socket) => {
    // what the HTTP parser refuses (a null byte, a huge header, not HTTP at all): 431 or 400, never a crash
    if (socket.writable) socket.end(e.code === 'HPE_HEADER_OVERFLOW' ? HEADERS_TOO_LARGE : BAD_REQUEST);
    else socket.destroy();
  });
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 16 * 1024 * 1024,
    handleProtocols: (offered) => (offered.has(WS_PROTOCOL) ? WS_PROTOCOL : false),
  });
  http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const refuse = (status: string, why: string) => {
      socket.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n\r\n${why}\n`);
    };
    const why = refusal(req, port);
    if (why) return refuse('403 Forbidden', `forbidden: ${why}`);
    const path = pathOf(req.url);
    if (path !== '/ws') return refuse('404 Not Found', 'the engine WebSocket is at /ws');
    const given = tokenFromProtocols(header(req.headers['sec-websocket-protocol']));
    try {
      wss.handleUpgrade(req, socket, head, (ws) => {
        if (given === undefined || !safeEqual(given, token)) {
          ws.close(4401, 'missing or wrong token');
          return;
        }
        const client = {
          send: (m: unknown) => {
            if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(m));
          },
        };
        const off = engine.connect(client);
        ws.on('message', (data, isBinary) => {
          if (isBinary)
            return client.send({ id: null, error: { message: 'malformed message: binary frames are not part of the protocol', code: 'bad_request' } });
          void engine.handle(client, data.toString());
        });
        ws.on('close', off);
        ws.on('error', off);
      });
    } catch {
      socket.destroy();
    }
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  port = (http.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/?token=${token}`,
    port,
    token,
    close: () =>
      new Promise<void>((r) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        http.closeAllConnections();
        http.close(() => r());
      }),
  };
}

const header = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v.join(',') : v);

/** The decoded path of a request URL, or undefined when it cannot be parsed (`/%ff`, a null byte). */
function pathOf(raw: string | undefined): string | undefined {
  let url: URL;
  try {
    url = new URL(raw ?? '/', 'http://127.0.0.1');
  } catch {
    return undefined;
  }
  const path = safeDecode(url.pathname);
  return path === undefined || path.includes('\0') ? undefined : path;
}

/** The built renderer: GET/HEAD of files under `dir` only (index.html for any other path, as the app routes itself). */
function serveStatic(req: IncomingMessage, res: ServerResponse, port: number, dir: string | undefined): void {
  if (!guardRequest(req, res, port)) return;
  const plain = (code: number, text: string, extra: Record<string, string> = {}): void =>
    void res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', ...extra }).end(`${text}\n`);
  if (req.method !== 'GET' && req.method !== 'HEAD')
    return plain(405, `method ${req.method} not allowed: this server only serves the workbench page`, { allow: 'GET, HEAD' });
  const path = pathOf(req.url);
  if (path === undefined) return plain(400, 'bad request: the path is not a valid URL path');
  if (!dir || !existsSync(dir)) return plain(404, 'Arbor engine: no renderer build to serve (run `npm run build:renderer`).');
  const root = normalize(dir);
  let file = normalize(join(root, path));
  if (!file.startsWith(root + sep) && file !== root) return plain(403, 'forbidden: outside the renderer build');
  if (!existsSync(file) || statSync(file).isDirectory()) file = join(root, 'index.html');
  const stream = createReadStream(file);
  stream.on('error', () => {
    if (!res.headersSent) plain(404, 'not found');
    else res.destroy();
  });
  stream.on('open', () => {
    res.writeHead(200, { 'content-type': MIME[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-cache' });
    if (req.method === 'HEAD') {
      stream.destroy();
      res.end();
    } else stream.pipe(res);
  });
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
