/**
 * Run manager: run templates (a config JSON schema + a job factory), a queue that keeps one
 * training job on the device at a time (others wait with their position reported), and live
 * events (metrics, trajectories, logs, checkpoints, status) pushed to every listener.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { BatchWriter, HEARTBEAT_MS, type RunRow, type Store, type TrajectoryRecord } from '../store/store';
import type { EventMessage, RunSummary } from './protocol';
import { isSftWarmStart, openSftRun } from '../run/store-sink';
import type { SftRunPort } from '../run/runner';

/** What a running job may do. */
export interface JobContext {
  runId: string;
  runDir: string;
  config: Record<string, unknown>;
  /** Aborted on stop. The job should finish its step, save, and return. */
  signal: AbortSignal;
  /** Resolves immediately unless the run is paused; call between steps. */
  checkpointPause(): Promise<void>;
  /** Whether this start resumes an earlier run (after stop, crash or pause). */
  resume: boolean;
  metric(step: number, values: Record<string, number>): void;
  /** `full: false` stores summaries only (the run's trajectory retention setting). */
  trajectories(step: number, ts: TrajectoryRecord[], opts?: { full?: boolean }): void;
  log(text: string, level?: 'info' | 'warn' | 'error'): void;
  checkpoint(step: number, path: string, metrics?: Record<string, number>): void;
  /** Drop rows after `step` (a resume from the checkpoint at `step`). */
  truncateAfter(step: number): void;
  /** Record the job's SFT warm start as its own run, this run's parent (engine/run/store-sink.ts openSftRun); live in the workbench. */
  sftRun?(o: { dir: string; resume: boolean }): SftRunPort | undefined;
}

export interface RunTemplate {
  id: string;
  name: string;
  description?: string;
  /** JSON schema of the config (the UI generates its form from it). */
  schema: Record<string, unknown>;
  /** A ready-to-run config. */
  example?: Record<string, unknown>;
  /** Validate a config; throw an Error naming the field. */
  validate?(config: Record<string, unknown>): void;
  /**
   * Run the job. It may return whether a stop cut it short; without that, a stop requested
   * while it ran counts as stopped (even if it landed after the last step).
   */
  run(ctx: JobContext): Promise<void | { stopped: boolean }>;
  /** The job that resumes runs the CLI recorded (tag "cli"), in their own run folder; not offered by the launch form. */
  resumesCliRuns?: boolean;
}

/** What the run manager pushes (protocol events; the server broadcasts them). */
export type RunEvent = Extract<EventMessage, { event: 'run' | 'metrics' | 'log' | 'trajectories' | 'checkpoint' | 'queue' }>;

interface Active {
  runId: string;
  abort: AbortController;
  paused: boolean;
  resumeWaiters: (() => void)[];
  done: Promise<void>;
}

export class RunManager {
  private templates = new Map<string, RunTemplate>();
  private cliJob: RunTemplate | undefined;
  private queue: { runId: string; resume: boolean }[] = [];
  private active: Active | null = null;
  private listeners = new Set<(e: RunEvent) => void>();
  readonly writer: BatchWriter;
  private beat: NodeJS.Timeout;

  constructor(
    readonly store: Store,
    readonly home: string,
    opts: { recover?: boolean } = {},
  ) {
    this.writer = new BatchWriter(store, { intervalMs: 150 });
    // This engine owns the runs it queues and runs; its heartbeat tells other processes so.
    this.beat = setInterval(() => {
      try {
        store.heartbeat();
        // A run whose owner died while this engine runs (a CLI training killed with -9) becomes
        // interrupted, resumable, and the workbench hears of it.
        for (const id of store.recoverOrphans()) this.emitRun(id);
      } catch {
        // the database was closed under us (workspace switch); the next open starts a new manager
      }
    }, HEARTBEAT_MS);
    this.beat.unref();
    // Runs left live by a process that is gone become interrupted (resumable); runs another live
    // process (a CLI training, another engine) owns are left alone.
    if (opts.recover !== false) store.recoverOrphans();
  }

  /** Stop the heartbeat (the engine closes the workspace). */
  close(): void {
    clearInterval(this.beat);
  }

  register(t: RunTemplate): void {
    if (t.resumesCliRuns) this.cliJob = t;
    else this.templates.set(t.id, t);
  }

  listTemplates() {
    return [...this.templates.values()].map((t) => ({ id: t.id, name: t.name, description: t.description, schema: t.schema, example: t.example }));
  }

