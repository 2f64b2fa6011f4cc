// The two ways the renderer reaches the engine. Both carry the same protocol messages:
//  - Electron: window.arbor (preload) over a MessagePort to the engine utility process;
//  - web mode (`arbor serve`): a WebSocket to 127.0.0.1 with the per-launch token from the URL.
import type { ConnectionState } from './types';

/** The object the Electron preload puts on window.arbor (electron/preload.cjs). */
export interface ArborPreload {
  kind: 'electron';
  platform: string;
  send(message: unknown): void;
  onMessage(listener: (message: unknown) => void): () => void;
  onEngineState(listener: (state: { state: 'open' } | { state: 'engine-crashed'; message: string; restarting: boolean; attempt?: number }) => void): () => void;
  reconnect(): void;
}

declare global {
  interface Window {
    arbor?: ArborPreload;
  }
}

export interface Transport {
  send(message: unknown): void;
  onMessage(listener: (message: unknown) => void): () => void;
  onState(listener: (s: ConnectionState) => void): () => void;
  close(): void;
}

export function preloadTransport(arbor: ArborPreload): Transport {
  const stateListeners = new Set<(s: ConnectionState) => void>();
  arbor.onEngineState((s) => {
    for (const l of stateListeners) l(s);
  });
  return {
    send: (m) => arbor.send(m),
    onMessage: (l) => arbor.onMessage(l),
    onState(l) {
      stateListeners.add(l);
      return () => stateListeners.delete(l);
    },
    close() {},
  };
}

/** WebSocket URL of the engine for a page served by `arbor serve` (same host, token from ?token=). */
export function engineWsUrl(loc: { protocol: string; host: string; search: string }): string {
  const token = new URLSearchParams(loc.search).get('token') ?? '';
  const scheme = loc.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${loc.host}/ws?token=${encodeURIComponent(token)}`;
}

/**
 * WebSocket transport that reconnects with backoff when the engine goes away (the page shows a
 * banner meanwhile) and queues messages sent while disconnected.
 */
export function webSocketTransport(url: string, WS: typeof WebSocket = WebSocket): Transport {
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
    const sock = new WS(url);
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
    sock.onclose = (e) => {
      if (ws !== sock || closed) return;
      ws = null;
      attempt++;
      const reason = e.code === 4401 || e.code === 1008 ? 'the engine rejected the access token (open the URL printed by `arbor serve`)' : wasOpen ? `connection closed (code ${e.code})` : 'cannot reach the engine';
      emit({ state: 'closed', message: reason });
      setTimeout(connect, Math.min(5000, 250 * 2 ** Math.min(attempt, 5)));
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
