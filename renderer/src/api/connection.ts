// Picks the transport (Electron preload or WebSocket) and adapts the engine's protocol client
// (engine/server/client.ts, the one the CLI uses too) to the ArborApi the stores use.
import { createClient, type EngineClient, type Transport } from '../../../engine/server/client';
import type * as wire from '../../../engine/server/protocol';
import type {
  ArborApi,
  ChatEvent,
  Checkpoint,
  ConnectionState,
  EngineEvent,
  LogLine,
  RunSummary,
  Template,
  ToolCallView,
  TrajectoryView,
  TryResult,
} from './types';
import { engineWsUrl, pageToken, preloadTransport, webSocketTransport } from './transports';

/** A fresh id naming one playground chat (its events and its cancel request carry it). */
export const newChatId = (): string => `chat-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

export function connectEngine(): ArborApi {
  const transport = window.arbor ? preloadTransport(window.arbor) : webSocketTransport(engineWsUrl(window.location), WebSocket, { token: pageToken(window) });
  return adaptClient(createClient(transport), transport);
}

// The protocol carries Unix seconds (the store's unit, as in MLflow); the UI works in milliseconds.
const ms = (s: number) => s * 1000;
const msOrNull = (s: number | null) => (s == null ? null : s * 1000);
const runMs = <R extends wire.RunSummary>(r: R): R => ({ ...r, createdAt: ms(r.createdAt), startedAt: msOrNull(r.startedAt), endedAt: msOrNull(r.endedAt) });
const checkpointMs = (c: wire.Checkpoint): Checkpoint => ({ ...c, createdAt: ms(c.createdAt) });
const lineMs = (l: wire.LogLine): LogLine => ({ ...l, time: ms(l.time) });

export function adaptClient(client: EngineClient, transport: Pick<Transport, 'onState'>): ArborApi {
  return {
    listTemplates: async () => (await client.request('templates.list')) as Template[],
    listRuns: async () => (await client.request('runs.list')).map(runMs) as RunSummary[],
    setNotes: async (id, notes) => void (await client.request('runs.setNotes', { id, notes })),
    setTags: async (id, tags) => void (await client.request('runs.setTags', { id, tags })),
    getRun: async (id) => {
      const r = runMs(await client.request('runs.get', { id }));
      return { ...r, checkpoints: r.checkpoints.map(checkpointMs) };
    },
    startRun: (req) => client.request('runs.start', req),
    stopRun: async (id) => void (await client.request('runs.stop', { id })),
    resumeRun: async (id) => void (await client.request('runs.resume', { id })),
    pauseRun: async (id) => void (await client.request('runs.pause', { id })),
    forkRun: (id, opts) => client.request('runs.fork', { id, ...opts }),
    metricSeries: (runId, keys, maxPoints) => client.request('metrics.series', { runId, keys, maxPoints }),
    runLog: async (runId, afterSeq) => (await client.request('runs.log', { runId, afterSeq })).map(lineMs),
    trajectorySteps: (runId) => client.request('trajectories.steps', { runId }),
    listTrajectories: (q) => client.request('trajectories.list', q),
    getTrajectory: async (id) => deriveToolCalls(normalizeTrajectory(await client.request('trajectories.get', { id }))),
    groupTrajectories: (runId, step, group) => client.request('trajectories.group', { runId, step, group }),
    listEnvFiles: () => client.request('env.files'),
    readEnvFile: (path) => client.request('env.read', { path }),
    writeEnvFile: async (path, text) => void (await client.request('env.write', { path, text })),
    envTypes: () => client.request('env.types'),
    tryTool: async (req) => normalizeTry(await client.request('sandbox.tryTool', req), req.path),
    tryReward: async (req) => normalizeTry(await client.request('sandbox.tryReward', req), req.path),
    tryMcp: async (req) => normalizeTry(await client.request('mcp.tryTool', req)),
    listCheckpoints: async (runId) => (await client.request('checkpoints.list', { runId })).map(checkpointMs),
    exportRun: async (id) => (await client.request('runs.export', { id })).files,
    forkTrajectory(req, onProgress) {
      const off = onProgress ? client.on('replay', (e) => e.trajectoryId === req.trajectoryId && onProgress(e)) : () => undefined;
      return client.request('replay.fork', req).finally(off);
    },
    listForks: (trajectoryId) => client.request('replay.forks', { trajectoryId }),
    trajectoryDrift: async (trajectoryId) => (await client.request('replay.drift', { trajectoryId })).trajectory!,
    topK: (req) => client.request('replay.topk', req),
    liveStart: (req) => client.request('live.start', req),
    liveStep: (req) => client.request('live.step', req),
    liveClose: async (sessionId) => void (await client.request('live.close', { sessionId })),
    runLearning: (id) => client.request('runs.learning', { id }),
    listRunGroups: async () => (await client.request('groups.list')).map((g) => ({ ...g, createdAt: ms(g.createdAt), endedAt: msOrNull(g.endedAt) })),
    runGroupReport: (id, metrics) => client.request('groups.report', { id, metrics }),
    compareRunGroups: (a, b) => client.request('groups.compare', { a, b }),
    runGroupSeries: (id, maxPoints) => client.request('groups.series', { id, maxPoints }),
    // The client names the chat (chatId); the engine pushes `chat` events for it
    // ({chatId, type: token | turn | tool_call | observation | done | error, ...}) as generation
    // goes, and answers the request with the whole transcript when the episode ends.
    chat(req, onEvent) {
      const chatId = req.chatId ?? newChatId();
      const off = client.on('chat', (data) => {
        const { chatId: id, ...e } = data;
        if (id === chatId) onEvent(e as ChatEvent);
      });
      return client.request('playground.chat', { ...req, chatId }).then(
        (r) => {
          off();
          return { world: r.world, dataset: r.dataset, format: r.format, tools: r.tools, reason: r.reason, stopped: r.stopped };
        },
        (err: unknown) => {
          off();
          throw err;
        },
      );
    },
    cancelChat: (chatId) => client.request('playground.cancel', { chatId }),
    onEvent(cb) {
      return client.onEvent((m) => {
        let e: EngineEvent;
        switch (m.event) {
          case 'run':
            e = { type: 'run', run: runMs(m.data.run) };
            break;
          case 'log':
            e = { type: 'log', runId: m.data.runId, line: lineMs(m.data.line) };
            break;
          case 'checkpoint':
            e = { type: 'checkpoint', runId: m.data.runId, checkpoint: checkpointMs(m.data.checkpoint) };
            break;
          case 'metrics':
            e = { type: 'metrics', ...m.data };
            break;
          case 'trajectories':
            e = { type: 'trajectories', ...m.data };
            break;
          case 'queue':
            e = { type: 'queue', ...m.data };
            break;
          default:
            return; // chat (per request, above), engine, import
        }
        cb(e);
      });
    },
    onEngineInfo: (cb) => client.on('engine', cb),
    onConsent: (cb) => client.on('consent', cb),
    answerConsent: async (id, approve) => void (await client.request('consent.answer', { id, approve })),
    openWorkspace: (path) => client.request('workspace.open', { path }),
    onConnection(cb: (s: ConnectionState) => void) {
      return transport.onState(cb);
    },
    listModels: () => client.request('models.list'),
    pullModel(req, onProgress) {
      const key = req.repo.includes('@') ? req.repo : `${req.repo}@${req.revision ?? 'main'}`;
      const off = client.on('pull', (e) => e.repo === key && onProgress(e));
      return client.request('models.pull', req).finally(off);
    },
    cancelPull: (repo) => client.request('models.cancelPull', { repo }),
  };
}

/**
 * Fill what the views rely on: per-token strings (absent when the engine could not decode the
 * tokens; the turn then shows its text without a heat map) and the reward breakdown (the
 * reward components the environment reported, stored in the outcome).
 */
export function normalizeTrajectory(t: wire.TrajectoryDetail): TrajectoryView {
  const breakdown: Record<string, number> = {};
  const components = t.outcomeData.components;
  if (components && typeof components === 'object') for (const [k, v] of Object.entries(components)) if (typeof v === 'number') breakdown[k] = v;
  return {
    ...t,
    rewardBreakdown: breakdown,
    turnsData: t.turnsData.map((u) => ({ ...u, tokens: u.tokens.length === u.tokenIds.length ? u.tokens : [], toolCalls: u.toolCalls as ToolCallView[] })),
  };
}

/**
 * Tool calls of a trajectory stored without call records (the training loop keeps tokens, not
 * calls): read from the model turns' tags — Search-R1 `<search>q</search>` and Hermes/Qwen
 * `<tool_call>{json}</tool_call>` — with the following observation turn as the result. Marked
 * `derived` so the view says where they came from.
 */
export function deriveToolCalls(t: TrajectoryView): TrajectoryView {
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
