// The two ways the renderer reaches the engine. Both carry the same protocol messages:
//  - Electron: window.arbor (preload) over a MessagePort to the engine utility process;
//  - web mode (`arbor serve`): a WebSocket to 127.0.0.1 with the per-launch token from the URL.
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

/** WebSocket URL of the engine for a page served by `arbor serve` (same host, token from ?token=). */
export function engineWsUrl(loc: { protocol: string; host: string; search: string }): string {
  const token = new URLSearchParams(loc.search).get('token') ?? '';
  const scheme = loc.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${loc.host}/ws?token=${encodeURIComponent(token)}`;
}
