/**
 * The sandbox process (started by ./sandbox-host.ts): a separate Node process, run under Node's
 * permission model (`--permission`: no child processes, no worker threads, no native addons, no
 * WASI, no file writes, file reads only under the environment's workspace and the sandbox's own
 * two files), on Linux in a network namespace of its own when the system allows one (no network
 * at all). This file is bundled by esbuild (entry ./sandbox-entry.ts) into a file the host
 * writes to a private folder of its own and starts (not `node -e`).
 *
 * User code runs in QuickJS compiled to WebAssembly (./sandbox-quickjs.ts): a JavaScript engine
 * whose heap holds no object of this process, so the only ways out are the three host calls the
 * guest is given (log a line, read a workspace file, finish a call). With
 * `environment.sandbox: process` (code consented like a plugin: compute-heavy tools) it runs in
 * vm contexts of this process instead (./sandbox-context.ts; V8-fast, and not a boundary).
 *
 * Either way, before any user code loads, the process takes away what an escape could reach: the
 * `process` global, fetch and WebSocket, and every further module import (a resolve hook
 * refuses all of them).
 *
 * Messages are batched both ways: arrays of requests in, arrays of replies out, flushed once per
 * turn of the event loop.
 */
import { readFileSync } from 'node:fs';
import * as nodeModule from 'node:module';
import {
  callRewardInContext,
  callToolInContext,
  capLogs,
  endEpisodeInContext,
  loadSandboxModule,
  rewardExport,
  rewardFromJson,
  toolExports,
  type SandboxModule,
} from './sandbox-context';
import { GuestError, loadQuickJs, QuickJsEngine } from './sandbox-quickjs';

export interface HostFile {
  path: string;
  code: string;
  kind: 'tool' | 'reward';
}

export interface HostToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  path: string;
  exportName: string;
}

/** Which engine runs the user's code: QuickJS in wasm (the boundary), or V8 vm contexts (`environment.sandbox: process`). */
export type SandboxEngine = 'quickjs' | 'process';

export interface HostInit {
  files: HostFile[];
  callTimeoutMs: number;
  memoryMb: number;
  workspace?: string;
  engine: SandboxEngine;
  /** The QuickJS wasm file (in the sandbox's private folder; read before user code loads). */
  wasmPath?: string;
}

export type HostRequest =
  | { id: number; op: 'tool'; name: string; args: unknown; episode: number }
  | { id: number; op: 'reward'; summary: unknown }
  /** The call `id`'s ctx.signal aborts (its timeout passed, or the episode was cancelled). */
  | { id: number; op: 'abort'; reason: string }
  /** An episode ended: forget its ctx.episode state. */
  | { id: number; op: 'endEpisode'; episode: number };
export type HostReply =
  | { id: number; ok: true; value: unknown; logs: string[] }
  | { id: number; ok: false; error: { message: string; stack?: string; path: string }; logs: string[] };
/** Sent when the sandbox begins a call: the host's per-call timer runs from here, not from the send (a call queued behind others' is not late). */
export type HostStarted = { id: number; started: true };
/** The engine cannot go on (sent after the replies it failed): the host replaces the process before sending it more. */
export type HostFatal = { id: -1; fatal: string };
export type HostHello = { ready: true; tools: HostToolSpec[]; reward?: string } | { loadError: { message: string; stack?: string; path: string } };

/** Take away what escaped code could use, keeping only the IPC functions this file needs. */
function lockDown(log: (line: string) => void): { send: (m: unknown) => void; onMessage: (f: (m: unknown) => void) => void; exit: (code: number) => void } {
  const proc = process;
  const exit = (code: number) => proc.exit(code);
  const send = (m: unknown) => void proc.send?.(m);
  const onMessage = (f: (m: unknown) => void) => void proc.on('message', f);
  // A rejection nobody handled or an error thrown from a timer (user code's, or one an attempt
  // provoked in this realm) is a line in the console output, not the end of the process.
  const describe = (e: unknown) => String((e as Error | undefined)?.message ?? e);
  proc.on('unhandledRejection', (e) => log(`unhandled rejection: ${describe(e)}`));
  proc.on('uncaughtException', (e) => log(`uncaught: ${describe(e)}`));
  // Every module this process needs is loaded (one bundle, static imports): refuse all others,
  // `import()` from code built with the main realm's Function included.
  // (module.registerHooks: Node 22.15 and later; without it the permission model and the network
  // namespace are the barrier for a module an escape imports.)
  const hooks = (nodeModule as { registerHooks?: (h: { resolve: (specifier: string) => never }) => unknown }).registerHooks;
  hooks?.({
    resolve(specifier) {
      throw new Error(`the sandbox loads no modules (import of "${specifier}" refused)`);
    },
  });
  const g = globalThis as Record<string, unknown>;
  for (const name of ['process', 'fetch', 'WebSocket', 'EventSource', 'Request', 'Response', 'Headers', 'FormData', 'navigator', 'Buffer', 'require'])
    delete g[name];
  // Node internals hold their own reference to `process`; the ones below would still be reachable
  // through it by code that found it, so they go too (no signals to other processes, no reports).
  const p = proc as unknown as Record<string, unknown>;
  for (const name of ['kill', 'getBuiltinModule', 'binding', '_linkedBinding', 'dlopen', 'report', 'mainModule'])
    try {
      delete p[name];
    } catch {
      /* not configurable: the permission model still refuses it */
    }
  return { send, onMessage, exit };
}

