/**
 * The engine server: validates every message against the protocol (protocol.ts), dispatches
 * to handlers, and pushes run events to every connected client. Transport-agnostic: a client
 * is anything with `send(message)`; transports (WebSocket, MessagePort, stdio) feed
 * `handle(client, raw)`. A bad message gets an error reply; the server keeps serving.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { openDatabase, WorkspaceError, type DB } from '../store/db';
import { Store } from '../store/store';
import { isMethod, methods, requestSchema, type Method, type ProtocolError } from './protocol';
import { RunManager, type RunEvent, type RunTemplate } from './runs';

export interface Client {
  send(message: unknown): void;
}

type Handler = (params: any, client: Client) => unknown;

export interface EngineServerOptions {
  home: string;
  dbPath?: string;
  templates?: RunTemplate[];
}

export class EngineServer {
  private db: DB | null = null;
  store: Store | null = null;
  runs: RunManager | null = null;
  workspaceError: string | null = null;
  private clients = new Set<Client>();
  private handlers = new Map<string, Handler>();
  private offRuns: (() => void) | null = null;

  constructor(readonly opts: EngineServerOptions) {
    this.openWorkspace(opts.dbPath ?? join(opts.home, 'arbor.db'));
    this.registerCore();
  }

  /** Open a workspace database; on failure the engine stays up and reports the error. */
  openWorkspace(file: string): void {
    try {
      const db = openDatabase(file);
      this.offRuns?.();
      this.db?.close();
      this.db = db;
      this.store = new Store(db);
      this.runs = new RunManager(this.store, dirname(file));
      for (const t of this.opts.templates ?? []) this.runs.register(t);
      this.offRuns = this.runs.on((e) => this.broadcast(e));
      this.workspaceError = null;
    } catch (e) {
      if (!(e instanceof WorkspaceError)) throw e;
      this.workspaceError = e.message;
    }
  }

  /** Add or replace a method's handler (later areas plug in: sandbox, playground). */
  on(method: Method, h: Handler): void {
    this.handlers.set(method, h);
  }

  connect(client: Client): () => void {
    this.clients.add(client);
    // A (re)connecting client gets the current state.
    client.send({ event: 'engine', data: this.info() });
    if (this.runs) client.send({ event: 'queue', data: this.runs.queueState() });
    return () => this.clients.delete(client);
  }

  broadcast(e: RunEvent | { event: string; data: unknown }): void {
    for (const c of this.clients) c.send(e);
  }

  info() {
    return { version: '0.1.0', home: this.opts.home, workspaceError: this.workspaceError, pid: process.pid };
  }

  async handle(client: Client, raw: unknown): Promise<void> {
    let msg = raw;
    if (typeof raw === 'string') {
      try {
        msg = JSON.parse(raw);
      } catch {
        client.send({ id: null, error: { message: 'malformed message: not JSON', code: 'bad_request' } });
        return;
      }
    }
    const req = requestSchema.safeParse(msg);
    if (!req.success) {
      const id = (msg as { id?: unknown })?.id;
      client.send({ id: typeof id === 'number' ? id : null, error: { message: `malformed message: ${req.error.issues.map((i) => `${i.path.join('.') || 'message'}: ${i.message}`).join('; ')}`, code: 'bad_request' } });
      return;
    }
    const { id, method, params } = req.data;
    const reply = (result: unknown) => client.send({ id, result: result ?? null });
    const fail = (error: ProtocolError) => client.send({ id, error });
    if (!isMethod(method)) return fail({ message: `unknown method "${method}"`, code: 'unknown_method' });
    const p = methods[method].safeParse(params);
    if (!p.success) return fail({ message: `invalid params for ${method}: ${p.error.issues.map((i) => `${i.path.join('.') || 'params'}: ${i.message}`).join('; ')}`, code: 'bad_params' });
    if (this.workspaceError && !['engine.info', 'workspace.open'].includes(method)) {
      return fail({ message: `${this.workspaceError}`, code: 'workspace', details: { offer: 'workspace.open' } });
    }
    const h = this.handlers.get(method);
    if (!h) return fail({ message: `${method} is not available in this engine`, code: 'unavailable' });
    try {
      reply(await h(p.data ?? {}, client));
    } catch (e) {
      fail({ message: e instanceof Error ? e.message : String(e), code: 'failed' });
    }
  }

  private registerCore(): void {
    const S = () => this.store!;
    const R = () => this.runs!;
    this.on('engine.info', () => this.info());
    this.on('workspace.open', (p: { path: string }) => {
      this.openWorkspace(p.path);
      if (this.workspaceError) throw new Error(this.workspaceError);
      return this.info();
    });
    this.on('templates.list', () => R().listTemplates());
    this.on('runs.list', (p) => S().listRuns(p).map(runSummary));
    this.on('runs.get', (p: { id: string }) => {
      const r = S().getRun(p.id);
      return { ...runSummary(r), config: r.config, parentId: r.parentId ?? undefined, notes: r.notes, checkpoints: S().checkpoints(r.id) };
    });
    this.on('runs.start', (p) => ({ id: R().start(p) }));
    this.on('runs.stop', async (p: { id: string }) => { await R().stop(p.id); });
    this.on('runs.pause', (p: { id: string }) => R().pause(p.id));
    this.on('runs.resume', (p: { id: string }) => R().resume(p.id));
    this.on('runs.fork', (p: { id: string; config?: Record<string, unknown>; name?: string }) => ({ id: R().fork(p.id, p) }));
    this.on('runs.delete', async (p: { id: string }) => {
      if (R().queueState().running === p.id) await R().stop(p.id);
      S().deleteRun(p.id);
    });
    this.on('runs.log', (p: { runId: string; afterSeq?: number }) => S().logs(p.runId, p.afterSeq ?? 0));
    this.on('runs.diff', (p: { ids: string[] }) => S().configDiff(p.ids));
    this.on('metrics.series', (p: { runId: string; keys?: string[]; maxPoints?: number }) => {
      R().writer.flush();
      const keys = p.keys ?? S().metricKeys(p.runId);
      return Object.fromEntries(keys.map((k) => [k, S().metricSeries(p.runId, k, p.maxPoints ?? 1500)]));
    });
    this.on('trajectories.steps', (p: { runId: string }) => S().trajectorySteps(p.runId));
    this.on('trajectories.list', (p) => S().searchTrajectories(p));
    this.on('trajectories.get', (p: { id: string }) => S().getTrajectory(p.id));
    this.on('trajectories.group', (p: { runId: string; step: number; group: number }) => S().group(p.runId, p.step, p.group));
    this.on('checkpoints.list', (p: { runId?: string }) => S().checkpoints(p.runId));
    const envDir = join(this.opts.home, 'workspace');
    const safePath = (p: string) => {
      const full = normalize(join(envDir, p));
      if (!full.startsWith(envDir + sep) || !/^(tools|rewards|envs)\//.test(relative(envDir, full))) {
        throw new Error(`path "${p}" must be inside tools/, rewards/ or envs/ of the workspace`);
      }
      return full;
    };
    this.on('env.files', () => {
      const out: { path: string; kind: string }[] = [];
      for (const kind of ['tools', 'rewards', 'envs']) {
        const d = join(envDir, kind);
        if (!existsSync(d)) continue;
        for (const f of readdirSync(d)) if (statSync(join(d, f)).isFile()) out.push({ path: `${kind}/${f}`, kind: kind === 'tools' ? 'tool' : kind === 'rewards' ? 'reward' : 'env' });
      }
      return out;
    });
    this.on('env.read', (p: { path: string }) => {
      const f = safePath(p.path);
      if (!existsSync(f)) throw new Error(`no file "${p.path}" in the workspace`);
      return readFileSync(f, 'utf8');
    });
    this.on('env.write', (p: { path: string; text: string }) => {
      const f = safePath(p.path);
      mkdirSync(dirname(f), { recursive: true });
      writeFileSync(f, p.text);
    });
  }

  close(): void {
    this.offRuns?.();
    this.runs?.writer.flush();
    this.db?.close();
  }
}

function runSummary(r: ReturnType<Store['getRun']>) {
  return { id: r.id, name: r.name, status: r.status, template: r.template ?? undefined, tags: r.tags, createdAt: r.createdAt * 1000, step: r.step, metrics: r.metrics, error: r.error ?? undefined };
}
