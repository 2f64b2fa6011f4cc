/**
 * The engine server: validates every message against the protocol (protocol.ts), dispatches
 * to handlers, and pushes run events to every connected client. Transport-agnostic: a client
 * is anything with `send(message)`; transports (WebSocket, MessagePort, stdio) feed
 * `handle(client, raw)`. A bad message gets an error reply; the server keeps serving.
 * Handlers are typed by the protocol: each returns its method's result type.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import type { z } from 'zod';
import { approveTyped } from '../env/consent';
import { openDatabase, WorkspaceError, type DB } from '../store/db';
import { exportMetricsCsv, exportTrajectoriesJsonl, importVerlDump } from '../store/io';
import { Store } from '../store/store';
import { getGroup, groupRuns, listGroups } from '../store/groups';
import { buildGroupReport, compareGroups } from '../stats/group-report';
import { bandSeries } from '../stats/stats';
import { FLAG_KEYS, flaggedSteps, seriesWarnings } from '../train/diagnostics';
import { DEGENERATION_KEYS, degenerations } from '../train/degeneration';
import { heldOutTable, phaseTimes, STORY_KEYS } from '../train/run-story';
import { api, describeIssues, isMethod, requestSchema, type EventMessage, type Method, type ProtocolError, type Result, type Trajectory } from './protocol';
import { RunManager, runSummary, type RunTemplate } from './runs';
import { isSftWarmStart, SFT_WARM_START_TAG } from '../run/store-sink';
import { workspaceFiles } from './workspace-files';

export interface Client {
  send(message: unknown): void;
}

/** A method's handler: its validated params in, its result out. */
export type Handler<M extends Method> = (params: NonNullable<z.output<(typeof api)[M]['params']>>, client: Client) => Result<M> | Promise<Result<M>>;

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

export class EngineServer {
  private db: DB | null = null;
  store: Store | null = null;
  runs: RunManager | null = null;
  workspaceError: string | null = null;
  private clients = new Set<Client>();
  private handlers = new Map<string, Handler<any>>();
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

  /** Add or replace a method's handler (later areas plug in: sandbox, playground). */
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

