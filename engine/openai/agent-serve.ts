/**
 * `environment.agent.mode: serve`: a long-lived agent program. The command runs once per worker
 * (`workers`, default 1) for the whole run and is handed episodes, one JSON line each on its stdin:
 *   {"id": "<episode>", "task": {…the task row…}, "base_url": "http://127.0.0.1:<port>/episodes/<id>/v1", "api_key": "sk-arbor-…"}
 * and answers each with one JSON line on its stdout:
 *   {"id": "<episode>", "answer": "…"}   or   {"id": "<episode>", "error": "…"} (reward 0)
 * Other stdout lines are the program's own (kept in its output tail). Episodes go to the worker
 * with the fewest in flight; the program runs them concurrently itself (async, threads). An
 * episode past `timeout_ms` scores 0 and its base URL is closed (its further calls get 404); the
 * worker goes on. A worker that exits fails the episodes it held (reward 0, its stderr tail in the
 * run log) and is started again for the next episode: the run goes on.
 *
 * Why stdin/stdout and not an HTTP endpoint the program listens on: nothing to bind or choose a
 * port for, no server library in the program (Python's stdlib reads lines; the helper is five
 * lines in either language), a crash is seen as the pipe closing, and Arbor's endpoint is already
 * the HTTP side. Handing an episode over costs one pipe write, against the episode's several model
 * calls over HTTP (docs/areas/openai.md, "Long-lived agents").
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { EnvTask } from '../env/task';
import type { ExperimentConfig } from '../config/experiment';

export type AgentSpec = NonNullable<ExperimentConfig['environment']['agent']>;

export interface AgentRun {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** The answer: the last non-empty stdout line (mode process) or the {id, answer} reply (mode serve). */
  answer?: string;
  stdout: string;
  stderr: string;
  /** Why the episode failed before it could answer: the command could not start, its worker died, its handler threw. */
  error?: string;
}

/** Most bytes of a worker's stderr / stray stdout kept (the end of it). */
const KEEP = 64 * 1024;
const tail = (s: string) => (s.length > KEEP ? s.slice(s.length - KEEP) : s);

/** Environment variables an agent never inherits from Arbor's own (keys and the engine's settings). */
const PRIVATE = /^(ARBOR_API_KEY|ARBOR_ENGINE|ARBOR_TOKEN|OPENAI_.*)$/;

/** An agent program's environment: Arbor's own minus its keys and engine settings, plus the spec's `env` and `vars`. */
export function agentEnv(spec: AgentSpec, vars: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !PRIVATE.test(k)) env[k] = v;
  return Object.assign(env, spec.env, vars);
}

export interface ServedEpisode {
  id: string;
  task: EnvTask;
  baseUrl: string;
  apiKey: string;
}

interface Pending {
  resolve(r: AgentRun): void;
  timer: NodeJS.Timeout;
  /** The worker's stderr length when the episode was handed (its share of the tail). */
  stderrAt: number;
}

class Worker {
  readonly child: ChildProcess;
  readonly pending = new Map<string, Pending>();
  stderr = '';
  stdout = '';
  /** Bytes of stderr ever written (stderrAt offsets are against this). */
  stderrTotal = 0;
  exited = false;
  startError?: string;

