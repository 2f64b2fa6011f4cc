/**
 * The sandbox process (started by ./sandbox-host.ts): a separate Node process, run under Node's
 * permission model (`--permission`: no child processes, no worker threads, no native addons, no
 * WASI, no file writes, file reads only under the environment's workspace), on Linux in a network
 * namespace of its own when the system allows one (no network at all). This file is bundled by
 * esbuild into one module the host hands over on the IPC channel (no file on disk to read).
 *
 * Before any user code loads, the process takes away what an escape from the vm contexts
 * (./sandbox-context.ts, kept for the timeouts, per-file scopes and the console, not for
 * security) could reach: the `process` global, fetch and WebSocket, and every further module
 * import (a resolve hook refuses all of them). What is left is JavaScript and this file's own
 * closures.
 *
 * Messages are batched both ways: arrays of requests in, arrays of replies out, flushed once per
 * turn of the event loop.
 */
import * as nodeModule from 'node:module';
import {
  callRewardInContext,
  callToolInContext,
  endEpisodeInContext,
  loadSandboxModule,
  rewardExport,
  toolExports,
  type SandboxModule,
} from './sandbox-context';

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

export interface HostInit {
  files: HostFile[];
  callTimeoutMs: number;
  workspace?: string;
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
export type HostHello = { ready: true; tools: HostToolSpec[]; reward?: string } | { loadError: { message: string; stack?: string; path: string } };

/** Take away what escaped code could use, keeping only the IPC functions this file needs. */
function lockDown(log: (line: string) => void): { send: (m: unknown) => void; onMessage: (f: (m: unknown) => void) => void } {
  const proc = process;
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
  return { send, onMessage };
}

export function main(init: HostInit): void {
  const stray: string[] = [];
  const { send, onMessage } = lockDown((line) => {
    if (stray.length < 100) stray.push(line);
  });
  const { files, callTimeoutMs, workspace } = init;
  const aborts = new Map<number, AbortController>();
  const errorOf = (e: unknown, path: string) => {
    const err = e && typeof e === 'object' && 'message' in e ? (e as Error) : new Error(String(e));
    return { message: String(err.message), stack: err.stack ? String(err.stack) : undefined, path };
  };
  let outbox: (HostReply | HostStarted)[] = [];
  let flushing = false;
  const flush = () => {
    flushing = false;
    if (outbox.length === 0) return;
    const batch = outbox;
    outbox = [];
    send(batch);
  };
  const post = (m: HostReply | HostStarted) => {
    outbox.push(m);
    if (!flushing) {
      flushing = true;
      setImmediate(flush);
    }
  };
  const tools = new Map<string, { m: SandboxModule; exportName: string; path: string }>();
  let reward: { m: SandboxModule; path: string } | undefined;
  let hello: HostHello;
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
    hello = { ready: true, tools: specs, reward: reward?.path };
  } catch (e) {
    hello = { loadError: errorOf(e, loading) };
  }
  send(hello);

  const start = (req: Exclude<HostRequest, { op: 'abort' } | { op: 'endEpisode' }>) => {
    const target = req.op === 'tool' ? tools.get(req.name) : reward;
    const path = target?.path ?? '';
    const work = async (): Promise<unknown> => {
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
    };
    const logs = () => [...stray.splice(0), ...(target ? target.m.takeLogs() : [])];
    work().then(
      (value) => post({ id: req.id, ok: true, value, logs: logs() }),
      (e: unknown) => post({ id: req.id, ok: false, error: errorOf(e, path), logs: logs() }),
    );
  };
  // A batch's calls start in order, each announced: their synchronous parts run here, bounded by
  // the vm time limit; the announcements (and any replies ready) go out in one message before any
  // call's asynchronous part can run, so the host times each call from its start and stops one
  // that never yields after an await.
  onMessage((batch) => {
    if (!Array.isArray(batch)) return;
    for (const req of batch as HostRequest[]) {
      if (req.op === 'abort') aborts.get(req.id)?.abort(req.reason);
      else if (req.op === 'endEpisode') for (const m of new Set([...tools.values()].map((t) => t.m))) endEpisodeInContext(m, req.episode);
      else {
        outbox.push({ id: req.id, started: true });
        start(req);
      }
    }
    flush();
  });
}