  on(l: (e: RunEvent) => void): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  private emit(e: RunEvent): void {
    for (const l of this.listeners) l(e);
  }

  private emitRun(runId: string): void {
    this.emit({ event: 'run', data: { run: runSummary(this.store.getRun(runId)) } });
  }

  /** Tell every client that a run changed outside a job (notes, tags, an import). */
  announce(runId: string): void {
    this.emitRun(runId);
  }

  private emitQueue(): void {
    this.emit({ event: 'queue', data: { queue: this.queue.map((q, i) => ({ runId: q.runId, position: i + 1 })), running: this.active?.runId ?? null } });
  }

  queueState() {
    return { queue: this.queue.map((q, i) => ({ runId: q.runId, position: i + 1 })), running: this.active?.runId ?? null };
  }

  start(req: { template: string; config: Record<string, unknown>; name?: string; tags?: string[]; parentId?: string; project?: string }): string {
    const t = this.templates.get(req.template);
    if (!t) throw new Error(`unknown template "${req.template}" (available: ${[...this.templates.keys()].join(', ')})`);
    t.validate?.(req.config);
    const seed = typeof req.config.seed === 'number' ? req.config.seed : undefined;
    const id = this.store.createRun({
      name: req.name ?? `${t.id}-${new Date().toISOString().slice(5, 19).replace(/[-:T]/g, '')}`,
      template: t.id,
      config: req.config,
      seed,
      tags: req.tags,
      parentId: req.parentId,
      project: req.project,
    });
    this.enqueue(id, false);
    return id;
  }

  fork(id: string, opts: { config?: Record<string, unknown>; name?: string } = {}): string {
    const r = this.store.getRun(id);
    return this.start({
      template: r.template ?? '',
      config: { ...r.config, ...(opts.config ?? {}) },
      name: opts.name ?? `${r.name}-fork`,
      tags: r.tags,
      parentId: id,
      project: r.project ?? undefined,
    });
  }

  private enqueue(runId: string, resume: boolean): void {
    // Refused (naming the owner) when another live process writes this run.
    this.store.claimRun(runId);
    this.queue.push({ runId, resume });
    this.store.setStatus(runId, 'queued');
    this.emitRun(runId);
    this.emitQueue();
    void this.pump();
  }

  resume(id: string): void {
    if (this.active?.runId === id && this.active.paused) {
      this.active.paused = false;
      for (const w of this.active.resumeWaiters.splice(0)) w();
      this.store.setStatus(id, 'running');
      this.emitRun(id);
      return;
    }
    this.store.recoverOrphans();
    const r = this.store.getRun(id);
    // An SFT warm start's run is trained by its RL run's job (a resume of that run continues a stopped SFT).
    if (isSftWarmStart(r)) {
      const child = this.store.listRuns().find((c) => c.parentId === id);
      throw new Error(`run "${id}" is the SFT warm start of ${child ? `run "${child.id}"` : 'an RL run'}: resume that run to continue it`);
    }
    const owner = this.store.runOwner(id);
    if (['running', 'queued', 'paused'].includes(r.status) && owner?.alive && owner.pid !== process.pid) this.store.claimRun(id); // throws, naming the owner
    if (['running', 'queued', 'paused'].includes(r.status)) throw new Error(`run "${id}" is already ${r.status}`);
    this.enqueue(id, true);
  }

  pause(id: string): void {
    if (this.active?.runId !== id) throw new Error(`run "${id}" is not running`);
    this.active.paused = true;
    this.store.setStatus(id, 'paused');
    this.emitRun(id);
  }

  async stop(id: string): Promise<void> {
    const qi = this.queue.findIndex((q) => q.runId === id);
    if (qi >= 0) {
      this.queue.splice(qi, 1);
      this.store.setStatus(id, 'stopped');
      this.store.releaseRun(id);
      this.emitRun(id);
      this.emitQueue();
      return;
    }
    if (this.active?.runId !== id) throw new Error(`run "${id}" is not running or queued`);
    const a = this.active;
    a.abort.abort();
    a.paused = false;
    for (const w of a.resumeWaiters.splice(0)) w();
    await a.done;
  }