  private registerCore(): void {
    const S = () => this.store!;
    const R = () => this.runs!;
    this.on('engine.info', () => this.info());
    this.on('workspace.open', (p) => {
      this.openWorkspace(p.path);
      if (this.workspaceError) throw new Error(this.workspaceError);
      this.broadcast({ event: 'engine', data: this.info() });
      return this.info();
    });
    this.on('templates.list', () => R().listTemplates());
    this.on('runs.list', (p) => S().listRuns(p).map(runSummary));
    this.on('projects.list', () => S().projects());
    this.on('runs.get', (p) => {
      const r = S().getRun(p.id);
      return {
        ...runSummary(r),
        config: r.config,
        seed: r.seed,
        notes: r.notes,
        checkpoints: S().checkpoints(r.id),
        trajectorySteps: S().trajectorySteps(r.id),
      };
    });
    this.on('runs.start', (p) => ({ id: R().start(p) }));
    this.on('runs.stop', async (p) => {
      await R().stop(p.id);
      return null;
    });
    this.on('runs.pause', (p) => {
      R().pause(p.id);
      return null;
    });
    this.on('runs.resume', (p) => {
      R().resume(p.id);
      return null;
    });
    this.on('runs.fork', (p) => ({ id: R().fork(p.id, p) }));
    this.on('runs.delete', async (p) => {
      if (R().queueState().running === p.id) await R().stop(p.id);
      S().deleteRun(p.id);
      return null;
    });
    this.on('runs.setNotes', (p) => {
      S().setNotes(p.id, p.notes);
      R().announce(p.id);
      return null;
    });
    this.on('runs.setTags', (p) => {
      S().setTags(p.id, p.tags);
      R().announce(p.id);
      return null;
    });
    this.on('runs.log', (p) => S().logs(p.runId, p.afterSeq ?? 0));
    this.on('runs.diff', (p) => S().configDiff(p.ids));
    this.on('runs.export', (p) => {
      R().writer.flush();
      S().getRun(p.id);
      if (p.prefix && !isAbsolute(p.prefix))
        throw new Error(`runs.export: prefix must be an absolute path (the engine's working directory is not the caller's), got "${p.prefix}"`);
      const prefix = p.prefix ?? join(this.opts.home, 'exports', p.id);
      mkdirSync(dirname(prefix), { recursive: true });
      const format = p.format ?? 'both';
      const files: Result<'runs.export'>['files'] = [];
      if (format !== 'jsonl') files.push({ kind: 'metrics', path: `${prefix}.metrics.csv`, count: exportMetricsCsv(S(), p.id, `${prefix}.metrics.csv`) });
      if (format !== 'csv')
        files.push({
          kind: 'trajectories',
          path: `${prefix}.trajectories.jsonl`,
          count: exportTrajectoriesJsonl(S(), p.id, `${prefix}.trajectories.jsonl`, (done, total) =>
            this.broadcast({ event: 'export', data: { runId: p.id, done, total } }),
          ),
        });
      return { files };
    });
    this.on('runs.importVerl', async (p) => {
      let decode: ((ids: number[]) => string) | undefined;
      if (p.tokenizer) {
        const { HfTokenizer } = await import('../model/tokenizer');
        const tok = HfTokenizer.load(p.tokenizer);
        decode = (ids) => tok.decode(ids);
      }
      const r = await importVerlDump(S(), p.dir, {
        name: p.name,
        decode,
        onProgress: (file, samples, filesDone, filesTotal) => this.broadcast({ event: 'import', data: { dir: p.dir, file, samples, filesDone, filesTotal } }),
      });
      R().announce(r.runId);
      return r;
    });
    this.on('metrics.series', (p) => {
      R().writer.flush();
      const keys = p.keys ?? S().metricKeys(p.runId);
      return Object.fromEntries(keys.map((k) => [k, S().metricSeries(p.runId, k, p.maxPoints ?? 1500)]));
    });
    this.on('runs.learning', (p) => {
      R().writer.flush();
      const run = S().getRun(p.id);
      const storyKeys = S()
        .metricKeys(p.id)
        .filter((k) => k.startsWith('eval/') || k.startsWith('sft/eval/'));
      const series = Object.fromEntries(
        [...FLAG_KEYS, ...DEGENERATION_KEYS, ...STORY_KEYS, ...storyKeys, 'dynamic_sampling/dropped_groups'].map((k) => [k, S().metricSeries(p.id, k, 20000)]),
      );
      // An SFT warm start recorded as its own run (the parent): its time is this run's "sft" phase.
      const parent = run.parentId
        ? S()
            .listRuns({ tag: SFT_WARM_START_TAG })
            .find((r) => r.id === run.parentId)
        : undefined;
      if (parent && isSftWarmStart(parent) && !series['sft/time_s']?.step.length) series['sft/time_s'] = S().metricSeries(parent.id, 'sft/time_s', 20000);
      const bestMetric = (run.config as { checkpoint?: { best_metric?: string } }).checkpoint?.best_metric;
      const dropped = series['dynamic_sampling/dropped_groups']!;
      const stored = new Set(S().trajectorySteps(p.id));
      return {
        steps: series['learn/zero_variance_groups']!.step.length,
        flagged: flaggedSteps(series),
        warnings: seriesWarnings(series),
        degeneration: degenerations(series),
        heldOut: heldOutTable(series, bestMetric),
        phaseTimes: phaseTimes(series),
        droppedSteps: dropped.step.map((step, i) => ({ step, dropped: dropped.value[i] ?? 0 })).filter((d) => d.dropped > 0 && stored.has(d.step)) as {
          step: number;
          dropped: number;
        }[],
      };
    });
    this.on('groups.list', () => listGroups(S()).map(({ plan, runs, ...g }) => ({ ...g, planned: plan.length, runs })));
    const report = (id: string, metrics?: string[]) => {
      R().writer.flush();
      const g = getGroup(S(), id);
      return buildGroupReport(g, groupRuns(S(), g.id), { metrics });
    };
    this.on('groups.report', (p) => report(p.id, p.metrics));
    this.on('groups.compare', (p) => compareGroups(report(p.a, p.metrics), report(p.b, p.metrics)));
    this.on('groups.series', (p) => {
      R().writer.flush();
      const g = getGroup(S(), p.id);
      const runs = groupRuns(S(), g.id);
      const out: Record<string, Record<string, ReturnType<typeof bandSeries>>> = {};
      for (const cell of [...new Set(runs.map((r) => r.cell))]) {
        const mine = runs.filter((r) => r.cell === cell);
        const keys = p.keys ?? [...new Set(mine.flatMap((r) => S().metricKeys(r.id)))];
        out[cell] = Object.fromEntries(keys.map((k) => [k, bandSeries(mine.map((r) => S().metricSeries(r.id, k, p.maxPoints ?? 1500)))]));
      }
      return out;
    });
    this.on('trajectories.steps', (p) => S().trajectorySteps(p.runId));
    this.on('trajectories.list', (p) => S().searchTrajectories(p));
    this.on('trajectories.get', (p) => S().getTrajectory(p.id) as Trajectory);
    this.on('trajectories.group', (p) => S().group(p.runId, p.step, p.group));
    this.on('checkpoints.list', (p) => S().checkpoints(p.runId));
    const envDir = join(this.opts.home, 'workspace');
    const files = workspaceFiles(envDir);
    this.on('env.files', () => {
      const out: Result<'env.files'> = [];
      for (const kind of ['tools', 'rewards', 'envs']) {
        const d = join(envDir, kind);
        if (!existsSync(d)) continue;
        for (const f of readdirSync(d)) {
          let st;
          try {
            st = lstatSync(join(d, f));
          } catch {
            continue;
          }
          // a symlink is listed only when it stays inside the workspace (env.read refuses the others)
          if (st.isSymbolicLink() && !files.inside(join(d, f))) continue;
          if (!statSync(join(d, f), { throwIfNoEntry: false })?.isFile()) continue;
          out.push({ path: `${kind}/${f}`, kind: kind === 'tools' ? ('tool' as const) : kind === 'rewards' ? ('reward' as const) : ('env' as const) });
        }
      }
      return out;
    });
    this.on('env.read', (p) => files.read(p.path));
    this.on('env.write', (p) => {
      files.write(p.path, p.text);
      // Typed (or pasted) in the workbench's editor by the user: approved as theirs (engine/env/consent.ts).
      approveTyped(join(envDir, p.path), p.text);
      return null;
    });
  }

  close(): void {
    this.offRuns?.();
    this.runs?.close();
    this.runs?.writer.flush();
    this.db?.close();
  }
}
