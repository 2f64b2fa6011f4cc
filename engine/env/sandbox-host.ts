/**
 * A user environment's tools and reward, loaded once into a sandbox process for a whole run (the
 * editor's one-shot "try it", ./sandbox.ts, opens one for a single call). The TypeScript files are
 * compiled with esbuild (source maps kept here); the sandbox (./sandbox-child.ts) is a separate
 * Node process under Node's permission model (no child processes, workers, addons or file writes;
 * file reads only under the workspace and its own two files), with no environment variables, a
 * heap cap, and on Linux a network namespace of its own (no network) when the system allows
 * unprivileged ones; inside it the user's code runs in QuickJS compiled to WebAssembly
 * (./sandbox-quickjs.ts), an engine whose heap holds no host object. A workspace with a symbolic
 * link that leaves it is refused before anything starts (the permission model follows links). The host
 * exposes the tools as ordinary `Tool`s, so a task's `runCall` validates the model's arguments
 * (ajv) and applies its own timeout exactly as for built-in tools; a call that overruns the
 * sandbox limit, or a sandbox that runs out of memory or dies, gets the process replaced (the
 * next call starts a fresh one). A throwing tool or reward reports `path:line:column` in the
 * user's TypeScript. Everything the sandbox sends back is treated as untrusted data.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, lstatSync, mkdtempSync, readdirSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { RawSourceMap } from 'source-map-js';
import type { EpisodeSummary } from './rewards';
import { compile, DEFAULT_SANDBOX_LIMITS, locate, mapStack, type SandboxLimits } from './sandbox-compile';
import type { HostFatal, HostFile, HostHello, HostInit, HostReply, HostRequest, HostStarted, HostToolSpec, SandboxEngine } from './sandbox-child';
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

const ENTRY = fileURLToPath(new URL('./sandbox-entry.ts', import.meta.url));

/** Console lines a host keeps between takeLogs() calls (older ones are counted in a note). */
const MAX_HOST_LOGS = 10_000;

/**
 * The sandbox's two files, written once per engine process to a private folder (0700) of its own:
 * the bundled child (./sandbox-entry.ts and its imports) and the QuickJS wasm. The child is
 * started from the file (not `node -e`) and may read this folder and the workspace, nothing else.
 */
let files: Promise<{ dir: string; entry: string; wasm: string }> | undefined;
export function sandboxFiles(): Promise<{ dir: string; entry: string; wasm: string }> {
  files ??= build({ entryPoints: [ENTRY], bundle: true, platform: 'node', format: 'esm', target: 'node22', write: false, logLevel: 'silent' }).then((r) => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-sandbox-'));
    chmodSync(dir, 0o700);
    const entry = join(dir, 'sandbox.mjs');
    const wasm = join(dir, 'quickjs.wasm');
    writeFileSync(entry, r.outputFiles[0]!.contents, { mode: 0o400 });
    const variantMain = createRequire(import.meta.url).resolve('@jitl/quickjs-wasmfile-release-sync');
    copyFileSync(join(dirname(variantMain), 'emscripten-module.wasm'), wasm);
    chmodSync(wasm, 0o400);
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    return { dir: realpathSync(dir), entry: join(realpathSync(dir), 'sandbox.mjs'), wasm: join(realpathSync(dir), 'quickjs.wasm') };
  });
  return files;
}

/** Entries the link check looks at before it gives up (a workspace is a folder of tools and data, not a disk). */
const MAX_WORKSPACE_ENTRIES = 200_000;

/**
 * Why a workspace folder cannot be lent to the sandbox: a symbolic link in it that leads outside
 * it (Node's permission model follows links under an allowed folder, so one would widen what the
 * sandbox may read), named with where it leads; null when there is none.
 */
