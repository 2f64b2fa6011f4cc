/**
 * A user environment's tools and reward, loaded once into a sandbox worker for a whole run
 * (the one-shot "try it" path is ./sandbox.ts). The TypeScript files are compiled with esbuild
 * (source maps kept); the worker (./sandbox-host-worker.ts) runs each in its own vm context with
 * a heap cap. The host exposes the tools as ordinary `Tool`s, so a task's `runCall` validates
 * the model's arguments (ajv) and applies its own timeout exactly as for built-in tools; a call
 * that overruns the sandbox limit, or a worker that runs out of memory, gets the worker
 * replaced (the next call starts a fresh one). A throwing tool or reward reports
 * `path:line:column` in the user's TypeScript.
 */
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import type { RawSourceMap } from 'source-map-js';
import type { EpisodeSummary } from './rewards';
import { compile, DEFAULT_SANDBOX_LIMITS, locate, type SandboxLimits } from './sandbox';
import type { HostFile, HostHello, HostReply, HostRequest, HostStarted, HostToolSpec } from './sandbox-host-worker';
import type { Tool, ToolResult } from './tool';

/** How long a call may wait in the worker's queue before it starts (its own limit starts then). */
const QUEUE_LIMIT_MS = 120_000;

export interface SourceFile {
  /** Workspace path, shown in errors. */
  path: string;
  source: string;
}

export interface UserReward {
  reward: number;
  components?: Record<string, number>;
}

const WORKER = fileURLToPath(new URL('./sandbox-host-worker.ts', import.meta.url));
const BOOTSTRAP = new URL('../worker-bootstrap.mjs', import.meta.url);

/** An error from user code, located in the user's TypeScript. */
export class SandboxError extends Error {
  constructor(
    message: string,
    readonly path: string,
    readonly line?: number,
    readonly column?: number,
  ) {
    super(
      line
        ? `${path}:${line}:${column ?? 1}: ${message.startsWith(`${path}: `) ? message.slice(path.length + 2) : message}`
        : message.startsWith(path)
          ? message
          : `${path}: ${message}`,
    );
    this.name = 'SandboxError';
  }
}

export class SandboxHost {
  /** The environment's tools, by name, usable with runCall. */
  readonly tools = new Map<string, Tool>();
  /** Workers replaced after a time-limit overrun or a crash. */
  restarts = 0;
  /** Console output of user code since the last takeLogs(). */
  private logs: string[] = [];
  private toolPaths = new Map<string, string>();
  private worker?: Worker;
  private starting?: Promise<HostHello>;
  private pending = new Map<number, { resolve: (r: HostReply) => void; reject: (e: Error) => void; started: () => void }>();
  private nextId = 1;
  private closed = false;
  /** ctx.episode objects → the id their state has in the worker; freed there when the object is collected. */
  private episodeIds = new WeakMap<object, number>();
  private nextEpisode = 1;
  private episodeGone = new FinalizationRegistry<number>((episode) => {
    if (this.worker && !this.closed) this.worker.postMessage({ id: 0, op: 'endEpisode', episode } as HostRequest);
  });

  private constructor(
    private readonly files: HostFile[],
    private readonly maps: Map<string, RawSourceMap>,
    private readonly limits: SandboxLimits,
    readonly rewardPath?: string,
    private readonly workspace?: string,
  ) {}

  /** Compile and load the files; throws SandboxError (with the line) if one does not compile or load. */
  /** `workspace`: the folder the tools may read with ctx.readFile. */
  static async open(
    env: { tools?: SourceFile[]; reward?: SourceFile },
    limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS,
    workspace?: string,
  ): Promise<SandboxHost> {
    const files: HostFile[] = [];
    const maps = new Map<string, RawSourceMap>();
    const all = [...(env.tools ?? []).map((f) => ({ ...f, kind: 'tool' as const })), ...(env.reward ? [{ ...env.reward, kind: 'reward' as const }] : [])];
    for (const f of all) {
      const c = await compile(f.source, f.path);
      if ('error' in c) throw new SandboxError(c.error!.message, f.path, c.error!.line, c.error!.column);
      files.push({ path: f.path, code: c.code, kind: f.kind });
      maps.set(f.path, c.map);
    }
    const host = new SandboxHost(files, maps, limits, env.reward?.path, workspace);
    const hello = await host.start();
    if ('loadError' in hello) {
      await host.close();
      throw host.located(hello.loadError);
    }
    for (const spec of hello.tools) {
      host.tools.set(spec.name, host.toolFor(spec));
      host.toolPaths.set(spec.name, spec.path);
    }
    return host;
  }

  /** Score an episode with the user's reward file. */
  async reward(summary: EpisodeSummary): Promise<UserReward & { steps?: number[] }> {
    if (!this.rewardPath) throw new Error('this environment has no reward file');
    return (await this.request({ op: 'reward', summary })) as UserReward;
  }

  /** The file that defines a tool. */
  toolPath(name: string): string | undefined {
    return this.toolPaths.get(name);
  }

  takeLogs(): string[] {
    return this.logs.splice(0);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.fail(new Error('the sandbox was closed'));
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }

