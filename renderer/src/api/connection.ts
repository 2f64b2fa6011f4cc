// Picks the transport (Electron preload or WebSocket) and adapts the engine protocol client to
// the ArborApi the stores use.
import type { ArborApi, ChatEvent, ConnectionState, EngineEvent } from './types';
import { EngineError } from './types';
import { engineWsUrl, preloadTransport, webSocketTransport, type Transport } from './transports';

export interface RpcClient {
  request(method: string, params?: unknown): Promise<unknown>;
  onEvent(listener: (event: string, data: unknown) => void): () => void;
}

/** Minimal request/response correlation over a transport (replaced by engine/server/client.ts). */
export function rpcOverTransport(t: Transport): RpcClient {
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: unknown) => void }>();
  const listeners = new Set<(event: string, data: unknown) => void>();
  t.onMessage((raw) => {
    const m = raw as { id?: number; result?: unknown; error?: { message: string; code?: string; details?: unknown }; event?: string; data?: unknown };
    if (m.id != null && pending.has(m.id)) {
      const p = pending.get(m.id)!;
      pending.delete(m.id);
      if (m.error) p.reject(new EngineError(m.error.message, m.error.code, m.error.details));
      else p.resolve(m.result);
    } else if (m.event) for (const l of listeners) l(m.event, m.data);
  });
  t.onState((s) => {
    if (s.state !== 'open' && s.state !== 'connecting') {
      for (const p of pending.values()) p.reject(new EngineError(`The engine connection was lost (${s.message}); retry when it is back.`));
      pending.clear();
    }
  });
  return {
    request(method, params) {
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        t.send({ id, method, params });
      });
    },
    onEvent(l) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
  };
}

export function connectEngine(): ArborApi {
  const transport = window.arbor ? preloadTransport(window.arbor) : webSocketTransport(engineWsUrl(window.location));
  return adaptClient(rpcOverTransport(transport), transport);
}

export function adaptClient(rpc: RpcClient, transport: Pick<Transport, 'onState'>): ArborApi {
  const call = <T>(method: string, params?: unknown) => rpc.request(method, params) as Promise<T>;
  return {
    listTemplates: () => call('templates.list'),
    listRuns: () => call('runs.list'),
    getRun: (id) => call('runs.get', { id }),
    startRun: (req) => call('runs.start', req),
    stopRun: (id) => call('runs.stop', { id }),
    resumeRun: (id) => call('runs.resume', { id }),
    forkRun: (id, opts) => call('runs.fork', { id, ...opts }),
    metricSeries: (runId, keys, maxPoints) => call('metrics.series', { runId, keys, maxPoints }),
    runLog: (runId, afterSeq) => call('runs.log', { runId, afterSeq }),
    trajectorySteps: (runId) => call('trajectories.steps', { runId }),
    listTrajectories: (q) => call('trajectories.list', q),
    getTrajectory: (id) => call('trajectories.get', { id }),
    listEnvFiles: () => call('env.files'),
    readEnvFile: (path) => call('env.read', { path }),
    writeEnvFile: (path, text) => call('env.write', { path, text }),
    envTypes: () => call('env.types'),
    tryTool: (req) => call('sandbox.tryTool', req),
    tryReward: (req) => call('sandbox.tryReward', req),
    listCheckpoints: (runId) => call('checkpoints.list', { runId }),
    // The engine answers playground.chat with a chat id, then pushes `chat` events
    // ({chatId, type: token | tool_call | observation | done | error, ...}) as generation goes.
    chat(req, onEvent) {
      return new Promise<void>((resolve, reject) => {
        let chatId: string | null = null;
        const early: ChatEvent[] = [];
        const deliver = (e: ChatEvent) => {
          onEvent(e);
          if (e.type === 'done' || e.type === 'error') {
            off();
            resolve();
          }
        };
        const off = rpc.onEvent((event, data) => {
          if (event !== 'chat') return;
          const { chatId: id, ...e } = data as { chatId: string } & ChatEvent;
          if (chatId === null) early.push({ ...(e as ChatEvent), chatId: id } as ChatEvent & { chatId: string });
          else if (id === chatId) deliver(e as ChatEvent);
        });
        call<{ chatId: string }>('playground.chat', req).then(
          (r) => {
            chatId = r.chatId;
            for (const e of early.splice(0)) if ((e as ChatEvent & { chatId: string }).chatId === chatId) deliver(e);
          },
          (err) => {
            off();
            reject(err);
          },
        );
      });
    },
    onEvent(cb) {
      return rpc.onEvent((event, data) => {
        if (event !== 'chat') cb({ type: event, ...(data as object) } as EngineEvent);
      });
    },
    onConnection(cb: (s: ConnectionState) => void) {
      return transport.onState(cb);
    },
  };
}