export function workspaceLinkProblem(root: string): string | null {
  let base: string;
  try {
    base = realpathSync(root);
  } catch {
    return null;
  }
  const inside = (p: string) => {
    const rel = relative(base, p);
    return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
  };
  const stack = [base];
  let seen = 0;
  while (stack.length) {
    const dir = stack.pop()!;
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      if (++seen > MAX_WORKSPACE_ENTRIES)
        return `the environment folder ${root} has more than ${MAX_WORKSPACE_ENTRIES} entries; Arbor checks every one for links that leave it, so give a smaller workspace`;
      const full = join(dir, name);
      let st;
      try {
        st = lstatSync(full);
      } catch {
        continue;
      }
      if (st.isSymbolicLink()) {
        let target: string;
        try {
          target = realpathSync(full);
        } catch {
          // A dangling link: where it would lead once its target exists.
          target = resolve(dirname(full), readlinkSync(full));
        }
        if (!inside(target))
          return `the environment folder ${root} holds a link that leaves it: ${relative(base, full)} -> ${readlinkSync(full)} (${target}); the sandbox would read through it, so Arbor refuses the folder (remove the link or copy its target into the folder)`;
      } else if (st.isDirectory()) stack.push(full);
    }
  }
  return null;
}

/** `unshare -rn` (a user and network namespace: no network at all), when this system allows it; checked once. */
let unshareBin: string | null | undefined;
function networkJail(): string | null {
  if (unshareBin !== undefined) return unshareBin;
  unshareBin = null;
  if (process.platform !== 'linux' || process.env.ARBOR_SANDBOX_NO_NETNS === '1') return null;
  const bin = ['/usr/bin/unshare', '/bin/unshare'].find((b) => existsSync(b));
  if (bin && spawnSync(bin, ['-rn', '--', process.execPath, '-e', '0'], { stdio: 'ignore', timeout: 10_000 }).status === 0) unshareBin = bin;
  return unshareBin;
}

/** How the sandbox process is started: the command, its arguments (ending with the entry file) and its (empty) environment. */
export function sandboxCommand(
  limits: SandboxLimits,
  workspace: string | undefined,
  sandbox: { dir: string; entry: string },
  engine: SandboxEngine = 'quickjs',
): { command: string; args: string[]; env: Record<string, string>; network: 'none' | 'host' } {
  const permission = process.allowedNodeEnvironmentFlags.has('--permission') ? '--permission' : '--experimental-permission';
  const read: string[] = [`--allow-fs-read=${sandbox.dir}`];
  if (workspace && existsSync(workspace)) read.push(`--allow-fs-read=${realpathSync(workspace)}`);
  // With QuickJS the V8 heap holds this process's own code, messages and the files a tool reads
  // (the guest's heap is wasm memory under its own limit); with vm contexts it is the user's heap.
  const heap = engine === 'quickjs' ? limits.memoryMb + 64 : limits.memoryMb;
  // QuickJS's wasm is compiled when the process starts, not function by function during a tool's first call (its time limit).
  const wasm = engine === 'quickjs' ? ['--no-wasm-lazy-compilation'] : [];
  const node = [
    permission,
    ...read,
    `--max-old-space-size=${heap}`,
    '--max-semi-space-size=8',
    ...wasm,
    '--disable-warning=ExperimentalWarning',
    sandbox.entry,
  ];
  // Electron's binary runs as plain Node with ELECTRON_RUN_AS_NODE.
  const env: Record<string, string> = process.versions.electron ? { ELECTRON_RUN_AS_NODE: '1' } : {};
  const jail = networkJail();
  return jail
    ? { command: jail, args: ['-rn', '--', process.execPath, ...node], env, network: 'none' }
    : { command: process.execPath, args: node, env, network: 'host' };
}

/** An error from user code, located in the user's TypeScript. */
export class SandboxError extends Error {
  /** The message as user code threw it (without the location prefix). */
  readonly detail: string;
  /** The user code's stack with its frames in TypeScript positions, when there was one. */
  userStack?: string;
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
    this.detail = message;
  }
}