/** What the process does with the user's files, whichever engine runs them. */
interface ChildEngine {
  hello(): HostHello;
  /** Run a call; its value (plain data) or a thrown error. */
  run(req: Extract<HostRequest, { op: 'tool' | 'reward' }>): Promise<unknown>;
  abort(id: number, reason: string): void;
  endEpisode(episode: number): void;
  /** Console output since the last take (capped, with a note). */
  takeLogs(req?: Extract<HostRequest, { op: 'tool' | 'reward' }>): string[];
  pathOf(req: Extract<HostRequest, { op: 'tool' | 'reward' }>): string;
}

const errorOf = (e: unknown, path: string) => {
  if (e instanceof GuestError) return { message: e.message, stack: e.guestStack, path: e.path || path };
  const err = e && typeof e === 'object' && 'message' in e ? (e as Error) : new Error(String(e));
  return { message: String(err.message), stack: err.stack ? String(err.stack) : undefined, path };
};

function quickJsEngine(qjs: Awaited<ReturnType<typeof loadQuickJs>>, init: HostInit, fatal: (message: string) => void): ChildEngine {
  const engine = new QuickJsEngine(qjs, { timeoutMs: init.callTimeoutMs, memoryMb: init.memoryMb }, init.workspace, fatal);
  const paths = new Map<string, string>();
  const rewardPath = init.files.find((f) => f.kind === 'reward')?.path;
  return {
    hello() {
      try {
        const { tools } = engine.load(init.files);
        for (const t of tools) paths.set(t.name, t.path);
        return { ready: true, tools, reward: rewardPath };
      } catch (e) {
        return { loadError: errorOf(e, (e as GuestError)?.path ?? '') };
      }
    },
    async run(req) {
      if (req.op === 'tool') return JSON.parse(await engine.callTool(req.id, req.name, req.args, req.episode)) as unknown;
      return rewardFromJson(await engine.callReward(req.id, req.summary), rewardPath ?? '');
    },
    abort: (id, reason) => engine.abort(id, reason),
    endEpisode: (episode) => engine.endEpisode(episode),
    takeLogs: () => engine.takeLogs(),
    pathOf: (req) => (req.op === 'tool' ? (paths.get(req.name) ?? '') : (rewardPath ?? '')),
  };
}