  constructor(
    readonly index: number,
    spec: AgentSpec,
    apiKey: string,
    private readonly onExit: (w: Worker, how: string) => void,
  ) {
    this.child = spawn(spec.command[0]!, spec.command.slice(1), {
      cwd: spec.cwd,
      env: agentEnv(spec, { OPENAI_API_KEY: apiKey, ARBOR_AGENT_MODE: 'serve', ARBOR_AGENT_WORKER: String(index) }),
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: process.platform !== 'win32',
    });
    this.child.stdin!.on('error', () => {
      // EPIPE after the program exited: its 'close' fails the episodes.
    });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.stderrTotal += d.length;
      this.stderr = tail(this.stderr + d);
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => this.onLine(line));
    this.child.on('error', (e) => {
      this.startError = `cannot start ${JSON.stringify(spec.command[0])}: ${e.message}`;
      this.end(this.startError);
    });
    this.child.on('close', (code, sig) => this.end(`exited with ${code === null ? `signal ${sig}` : `code ${code}`}`));
  }

  private onLine(line: string): void {
    let msg: unknown;
    const t = line.trim();
    if (t.startsWith('{')) {
      try {
        msg = JSON.parse(t);
      } catch {
        msg = undefined;
      }
    }
    const m = msg as { id?: unknown; answer?: unknown; error?: unknown } | undefined;
    const p = m && typeof m.id === 'string' ? this.pending.get(m.id) : undefined;
    if (!m || !p) {
      this.stdout = tail(`${this.stdout}${line}\n`);
      return;
    }
    const id = m.id as string;
    if (m.error !== undefined && m.error !== null)
      return this.settle(id, { exitCode: 1, error: `the program answered episode ${id} with an error: ${String(m.error)}` });
    if (m.answer !== undefined && m.answer !== null && typeof m.answer !== 'string')
      return this.settle(id, { exitCode: 1, error: `the program's answer to episode ${id} is not a string: ${JSON.stringify(m.answer).slice(0, 200)}` });
    const answer = typeof m.answer === 'string' ? m.answer.trim() : '';
    this.settle(id, { exitCode: 0, ...(answer ? { answer } : {}) });
  }

  settle(id: string, r: { exitCode: number | null; answer?: string; error?: string; timedOut?: boolean; signal?: NodeJS.Signals | null }): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    const since = Math.max(0, this.stderr.length - (this.stderrTotal - p.stderrAt));
    p.resolve({
      exitCode: r.exitCode,
      signal: r.signal ?? null,
      timedOut: r.timedOut ?? false,
      stdout: '',
      stderr: this.stderr.slice(since),
      ...(r.answer !== undefined ? { answer: r.answer } : {}),
      ...(r.error ? { error: r.error } : {}),
    });
  }

  send(ep: ServedEpisode, timeoutMs: number, resolve: (r: AgentRun) => void): void {
    const timer = setTimeout(() => this.settle(ep.id, { exitCode: null, timedOut: true }), timeoutMs);
    this.pending.set(ep.id, { resolve, timer, stderrAt: this.stderrTotal });
    if (this.exited) return this.settle(ep.id, { exitCode: null, error: this.startError ?? 'the agent worker is not running' });
    this.child.stdin!.write(`${JSON.stringify({ id: ep.id, task: ep.task, base_url: ep.baseUrl, api_key: ep.apiKey })}\n`);
  }

  private end(how: string): void {
    if (this.exited) return;
    this.exited = true;
    const held = [...this.pending.keys()];
    for (const id of held)
      this.settle(id, {
        exitCode: this.child.exitCode ?? null,
        signal: this.child.signalCode,
        error: `agent worker ${this.index} ${how} with this episode in flight`,
      });
    this.kill();
    this.onExit(this, `${how}${held.length ? `; ${held.length} episode(s) it held failed` : ''}`);
  }

  kill(): void {
    const pid = this.child.pid;
    if (pid === undefined) return;
    try {
      if (process.platform !== 'win32') process.kill(-pid, 'SIGKILL');
      else this.child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

/** The run's long-lived agent workers. */
export class AgentWorkers {
  private workers: (Worker | undefined)[];
  private closed = false;
  /** Workers started (restarts included). */
  started = 0;

  constructor(
    private readonly spec: AgentSpec,
    private readonly apiKey: string,
    private readonly log: (line: string) => void,
  ) {
    this.workers = Array.from({ length: spec.workers ?? 1 }, () => undefined);
  }

  private worker(i: number): Worker {
    let w = this.workers[i];
    if (!w || w.exited) {
      if (w) this.log(`agent: worker ${i} restarted`);
      w = new Worker(i, this.spec, this.apiKey, (dead, how) => {
        if (!this.closed)
          this.log(`agent: worker ${dead.index} ${how}${dead.stderr.trim() ? `\n  stderr: ${dead.stderr.trim().slice(-2000).replace(/\n/g, '\n  ')}` : ''}`);
      });
      this.workers[i] = w;
      this.started++;
    }
    return w;
  }

  /** Hand one episode to the least busy worker (a dead one is started again); resolves with its answer or failure. */
  run(ep: ServedEpisode, signal?: AbortSignal): Promise<AgentRun> {
    if (this.closed) throw new Error('agent workers are closed');
    let best = 0;
    for (let i = 1; i < this.workers.length; i++) if ((this.workers[i]?.pending.size ?? 0) < (this.workers[best]?.pending.size ?? 0)) best = i;
    const w = this.worker(best);
    return new Promise<AgentRun>((resolve) => {
      const onAbort = () => w.settle(ep.id, { exitCode: null, error: 'rollout aborted' });
      signal?.addEventListener('abort', onAbort, { once: true });
      w.send(ep, this.spec.timeout_ms, (r) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(r);
      });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.workers) {
      if (!w || w.exited) continue;
      w.child.stdin!.end();
      w.kill();
    }
  }
}
