/**
 * The engine server: validates every message against the protocol (protocol.ts), dispatches
 * to handlers, and pushes run events to every connected client. Transport-agnostic: a client
 * is anything with `send(message)`; transports (WebSocket, MessagePort, stdio) feed
 * `handle(client, raw)`. A bad message gets an error reply; the server keeps serving.
 * Handlers are typed by the protocol: each returns its method's result type. The server itself
 * answers engine.info and workspace.open; every other method is a feature's, added by its
 * `register<Feature>(engine)` (host.ts says what a feature sees): the workspace's own by
 * workspace.ts for every server, the rest by createEngine (engine.ts) or the CLI.
 */
import { dirname, join } from 'node:path';
import { openDatabase, WorkspaceError, type DB } from '../store/db';
import { Store } from '../store/store';
import { api, describeIssues, isMethod, requestSchema, type EventMessage, type Method, type ProtocolError, type Result } from './protocol';
import { RunManager, type RunTemplate } from './runs';
import type { Client, EngineHost, Handler } from './host';
import { registerWorkspace } from './workspace';

export interface EngineServerOptions {
  home: string;
  dbPath?: string;
  templates?: RunTemplate[];
  /**
   * Mark runs whose owning process is gone (a crashed engine or CLI training) `interrupted` when
   * the workspace opens (default true). Runs a live process owns are never touched, so this is
   * safe from any process.
   */
  recoverRuns?: boolean;
}

export class EngineServer implements EngineHost {
  private db: DB | null = null;
  store: Store | null = null;
  runs: RunManager | null = null;
  workspaceError: string | null = null;
  private clients = new Set<Client>();
  private handlers = new Map<string, Handler<any>>();
  private offRuns: (() => void) | null = null;
  private releases: (() => void)[] = [];

  constructor(readonly opts: EngineServerOptions) {
    this.openWorkspace(opts.dbPath ?? join(opts.home, 'arbor.db'));
    this.registerServerMethods();
    registerWorkspace(this);
  }

  /** Open a workspace database; on failure the engine stays up and reports the error. */
  openWorkspace(file: string): void {
    try {
      const db = openDatabase(file);
      this.offRuns?.();
      this.runs?.close();
      this.db?.close();
      this.db = db;
      this.store = new Store(db);
      this.runs = new RunManager(this.store, dirname(file), { recover: this.opts.recoverRuns ?? true });
      for (const t of this.opts.templates ?? []) this.runs.register(t);
      this.offRuns = this.runs.on((e) => this.broadcast(e));
      this.workspaceError = null;
    } catch (e) {
      if (!(e instanceof WorkspaceError)) throw e;
      this.workspaceError = e.message;
    }
  }

  /** Add or replace a method's handler (each feature's register<Feature> adds its methods). */
  on<M extends Method>(method: M, h: Handler<M>): void {
    this.handlers.set(method, h);
  }

  connect(client: Client): () => void {
    this.clients.add(client);
    // A (re)connecting client gets the current state.
    client.send({ event: 'engine', data: this.info() });
    if (this.runs) client.send({ event: 'queue', data: this.runs.queueState() });
    return () => this.clients.delete(client);
  }

  /** How many clients (workbench windows, CLI connections) are connected. */
  get clientCount(): number {
    return this.clients.size;
  }

  broadcast(e: EventMessage): void {
    for (const c of this.clients) c.send(e);
  }

  info(): Result<'engine.info'> {
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
      client.send({
        id: typeof id === 'number' ? id : null,
        error: { message: `malformed message: ${describeIssues(req.error, 'message')}`, code: 'bad_request' },
      });
      return;
    }
    const { id, method, params } = req.data;
    const reply = (result: unknown) => client.send({ id, result: result ?? null });
    const fail = (error: ProtocolError) => client.send({ id, error });
    if (!isMethod(method)) return fail({ message: `unknown method "${method}"`, code: 'unknown_method' });
    const p = api[method].params.safeParse(params);
    if (!p.success) return fail({ message: `invalid params for ${method}: ${describeIssues(p.error, 'params')}`, code: 'bad_params' });
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

  /** The server's own methods: what the engine is, and opening another workspace. */
  private registerServerMethods(): void {
    this.on('engine.info', () => this.info());
    this.on('workspace.open', (p) => {
      this.openWorkspace(p.path);
      if (this.workspaceError) throw new Error(this.workspaceError);
      this.broadcast({ event: 'engine', data: this.info() });
      return this.info();
    });
  }

  onClose(release: () => void): void {
    this.releases.push(release);
  }

  /** Release what the features hold (in the order they asked), then close the workspace. */
  close(): void {
    for (const release of this.releases.splice(0)) release();
    this.offRuns?.();
    this.runs?.close();
    this.runs?.writer.flush();
    this.db?.close();
  }
}