function processEngine(init: HostInit, stray: string[]): ChildEngine {
  const { files, callTimeoutMs, workspace } = init;
  const aborts = new Map<number, AbortController>();
  const tools = new Map<string, { m: SandboxModule; exportName: string; path: string }>();
  let reward: { m: SandboxModule; path: string } | undefined;
  const target = (req: Extract<HostRequest, { op: 'tool' | 'reward' }>) => (req.op === 'tool' ? tools.get(req.name) : reward);
  return {
    hello() {
      let loading = '';
      try {
        const specs: HostToolSpec[] = [];
        for (const f of files) {
          loading = f.path;
          const m = loadSandboxModule(f.code, f.path, callTimeoutMs, workspace);
          if (f.kind === 'reward') {
            rewardExport(m, f.path);
            reward = { m, path: f.path };
            continue;
          }
          const found = toolExports(m);
          if (found.length === 0) throw new Error(`${f.path}: exports no tool (an object with name, description, parameters and execute)`);
          for (const [exportName, t] of found) {
            const name = String(t.name);
            if (tools.has(name)) throw new Error(`${f.path}: a tool named "${name}" is already defined in ${tools.get(name)!.path}`);
            tools.set(name, { m, exportName, path: f.path });
            specs.push({
              name,
              description: String(t.description ?? ''),
              parameters: JSON.parse(JSON.stringify(t.parameters ?? { type: 'object' })) as Record<string, unknown>,
              path: f.path,
              exportName,
            });
          }
        }
        return { ready: true, tools: specs, reward: reward?.path };
      } catch (e) {
        return { loadError: errorOf(e, loading) };
      }
    },
    async run(req) {
      if (req.op === 'tool') {
        const t = tools.get(req.name);
        if (!t) throw new Error(`no sandboxed tool named "${req.name}"`);
        const ac = new AbortController();
        aborts.set(req.id, ac);
        try {
          return await callToolInContext(t.m, t.exportName, req.args, callTimeoutMs, t.path, { episode: req.episode, signal: ac.signal });
        } finally {
          aborts.delete(req.id);
        }
      }
      if (!reward) throw new Error('this environment has no reward file');
      return callRewardInContext(reward.m, reward.path, req.summary, callTimeoutMs);
    },
    abort: (id, reason) => aborts.get(id)?.abort(reason),
    endEpisode: (episode) => {
      for (const m of new Set([...tools.values()].map((t) => t.m))) endEpisodeInContext(m, episode);
    },
    takeLogs: (req) => capLogs([...stray.splice(0), ...(req && target(req) ? target(req)!.m.takeLogs() : [])]),
    pathOf: (req) => target(req)?.path ?? '',
  };
}

export async function main(init: HostInit): Promise<void> {
  const stray: string[] = [];
  // The engine is loaded while this process can still read its own files; then it locks down.
  const qjs = init.engine === 'quickjs' ? await loadQuickJs(new Uint8Array(readFileSync(init.wasmPath!)).buffer, init.memoryMb) : undefined;
  const { send, onMessage, exit } = lockDown((line) => {
    if (stray.length < 100) stray.push(line);
  });
  // The engine failed on the host side: answer what is pending (the failed calls' replies go out
  // first), then leave; the host starts a fresh sandbox for the next call.
  const fatal = (message: string) => {
    stray.push(message);
    // After the replies of the calls it failed (posted from microtasks), in the same message.
    setImmediate(() => post({ id: -1, fatal: message }));
    setTimeout(() => exit(4), 200);
  };
  const engine = qjs ? quickJsEngine(qjs, init, fatal) : processEngine(init, stray);
  let outbox: (HostReply | HostStarted | HostFatal)[] = [];
  let flushing = false;
  const flush = () => {
    flushing = false;
    if (outbox.length === 0) return;
    const batch = outbox;
    outbox = [];
    send(batch);
  };
  const post = (m: HostReply | HostStarted | HostFatal) => {
    outbox.push(m);
    if (!flushing) {
      flushing = true;
      setImmediate(flush);
    }
  };
  send(engine.hello());

  const start = (req: Extract<HostRequest, { op: 'tool' | 'reward' }>) => {
    const logs = () => (qjs ? capLogs([...stray.splice(0), ...engine.takeLogs(req)]) : engine.takeLogs(req));
    let run: Promise<unknown>;
    try {
      run = engine.run(req);
    } catch (e) {
      run = Promise.reject(e as Error);
    }
    run.then(
      (value) => post({ id: req.id, ok: true, value, logs: logs() }),
      (e: unknown) => post({ id: req.id, ok: false, error: errorOf(e, engine.pathOf(req)), logs: logs() }),
    );
  };
  // A batch's calls start in order, each announced just before its synchronous part runs (the
  // announcement is written to the channel at once, with any replies ready), so the host times
  // each call from its start, and its backstop holds even when that part never returns to the
  // event loop: QuickJS does not interrupt a builtin's own loop (one sort() of a million long strings).
  onMessage((batch) => {
    if (!Array.isArray(batch)) return;
    for (const req of batch as HostRequest[]) {
      if (!req || typeof req !== 'object') continue;
      if (req.op === 'abort') engine.abort(req.id, String(req.reason));
      else if (req.op === 'endEpisode') engine.endEpisode(Number(req.episode));
      else if (req.op === 'tool' || req.op === 'reward') {
        outbox.push({ id: req.id, started: true });
        flush();
        start(req);
      }
    }
    flush();
  });
}
