/**
 * The engine's protocol client, the one the renderer, the CLI and the tests use. Typed by
 * protocol.ts and checked at runtime on receipt: a result or event that does not match the
 * protocol is refused with an error naming the method (or event) and the field.
 *
 * A client runs over a Transport: a WebSocket (browser or Node with `ws`), the Electron
 * preload's MessagePort (renderer/src/api/transports.ts), or an engine in the same process.
 * No Node imports here: the renderer bundles this file.
 */
import {
  api,
  describeIssues,
  events,
  isEventName,
  type EngineEventName,
  type EventData,
  type EventMessage,
  type Method,
  type Params,
  type Result,
} from './protocol';

export type ConnectionState =
  | { state: 'connecting' }
  | { state: 'open' }
  | { state: 'engine-crashed'; message: string; restarting: boolean; attempt?: number }
  | { state: 'closed'; message: string };

export interface Transport {
  send(message: unknown): void;
  onMessage(listener: (message: unknown) => void): () => void;
  onState(listener: (s: ConnectionState) => void): () => void;
  close(): void;
}

/** An error from the engine (or from the connection to it), with the readable message the UI shows. */
export class EngineError extends Error {
  constructor(
    message: string,
    readonly code?: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

type ParamArgs<M extends Method> = undefined extends Params<M> ? [params?: Params<M>] : [params: Params<M>];

export interface EngineClient {
  /** Call a method; resolves with its result (checked against the protocol), rejects with an EngineError. */
  request<M extends Method>(method: M, ...params: ParamArgs<M>): Promise<Result<M>>;
  /** Listen to one pushed event. */
  on<E extends EngineEventName>(event: E, listener: (data: EventData<E>) => void): () => void;
  /** Listen to every pushed event. */
  onEvent(listener: (e: EventMessage) => void): () => void;
  onState(listener: (s: ConnectionState) => void): () => void;
  close(): void;
}

export interface ClientOptions {
  /** Called with a message when the engine pushes an event that is not in the protocol (the event is dropped). Default: console.warn. */
  onProtocolError?: (message: string) => void;
}

export function createClient(t: Transport, opts: ClientOptions = {}): EngineClient {
  const report = opts.onProtocolError ?? ((m: string) => console.warn(`arbor engine client: ${m}`));
  let nextId = 1;
  const pending = new Map<number, { method: Method; resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  const listeners = new Set<(e: EventMessage) => void>();
  t.onMessage((raw) => {
    const m = raw as { id?: number | null; result?: unknown; error?: { message: string; code?: string; details?: unknown }; event?: string; data?: unknown };
    if (m.id != null && pending.has(m.id)) {
      const p = pending.get(m.id)!;
      pending.delete(m.id);
      if (m.error) return p.reject(new EngineError(m.error.message, m.error.code, m.error.details));
      const r = api[p.method].result.safeParse(m.result);
      if (r.success) p.resolve(r.data);
      else p.reject(new EngineError(`the engine's answer to ${p.method} does not match the protocol: ${describeIssues(r.error, 'result')}`, 'bad_result'));
    } else if (typeof m.event === 'string') {
      if (!isEventName(m.event)) return report(`unknown event "${m.event}"`);
      const d = events[m.event].safeParse(m.data);
      if (!d.success) return report(`event "${m.event}" does not match the protocol: ${describeIssues(d.error, 'data')}`);
      const e = { event: m.event, data: d.data } as EventMessage;
      for (const l of listeners) l(e);
    } else if (m.error) {
      report(`the engine refused a message: ${m.error.message}`);
    }
  });
  t.onState((s) => {
    if (s.state !== 'open' && s.state !== 'connecting') {
      for (const p of pending.values()) p.reject(new EngineError(`The engine connection was lost (${s.message}); retry when it is back.`, 'disconnected'));
      pending.clear();
    }
  });
  return {
    request(method, ...args) {
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { method, resolve: resolve as (v: unknown) => void, reject });
        t.send(args[0] === undefined ? { id, method } : { id, method, params: args[0] });
      });
    },
    on(event, listener) {
      const l = (e: EventMessage) => {
        if (e.event === event) listener(e.data as EventData<typeof event>);
      };
      listeners.add(l);
      return () => listeners.delete(l);
    },
    onEvent(l) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    onState: (l) => t.onState(l),
    close: () => t.close(),
  };
}

/** The WebSocket subprotocol the engine speaks; the access token travels as a second one (never in the URL). */
export const WS_PROTOCOL = 'arbor';
const WS_TOKEN_PREFIX = 'arbor.token.';

/**
 * The Sec-WebSocket-Protocol values that carry `token` (hex of its UTF-8 bytes, so any token is a
 * valid header token): the server selects `arbor` and checks the other in constant time.
 */
