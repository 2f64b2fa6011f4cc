// The two ways the renderer reaches the engine. Both carry the same protocol messages:
//  - Electron: window.arbor (preload) over a MessagePort to the engine utility process;
//  - web mode (`arbor serve`): a WebSocket to 127.0.0.1 with the per-launch token from the first
//    page URL (moved out of the URL at once, sent as a WebSocket subprotocol).
import type { ConnectionState, Transport } from '../../../engine/server/client';
export { webSocketTransport, type Transport } from '../../../engine/server/client';

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

/** WebSocket URL of the engine for a page served by `arbor serve` (same host; no token in it: see pageToken). */
export function engineWsUrl(loc: { protocol: string; host: string }): string {
  const scheme = loc.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${loc.host}/ws`;
}

const TOKEN_KEY = 'arbor.engineToken';

/**
 * The engine's access token for a page served by `arbor serve`. The printed URL carries it as
 * `?token=` for the first load only: it is moved at once into this tab's sessionStorage (which
 * survives a reload, and no other site can read) and taken out of the address bar and the
 * history entry (history.replaceState), so it is not left in the URL, the history or a
 * bookmark. The WebSocket then sends it as a subprotocol, never in a URL.
 */
export function pageToken(win: {
  location: { pathname: string; search: string; hash: string };
  history: { replaceState(data: unknown, unused: string, url?: string): void; state: unknown };
  sessionStorage: { getItem(k: string): string | null; setItem(k: string, v: string): void };
}): string | undefined {
  const params = new URLSearchParams(win.location.search);
  const fromUrl = params.get('token');
  if (fromUrl !== null) {
    win.sessionStorage.setItem(TOKEN_KEY, fromUrl);
    params.delete('token');
    const rest = params.toString();
    win.history.replaceState(win.history.state, '', `${win.location.pathname}${rest ? `?${rest}` : ''}${win.location.hash}`);
    return fromUrl;
  }
  return win.sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}