  private toolFor(spec: HostToolSpec): Tool {
    return {
      name: spec.name,
      description: spec.description,
      parameters: spec.parameters,
      execute: async (args, ctx): Promise<ToolResult> => {
        const r = (await this.request({ op: 'tool', name: spec.name, args, episode: this.episodeId(ctx?.episode) }, ctx?.signal)) as ToolResult;
        return { content: String(r.content ?? ''), success: r.success !== false, metadata: r.metadata };
      },
    };
  }

  /** The worker-side id of an episode's shared state (one per ctx.episode object). */
  private episodeId(episode: object | undefined): number {
    if (!episode) return 0;
    let id = this.episodeIds.get(episode);
    if (id === undefined) {
      id = this.nextEpisode++;
      this.episodeIds.set(episode, id);
      this.episodeGone.register(episode, id);
    }
    return id;
  }

  private located(e: { message: string; stack?: string; path: string }): SandboxError {
    const map = this.maps.get(e.path);
    const where = map ? locate(e.stack, e.path, map) : {};
    return new SandboxError(e.message, e.path, where.line, where.column);
  }

  private start(): Promise<HostHello> {
    const worker = new Worker(BOOTSTRAP, {
      workerData: { __module: WORKER, files: this.files, callTimeoutMs: this.limits.timeoutMs, workspace: this.workspace },
      resourceLimits: { maxOldGenerationSizeMb: this.limits.memoryMb, maxYoungGenerationSizeMb: 16 },
      stdout: true,
      stderr: true,
    });
    this.worker = worker;
    this.starting = new Promise<HostHello>((resolve, reject) => {
      // Loading tsx and the modules may take seconds on a busy machine: a generous start limit.
      const timer = setTimeout(() => {
        void worker.terminate();
        reject(new Error(`the sandbox did not start within 60 s (${this.files.map((f) => f.path).join(', ')})`));
      }, 60_000);
      worker.once('message', (m: HostHello) => {
        clearTimeout(timer);
        resolve(m);
        worker.on('message', (r: HostReply | HostStarted) => {
          if ('started' in r) {
            this.pending.get(r.id)?.started();
            return;
          }
          this.logs.push(...r.logs);
          const p = this.pending.get(r.id);
          if (!p) return;
          this.pending.delete(r.id);
          p.resolve(r);
        });
      });
      worker.once('error', (e: Error & { code?: string }) => {
        clearTimeout(timer);
        const err = new Error(e.code === 'ERR_WORKER_OUT_OF_MEMORY' ? `exceeded the sandbox memory limit (${this.limits.memoryMb} MB)` : e.message);
        reject(err);
        this.drop(worker, err);
      });
      worker.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`the sandbox exited (code ${code})`));
        this.drop(worker, new Error(`the sandbox exited (code ${code})`));
      });
    });
    return this.starting;
  }

  /** Forget a dead or stuck worker; pending calls fail with `err`; the next call starts a new one. */
  private drop(worker: Worker, err: Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    this.starting = undefined;
    void worker.terminate();
    this.fail(err);
    if (!this.closed) this.restarts++;
  }

  private fail(err: Error): void {
    const ps = [...this.pending.values()];
    this.pending.clear();
    for (const p of ps) p.reject(err);
  }

  private async request(
    req: { op: 'tool'; name: string; args: unknown; episode: number } | { op: 'reward'; summary: unknown },
    signal?: AbortSignal,
  ): Promise<unknown> {
    if (this.closed) throw new Error('the sandbox was closed');
    if (!this.worker) this.start();
    const hello = await this.starting!;
    if ('loadError' in hello) throw this.located(hello.loadError);
    const worker = this.worker!;
    const id = this.nextId++;
    const path = req.op === 'tool' ? (this.toolPaths.get(req.name) ?? '') : (this.rewardPath ?? '');
    const reply = await new Promise<HostReply>((resolve, reject) => {
      // The worker bounds synchronous loops itself (vm timeout); an overrun after an await is
      // only stopped by replacing the worker. The call's limit runs from when the worker starts
      // it (many episodes' calls may queue on one busy worker); before that, a generous bound.
      let timer = setTimeout(
        () =>
          this.drop(
            worker,
            new Error(`${path}: the sandbox did not start this call within ${QUEUE_LIMIT_MS / 1000} s (busy or stuck); the sandbox was restarted`),
          ),
        QUEUE_LIMIT_MS,
      );
      this.pending.set(id, {
        resolve: (r) => (clearTimeout(timer), resolve(r)),
        reject: (e) => (clearTimeout(timer), reject(e)),
        started: () => {
          clearTimeout(timer);
          timer = setTimeout(
            () => this.drop(worker, new Error(`${path}: timed out after ${this.limits.timeoutMs} ms (an endless loop?); the sandbox was restarted`)),
            this.limits.timeoutMs + 250,
          );
        },
      });
      worker.postMessage({ ...req, id } as HostRequest);
      // The call's ctx.signal aborts inside the sandbox too (the tool's abort listeners run there).
      signal?.addEventListener(
        'abort',
        () =>
          worker.postMessage({ id, op: 'abort', reason: String((signal.reason as Error | undefined)?.message ?? signal.reason ?? 'aborted') } as HostRequest),
        { once: true },
      );
    });
    if (!reply.ok) throw this.located(reply.error);
    return reply.value;
  }
}
