/**
 * The CLI's way to the engine: the same protocol client as the workbench (engine/server/client.ts).
 * With `--engine <url>` (or ARBOR_ENGINE) it talks to a running `arbor serve` over its
 * WebSocket; without, it starts an engine in this process over the workspace database (which,
 * like every engine, marks runs whose owning process is gone `interrupted`; live ones stay).
 */
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import WebSocket from 'ws';
import { arborHome } from '../store/db';
import { createClient, inProcessTransport, webSocketTransport, type ConnectionState, type EngineClient, type Transport } from '../server/client';
import { EngineServer } from '../server/server';
import { registerModels } from '../server/models';
import { registerReplay } from '../server/replay';

export interface CliEngine {
  client: EngineClient;
  close(): void;
}

/** The WebSocket URL for what `arbor serve` printed (http://127.0.0.1:PORT/?token=T) or a ws:// URL. */
export function engineSocketUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error(`--engine: "${url}" is not a URL (give the one \`arbor serve\` printed, like http://127.0.0.1:PORT/?token=…)`);
  }
  const token = u.searchParams.get('token');
  if (!token) throw new Error(`--engine: "${url}" has no ?token= (give the whole URL \`arbor serve\` printed)`);
  const scheme = u.protocol === 'https:' || u.protocol === 'wss:' ? 'wss:' : 'ws:';
  return `${scheme}//${u.host}/ws?token=${encodeURIComponent(token)}`;
}

export function connectCliEngine(opts: { engine?: string } = {}): CliEngine {
  const url = opts.engine ?? process.env.ARBOR_ENGINE;
  if (url) {
    const transport = webSocketTransport(engineSocketUrl(url), WebSocket as unknown as typeof globalThis.WebSocket, { reconnect: false });
    return { client: createClient(transport), close: () => transport.close() };
  }
  const engine = new EngineServer({ home: arborHome() });
  // What-if replays (arbor replay, and the forks `arbor show` lists) run in this engine too.
  if (!engine.workspaceError) registerReplay(engine);
  // The model list and pulls (arbor models, the picker) need no workspace.
  registerModels(engine);
  const transport = inProcessTransport(engine);
  return {
    client: createClient(transport),
    close: () => {
      transport.close();
      engine.close();
    },
  };
}

/** Run `fn` with a connected engine client and close it afterwards. */
export async function withEngine<T>(opts: { engine?: string }, fn: (c: EngineClient) => Promise<T>): Promise<T> {
  const e = connectCliEngine(opts);
  try {
    return await fn(e.client);
  } finally {
    e.close();
  }
}

/**
 * The protocol as JSON lines over a pair of streams: the other end of `arbor serve --stdio`
 * (its stdout in, its stdin out), for tools that embed the engine as a child process.
 */
export function streamTransport(input: Readable, output: Writable): Transport {
  const messageListeners = new Set<(m: unknown) => void>();
  const stateListeners = new Set<(s: ConnectionState) => void>();
  const rl = createInterface({ input });
  rl.on('line', (line) => {
    if (!line.trim()) return;
    let m: unknown;
    try {
      m = JSON.parse(line);
    } catch {
      return; // not a protocol line
    }
    for (const l of messageListeners) l(m);
  });
  rl.on('close', () => {
    for (const l of stateListeners) l({ state: 'closed', message: 'the engine closed its output' });
  });
  return {
    send: (m) => void output.write(JSON.stringify(m) + '\n'),
    onMessage(l) {
      messageListeners.add(l);
      return () => messageListeners.delete(l);
    },
    onState(l) {
      stateListeners.add(l);
      queueMicrotask(() => l({ state: 'open' }));
      return () => stateListeners.delete(l);
    },
    close() {
      rl.close();
      output.end();
    },
  };
}
