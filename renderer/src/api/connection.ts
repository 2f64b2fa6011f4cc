// Picks the transport (Electron preload or WebSocket) and adapts the engine protocol client to
// the ArborApi the stores use.
import type { ArborApi, ChatEvent, Checkpoint, ConnectionState, EngineEvent, LogLine, RunDetail, ToolCallView, Trajectory, TryResult, TurnView } from './types';
import { EngineError } from './types';
import { engineWsUrl, preloadTransport, webSocketTransport, type Transport } from './transports';

export interface RpcClient {
  request(method: string, params?: unknown): Promise<unknown>;
  onEvent(listener: (event: string, data: unknown) => void): () => void;
}

/** Request/response correlation and pushed events over a transport (the renderer's engine client; the CLI reads the workspace database directly). */
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

/** A fresh id naming one playground chat (its events and its cancel request carry it). */
export const newChatId = (): string => `chat-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

export function connectEngine(): ArborApi {
  const transport = window.arbor ? preloadTransport(window.arbor) : webSocketTransport(engineWsUrl(window.location));
  return adaptClient(rpcOverTransport(transport), transport);
}

export function adaptClient(rpc: RpcClient, transport: Pick<Transport, 'onState'>): ArborApi {
  const call = <T>(method: string, params?: unknown) => rpc.request(method, params) as Promise<T>;
  return {
    listTemplates: () => call('templates.list'),
    listRuns: () => call('runs.list'),
    getRun: async (id) => {
      const r = await call<RunDetail>('runs.get', { id });
      return { ...r, checkpoints: r.checkpoints.map(checkpointMs) };
    },
    startRun: (req) => call('runs.start', req),
    stopRun: (id) => call('runs.stop', { id }),
    resumeRun: (id) => call('runs.resume', { id }),
    forkRun: (id, opts) => call('runs.fork', { id, ...opts }),
    metricSeries: (runId, keys, maxPoints) => call('metrics.series', { runId, keys, maxPoints }),
    // The store keeps times in seconds (MLflow style); the UI works in milliseconds.
    runLog: async (runId, afterSeq) => (await call<LogLine[]>('runs.log', { runId, afterSeq })).map((l) => ({ ...l, time: l.time * 1000 })),
    trajectorySteps: (runId) => call('trajectories.steps', { runId }),
    listTrajectories: (q) => call('trajectories.list', q),
    getTrajectory: async (id) => deriveToolCalls(normalizeTrajectory(await call<RawTrajectory>('trajectories.get', { id }))),
    listEnvFiles: () => call('env.files'),
    readEnvFile: (path) => call('env.read', { path }),
    writeEnvFile: (path, text) => call('env.write', { path, text }),
    envTypes: () => call('env.types'),
    tryTool: async (req) => normalizeTry(await call('sandbox.tryTool', req), req.path),
    tryReward: async (req) => normalizeTry(await call('sandbox.tryReward', req), req.path),
    listCheckpoints: async (runId) => (await call<Checkpoint[]>('checkpoints.list', { runId })).map(checkpointMs),
    // The client names the chat (chatId); the engine pushes `chat` events for it
    // ({chatId, type: token | turn | tool_call | observation | done | error, ...}) as generation
    // goes, and answers the request with the whole transcript when the episode ends.
    chat(req, onEvent) {
      const chatId = req.chatId ?? newChatId();
      const off = rpc.onEvent((event, data) => {
        if (event !== 'chat') return;
        const { chatId: id, ...e } = data as { chatId: string } & ChatEvent;
        if (id === chatId) onEvent(e as ChatEvent);
      });
      return call<{ world?: number; dataset?: string; reason?: string; stopped?: boolean }>('playground.chat', { ...req, chatId }).then(
        (r) => {
          off();
          return { world: r?.world, dataset: r?.dataset, reason: r?.reason, stopped: r?.stopped };
        },
        (err) => {
          off();
          throw err;
        },
      );
    },
    cancelChat: (chatId) => call('playground.cancel', { chatId }),
    onEvent(cb) {
      return rpc.onEvent((event, data) => {
        if (event === 'chat') return;
        const e = { type: event, ...(data as object) } as EngineEvent;
        if (e.type === 'log') e.line = { ...e.line, time: e.line.time * 1000 };
        if (e.type === 'run') e.run = { ...e.run, createdAt: e.run.createdAt * 1000, template: e.run.template ?? undefined, error: e.run.error ?? undefined };
        if (e.type === 'checkpoint') e.checkpoint = checkpointMs(e.checkpoint);
        cb(e);
      });
    },
    onConnection(cb: (s: ConnectionState) => void) {
      return transport.onState(cb);
    },
  };
}

const checkpointMs = (c: Checkpoint): Checkpoint => ({ ...c, createdAt: c.createdAt == null ? undefined : c.createdAt * 1000 });

type RawTurn = Omit<TurnView, 'tokens' | 'toolCalls'> & { tokens?: string[]; toolCalls?: unknown[] };
type RawTrajectory = Omit<Trajectory, 'turnsData' | 'rewardBreakdown'> & { turnsData: RawTurn[]; rewardBreakdown?: Record<string, number>; outcomeData?: Record<string, unknown> };

/**
 * Fill what the views rely on: per-token strings (absent when the engine could not decode the
 * tokens; the turn then shows its text without a heat map), tool calls with readable results,
 * and the reward breakdown (from the stored outcome when the engine sends no explicit one).
 */
export function normalizeTrajectory(t: RawTrajectory): Trajectory {
  const breakdown: Record<string, number> = { ...(t.rewardBreakdown ?? {}) };
  const rewards = t.outcomeData?.rewards;
  if (!t.rewardBreakdown && rewards && typeof rewards === 'object') for (const [k, v] of Object.entries(rewards)) if (typeof v === 'number') breakdown[k] = v;
  return {
    ...t,
    rewardBreakdown: breakdown,
    turnsData: t.turnsData.map((u) => {
      const tokens = Array.isArray(u.tokens) && u.tokens.length === u.tokenIds.length ? u.tokens : [];
      const toolCalls = (u.toolCalls ?? []).map((c) => {
        const call = (c ?? {}) as Record<string, unknown>;
        const result = call.result ?? call.content;
        return {
          name: String(call.name ?? '?'),
          args: call.args ?? call.arguments,
          result: result == null ? undefined : typeof result === 'string' ? result : JSON.stringify(result),
          error: call.error == null ? undefined : String(call.error),
          latencyMs: typeof call.latencyMs === 'number' ? call.latencyMs : undefined,
        };
      });
      return { ...u, tokens, toolCalls };
    }),
  };
}

/**
 * Tool calls of a trajectory stored without call records (the training loop keeps tokens, not
 * calls): read from the model turns' tags — Search-R1 `<search>q</search>` and Hermes/Qwen
 * `<tool_call>{json}</tool_call>` — with the following observation turn as the result. Marked
 * `derived` so the view says where they came from.
 */
export function deriveToolCalls(t: Trajectory): Trajectory {
  if (t.turnsData.some((u) => u.toolCalls.length)) return t;
  const turnsData = t.turnsData.map((u, i) => {
    if (u.role !== 'model') return u;
    const calls: ToolCallView[] = [];
    for (const m of u.text.matchAll(/<search>([\s\S]*?)<\/search>/g)) calls.push({ name: 'search', args: { query: m[1].trim() }, derived: true });
    for (const m of u.text.matchAll(/<tool_call>([\s\S]*?)<\/tool_call>/g)) {
      try {
        const j = JSON.parse(m[1]) as { name?: string; arguments?: unknown };
        calls.push({ name: String(j.name ?? '?'), args: j.arguments, derived: true });
      } catch {
        calls.push({ name: '?', args: m[1].trim(), error: 'arguments are not valid JSON', derived: true });
      }
    }
    const next = t.turnsData[i + 1];
    if (calls.length && next && next.role !== 'model') calls[calls.length - 1].result = next.text.trim();
    return calls.length ? { ...u, toolCalls: calls } : u;
  });
  return { ...t, turnsData };
}

/**
 * The sandbox's answer as the editor shows it: `{ ok, value | error: { message, line, column } }`.
 * Accepts an error given as a string, and takes the line from the stack (the first frame in the
 * user's file) when the sandbox reports none.
 */
export function normalizeTry(raw: unknown, path?: string): TryResult {
  const r = (raw ?? {}) as Record<string, unknown>;
  const logs = Array.isArray(r.logs) ? r.logs.map(String) : undefined;
  const ms = typeof r.ms === 'number' ? r.ms : typeof r.durationMs === 'number' ? r.durationMs : undefined;
  const err = r.error;
  if (r.ok === false || (err !== undefined && err !== null && r.ok !== true)) {
    const e = (typeof err === 'string' ? { message: err } : (err ?? {})) as { message?: string; line?: number; column?: number; stack?: string };
    let line = typeof e.line === 'number' ? e.line : typeof r.line === 'number' ? r.line : undefined;
    let column = typeof e.column === 'number' ? e.column : typeof r.column === 'number' ? r.column : undefined;
    if (line === undefined && e.stack) {
      const file = path?.split('/').pop();
      const frame = e.stack.split('\n').find((l) => (file ? l.includes(file) : /:\d+:\d+\)?$/.test(l)));
      const m = frame && /:(\d+):(\d+)\)?\s*$/.exec(frame);
      if (m) [line, column] = [Number(m[1]), Number(m[2])];
    }
    return { ok: false, error: { message: e.message ?? 'failed', line, column, stack: e.stack }, logs, ms };
  }
  return { ok: true, value: 'value' in r ? r.value : 'result' in r ? r.result : raw, logs, ms };
}