  /** Wait until nothing is running or queued (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.active || this.queue.length) await (this.active?.done ?? new Promise((r) => setTimeout(r, 10)));
  }

  private async pump(): Promise<void> {
    if (this.active || this.queue.length === 0) return;
    const next = this.queue.shift()!;
    this.emitQueue();
    const run = this.store.getRun(next.runId);
    // A run `arbor train` recorded continues in its own folder, through the CLI resume job.
    const cliFolder = next.resume && run.tags.includes('cli') && this.cliJob ? this.store.runFolder(run.id) : undefined;
    const t = cliFolder ? this.cliJob : this.templates.get(run.template ?? '');
    const abort = new AbortController();
    const active: Active = { runId: run.id, abort, paused: false, resumeWaiters: [], done: Promise.resolve() };
    this.active = active;
    const runDir = cliFolder ?? join(this.home, 'runs', run.id);
    mkdirSync(runDir, { recursive: true });
    const store = this.store,
      writer = this.writer;
    const ctx: JobContext = {
      runId: run.id,
      runDir,
      config: run.config,
      signal: abort.signal,
      resume: next.resume,
      checkpointPause: () => (active.paused ? new Promise<void>((r) => active.resumeWaiters.push(r)) : Promise.resolve()),
      metric: (step, values) => {
        // Committed now with the step's queued trajectories, before the job writes the step's
        // checkpoint: a checkpoint on disk always has its step's rows.
        writer.metrics(run.id, step, values);
        writer.flush();
        this.emit({ event: 'metrics', data: { runId: run.id, step, values } });
      },
      trajectories: (step, ts, opts) => {
        // Queued, committed by the writer off the job's path (while the job awaits its
        // workers); the event goes out after the commit, so it never names unreadable rows.
        for (const t of ts) writer.trajectory(run.id, t, opts?.full);
        writer.afterCommit(() => this.emit({ event: 'trajectories', data: { runId: run.id, step, count: ts.length } }));
      },
      log: (text, level = 'info') => {
        writer.flush();
        const seq = store.log(run.id, level, text);
        this.emit({ event: 'log', data: { runId: run.id, line: { seq, time: Date.now() / 1000, level, text } } });
      },
      checkpoint: (step, path, metrics) => {
        writer.flush();
        const id = store.addCheckpoint(run.id, step, path, metrics);
        this.emit({
          event: 'checkpoint',
          data: { runId: run.id, checkpoint: { id, runId: run.id, step, path, createdAt: Date.now() / 1000, metrics: metrics ?? {} } },
        });
      },
      truncateAfter: (step) => {
        writer.flush();
        store.truncateAfter(run.id, step);
      },
      sftRun: (o) => {
        writer.flush();
        return openSftRun(store, run.id, {
          ...o,
          onMetrics: (id, step, values) => this.emit({ event: 'metrics', data: { runId: id, step, values } }),
          onChange: (id) => this.emitRun(id),
        });
      },
    };
    active.done = (async () => {
      store.setStatus(run.id, 'running');
      this.emitRun(run.id);
      try {
        if (!t) throw new Error(`template "${run.template}" is not available in this engine`);
        const r = await t.run(ctx);
        writer.flush();
        store.setStatus(run.id, (r ? r.stopped : abort.signal.aborted) ? 'stopped' : 'completed');
      } catch (e) {
        writer.flush();
        const msg = e instanceof Error ? e.message : String(e);
        store.log(run.id, 'error', msg);
        this.emit({ event: 'log', data: { runId: run.id, line: { seq: 0, time: Date.now() / 1000, level: 'error', text: msg } } });
        store.setStatus(run.id, abort.signal.aborted ? 'stopped' : 'failed', msg);
      } finally {
        store.releaseRun(run.id);
        this.active = null;
        this.emitRun(run.id);
        this.emitQueue();
        void this.pump();
      }
    })();
  }
}

/** A run as the protocol lists it (times in seconds, like every time on the wire). */
export function runSummary(r: RunRow): RunSummary {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    template: r.template ?? undefined,
    tags: r.tags,
    createdAt: r.createdAt,
    startedAt: r.startedAt,
    endedAt: r.endedAt,
    step: r.step,
    metrics: r.metrics,
    error: r.error ?? undefined,
    parentId: r.parentId ?? undefined,
    project: r.project ?? undefined,
    seed: r.seed ?? undefined,
    // The advantage estimator names the algorithm (grpo, rloo, gae = PPO, …) for the runs table.
    algorithm: isSftWarmStart(r)
      ? 'sft'
      : typeof (r.config.algorithm as { adv_estimator?: unknown } | undefined)?.adv_estimator === 'string'
        ? String((r.config.algorithm as { adv_estimator: string }).adv_estimator)
        : undefined,
  };
}