/** A running sandbox process and its outgoing batch. */
interface Proc {
  child: ChildProcess;
  outbox: HostRequest[];
  /** The last lines it wrote to stderr (an out-of-memory report, a crash). */
  stderr: string;
  dead: boolean;
}

export class SandboxHost {
  /** The environment's tools, by name, usable with runCall. */
  readonly tools = new Map<string, Tool>();
  /** Sandbox processes replaced after a time-limit overrun or a crash. */
  restarts = 0;
  /** Console output of user code since the last takeLogs(). */
  private logs: string[] = [];
  private droppedLogs = 0;
  private toolPaths = new Map<string, string>();
  /** Tool name → the name it is exported under (the editor's "try it" picks by either). */
  readonly exportNames = new Map<string, string>();
  private proc?: Proc;
  private starting?: Promise<HostHello>;
  private pending = new Map<number, { resolve: (r: HostReply) => void; reject: (e: Error) => void; started: () => void }>();
  private nextId = 1;
  private closed = false;
  /** ctx.episode objects → the id their state has in the sandbox; freed there when the object is collected. */
  private episodeIds = new WeakMap<object, number>();
  private nextEpisode = 1;
  private episodeGone = new FinalizationRegistry<number>((episode) => {
    if (this.proc && !this.closed) this.send(this.proc, { id: 0, op: 'endEpisode', episode });
  });

  private constructor(
    private readonly files: HostFile[],
    private readonly maps: Map<string, RawSourceMap>,
    private readonly limits: SandboxLimits,
    readonly rewardPath?: string,
    private readonly workspace?: string,
    readonly engine: SandboxEngine = 'quickjs',
  ) {}

  /** Compile and load the files; throws SandboxError (with the line) if one does not compile or load. */
  /** `workspace`: the folder the tools may read with ctx.readFile (the only folder the sandbox process may read). */
  /** `engine`: 'quickjs' (the default: the boundary), or 'process' (`environment.sandbox: process`: V8 vm contexts in the sandbox process, code consented like a plugin's). */
  static async open(
    env: { tools?: SourceFile[]; reward?: SourceFile },
    limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS,
    workspace?: string,
    opts: { engine?: SandboxEngine } = {},
  ): Promise<SandboxHost> {
    if (workspace) {
      const problem = workspaceLinkProblem(workspace);
      if (problem) throw new Error(problem);
    }
    const files: HostFile[] = [];
    const maps = new Map<string, RawSourceMap>();
    const all = [...(env.tools ?? []).map((f) => ({ ...f, kind: 'tool' as const })), ...(env.reward ? [{ ...env.reward, kind: 'reward' as const }] : [])];
    for (const f of all) {
      const c = await compile(f.source, f.path);
      if ('error' in c) throw new SandboxError(c.error!.message, f.path, c.error!.line, c.error!.column);
      files.push({ path: f.path, code: c.code, kind: f.kind });
      maps.set(f.path, c.map);
    }
    const host = new SandboxHost(files, maps, limits, env.reward?.path, workspace, opts.engine ?? 'quickjs');
    let hello: HostHello;
    try {
      hello = await host.start();
    } catch (e) {
      await host.close();
      throw e;
    }
    if (!hello || typeof hello !== 'object' || (!('loadError' in hello) && !Array.isArray(hello.tools))) {
      await host.close();
      throw new Error(`the sandbox answered its start with something else (${env.tools?.map((f) => f.path).join(', ') ?? env.reward?.path})`);
    }
    if ('loadError' in hello) {
      await host.close();
      throw host.located(hello.loadError);
    }
    for (const spec of hello.tools) {
      host.exportNames.set(String(spec.name), String(spec.exportName));
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
    const out = this.logs.splice(0);
    if (this.droppedLogs) out.unshift(`…[${this.droppedLogs} earlier log lines dropped: a sandbox keeps the last ${MAX_HOST_LOGS}]`);
    this.droppedLogs = 0;
    return out;
  }

  /** Keep a reply's console lines (one by one: a spread of a long list overflows the stack), the last MAX_HOST_LOGS of them. */
  private keepLogs(lines: unknown[]): void {
    for (const l of lines) this.logs.push(String(l));
    if (this.logs.length > MAX_HOST_LOGS) this.droppedLogs += this.logs.splice(0, this.logs.length - MAX_HOST_LOGS).length;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.fail(new Error('the sandbox was closed'));
    const p = this.proc;
    this.proc = undefined;
    if (p) await this.kill(p);
  }

  private toolFor(spec: HostToolSpec): Tool {
    return {
      name: spec.name,
      description: spec.description,
      parameters: spec.parameters,
      execute: async (args, ctx): Promise<ToolResult> => {
        const r = (await this.request({ op: 'tool', name: spec.name, args, episode: this.episodeId(ctx?.episode) }, ctx?.signal)) as ToolResult | null;
        return { content: String(r?.content ?? ''), success: r?.success !== false, metadata: plainRecord(r?.metadata) };
      },
    };
  }

  /** The sandbox-side id of an episode's shared state (one per ctx.episode object). */
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
    const path = String(e?.path ?? '');
    const map = this.maps.get(path);
    const stack = typeof e?.stack === 'string' ? e.stack : undefined;
    const where = map ? locate(stack, path, map) : {};
    const err = new SandboxError(String(e?.message ?? 'failed'), path, where.line, where.column);
    if (map && stack) err.userStack = mapStack(stack, path, map);
    return err;
  }