export function tokenProtocols(token: string): string[] {
  const hex = Array.from(new TextEncoder().encode(token), (b) => b.toString(16).padStart(2, '0')).join('');
  return [WS_PROTOCOL, WS_TOKEN_PREFIX + hex];
}

/** The token a client offered in its Sec-WebSocket-Protocol header (see tokenProtocols), or undefined. */
export function tokenFromProtocols(header: string | undefined): string | undefined {
  const p = (header ?? '')
    .split(',')
    .map((x) => x.trim())
    .find((x) => x.startsWith(WS_TOKEN_PREFIX));
  const hex = p?.slice(WS_TOKEN_PREFIX.length) ?? '';
  if (!p || hex.length % 2 || !/^[0-9a-f]*$/.test(hex)) return undefined;
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * WebSocket transport that reconnects with backoff when the engine goes away (the workbench
 * shows a banner meanwhile) and queues messages sent while disconnected. Pass `ws`'s WebSocket
 * under Node. `reconnect: false` gives up after the first close (the CLI).
 *
 * The access token (`opts.token`, or a `token` query parameter of `url`, which is taken out of
 * the URL) is sent as a WebSocket subprotocol (tokenProtocols), so it never appears in a URL
 * that a proxy, a log or the browser's history could keep.
 */
export function webSocketTransport(url: string, WS: typeof WebSocket = WebSocket, opts: { reconnect?: boolean; token?: string } = {}): Transport {
  const u = new URL(url);
  const token = opts.token ?? u.searchParams.get('token') ?? undefined;
  u.searchParams.delete('token');
  url = u.toString();
  const protocols = token !== undefined ? tokenProtocols(token) : undefined;
  const messageListeners = new Set<(m: unknown) => void>();
  const stateListeners = new Set<(s: ConnectionState) => void>();
  const queue: string[] = [];
  let ws: WebSocket | null = null;
  let closed = false;
  let attempt = 0;
  let wasOpen = false;
  const emit = (s: ConnectionState) => {
    for (const l of stateListeners) l(s);
  };
  const connect = () => {
    if (closed) return;
    const sock = protocols ? new WS(url, protocols) : new WS(url);
    ws = sock;
    sock.onopen = () => {
      attempt = 0;
      wasOpen = true;
      emit({ state: 'open' });
      while (queue.length && sock.readyState === WS.OPEN) sock.send(queue.shift()!);
    };
    sock.onmessage = (e) => {
      let msg: unknown;
      try {
        msg = JSON.parse(typeof e.data === 'string' ? e.data : String(e.data));
      } catch {
        return;
      }
      for (const l of messageListeners) l(msg);
    };
    sock.onerror = () => {
      // The close event that follows says what happened.
    };
    sock.onclose = (e) => {
      if (ws !== sock || closed) return;
      ws = null;
      attempt++;
      const reason =
        e.code === 4401 || e.code === 1008
          ? 'the engine rejected the access token (open the URL printed by `arbor serve`)'
          : wasOpen
            ? `connection closed (code ${e.code})`
            : `cannot reach the engine at ${url}`;
      emit({ state: 'closed', message: reason });
      if (opts.reconnect === false) closed = true;
      else setTimeout(connect, Math.min(5000, 250 * 2 ** Math.min(attempt, 5)));
    };
  };
  connect();
  return {
    send(m) {
      const text = JSON.stringify(m);
      if (ws && ws.readyState === WS.OPEN) ws.send(text);
      else queue.push(text);
    },
    onMessage(l) {
      messageListeners.add(l);
      return () => messageListeners.delete(l);
    },
    onState(l) {
      stateListeners.add(l);
      return () => stateListeners.delete(l);
    },
    close() {
      closed = true;
      ws?.close();
    },
  };
}

/** What an engine in the same process offers a transport (EngineServer). */
export interface LocalEngine {
  connect(client: { send(message: unknown): void }): () => void;
  handle(client: { send(message: unknown): void }, raw: unknown): Promise<void>;
}

/**
 * An engine in this process, reached through the same messages as over a wire (each message is
 * copied with structuredClone both ways, so neither side holds the other's objects).
 */
export function inProcessTransport(engine: LocalEngine): Transport {
  const messageListeners = new Set<(m: unknown) => void>();
  const client = {
    send: (m: unknown) => {
      const copy = structuredClone(m);
      queueMicrotask(() => {
        for (const l of messageListeners) l(copy);
      });
    },
  };
  let off: (() => void) | null = engine.connect(client);
  return {
    send(m) {
      if (!off) throw new EngineError('the in-process engine client is closed');
      void engine.handle(client, structuredClone(m));
    },
    onMessage(l) {
      messageListeners.add(l);
      return () => messageListeners.delete(l);
    },
    onState(l) {
      queueMicrotask(() => l({ state: 'open' }));
      return () => {};
    },
    close() {
      off?.();
      off = null;
    },
  };
}