  /** Queue a request; the queue goes out as one message at the end of this turn. */
  private send(p: Proc, req: HostRequest): void {
    if (p.dead) return;
    if (p.outbox.length === 0)
      queueMicrotask(() => {
        const batch = p.outbox;
        p.outbox = [];
        if (!p.dead && p.child.connected) p.child.send(batch);
      });
    p.outbox.push(req);
  }

  private async kill(p: Proc): Promise<void> {
    p.dead = true;
    if (p.child.exitCode !== null || p.child.signalCode !== null) return;
    const gone = new Promise<void>((r) => p.child.once('exit', () => r()));
    p.child.kill('SIGKILL');
    await gone;
  }

  private start(): Promise<HostHello> {
    const files = this.files.map((f) => f.path).join(', ');
    this.starting = sandboxFiles().then(
      (sandbox) =>
        new Promise<HostHello>((resolve, reject) => {
          if (this.closed) return reject(new Error('the sandbox was closed'));
          const cmd = sandboxCommand(this.limits, this.workspace, sandbox, this.engine);
          const child = spawn(cmd.command, cmd.args, { env: cmd.env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'], serialization: 'json' });
          const p: Proc = { child, outbox: [], stderr: '', dead: false };
          this.proc = p;
          child.stdout?.resume();
          child.stderr?.on('data', (d: Buffer) => {
            p.stderr = (p.stderr + String(d)).slice(-4000);
          });
          // Starting takes well under a second; a generous limit for a busy machine.
          const timer = setTimeout(() => {
            reject(new Error(`the sandbox did not start within 60 s (${files})`));
            this.drop(p, new Error(`the sandbox did not start within 60 s (${files})`));
          }, 60_000);
          let hello = false;
          child.on('message', (m: unknown) => {
            if (!hello) {
              hello = true;
              clearTimeout(timer);
              resolve(m as HostHello);
              return;
            }
            if (!Array.isArray(m)) return;
            for (const r of m as (HostReply | HostStarted | HostFatal)[]) {
              if (!r || typeof r !== 'object' || typeof r.id !== 'number') continue;
              if ('fatal' in r) {
                this.drop(p, new Error(String(r.fatal).slice(0, 2000)));
                continue;
              }
              if ('started' in r) {
                this.pending.get(r.id)?.started();
                continue;
              }
              if (Array.isArray(r.logs)) this.keepLogs(r.logs);
              const q = this.pending.get(r.id);
              if (!q) continue;
              this.pending.delete(r.id);
              q.resolve(r);
            }
          });
          child.once('error', (e) => {
            clearTimeout(timer);
            const err = new Error(`the sandbox could not start: ${e.message}`);
            reject(err);
            this.drop(p, err);
          });
          child.once('exit', (code, signal) => {
            clearTimeout(timer);
            const oom = /heap out of memory|Reached heap limit/i.test(p.stderr);
            const err = new Error(
              oom
                ? `exceeded the sandbox memory limit (${this.limits.memoryMb} MB)`
                : `the sandbox exited (${signal ?? `code ${code}`})${p.stderr.trim() && !p.dead ? `: ${p.stderr.trim().split('\n').slice(-3).join(' | ')}` : ''}`,
            );
            reject(err);
            this.drop(p, err);
          });
          const init: HostInit = {
            files: this.files,
            callTimeoutMs: this.limits.timeoutMs,
            memoryMb: this.limits.memoryMb,
            workspace: this.workspace && existsSync(this.workspace) ? realpathSync(this.workspace) : this.workspace,
            engine: this.engine,
            wasmPath: sandbox.wasm,
          };
          child.send({ init });
        }),
    );
    return this.starting;
  }

  /** Forget a dead or stuck sandbox; pending calls fail with `err`; the next call starts a new one. */
  private drop(p: Proc, err: Error): void {
    if (this.proc !== p) return;
    this.proc = undefined;
    this.starting = undefined;
    void this.kill(p);
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
    // One start at a time: concurrent calls after a restart wait for the same process.
    if (!this.starting) this.start();
    const hello = await this.starting!;
    if (!hello || typeof hello !== 'object') throw new Error('the sandbox answered its start with something else');
    if ('loadError' in hello) throw this.located(hello.loadError);
    const p = this.proc;
    if (!p) throw new Error('the sandbox stopped before the call');
    const id = this.nextId++;
    const path = req.op === 'tool' ? (this.toolPaths.get(req.name) ?? '') : (this.rewardPath ?? '');
    const reply = await new Promise<HostReply>((resolve, reject) => {
      // The sandbox bounds synchronous loops itself (vm timeout); an overrun after an await is
      // only stopped by replacing the process. The call's limit runs from when the sandbox starts
      // it (many episodes' calls may queue on one busy sandbox); before that, a generous bound.
      let timer = setTimeout(
        () =>
          this.drop(p, new Error(`${path}: the sandbox did not start this call within ${QUEUE_LIMIT_MS / 1000} s (busy or stuck); the sandbox was restarted`)),
        QUEUE_LIMIT_MS,
      );
      this.pending.set(id, {
        resolve: (r) => (clearTimeout(timer), resolve(r)),
        reject: (e) => (clearTimeout(timer), reject(e)),
        started: () => {
          clearTimeout(timer);
          timer = setTimeout(
            () => this.drop(p, new Error(`${path}: timed out after ${this.limits.timeoutMs} ms (an endless loop?); the sandbox was restarted`)),
            // QuickJS stops the call itself (interrupt handler, call timer) and answers; this is the backstop.
            this.limits.timeoutMs + (this.engine === 'quickjs' ? 2000 : 250),
          );
        },
      });
      this.send(p, { ...req, id } as HostRequest);
      // The call's ctx.signal aborts inside the sandbox too (the tool's abort listeners run there).
      signal?.addEventListener(
        'abort',
        () => this.send(p, { id, op: 'abort', reason: String((signal.reason as Error | undefined)?.message ?? signal.reason ?? 'aborted') }),
        { once: true },
      );
    });
    if (!reply.ok) throw this.located(reply.error);
    return reply.value;
  }
}

/** Metadata from the sandbox, kept only when it is a plain object. */
function plainRecord(x: unknown): Record<string, unknown> | undefined {
  return x && typeof x === 'object' && !Array.isArray(x) ? (x as Record<string, unknown>) : undefined;
}
