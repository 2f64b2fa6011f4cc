/**
 * The run-long sandbox worker behind SandboxHost (./sandbox-host.ts): loads a user
 * environment's tool and reward modules once (each in its own vm context, see
 * ./sandbox-context.ts) and serves calls by message, so a training run does not start a
 * worker per tool call. The parent caps this worker's heap and terminates it when a call
 * overruns its time limit.
 */
import { parentPort, workerData } from 'node:worker_threads';
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
/** Sent when the worker begins a call: the host's per-call timer runs from here, not from the send (a call queued behind others' is not late). */
export type HostStarted = { id: number; started: true };
export type HostHello = { ready: true; tools: HostToolSpec[]; reward?: string } | { loadError: { message: string; stack?: string; path: string } };

const { files, callTimeoutMs, workspace } = workerData as { files: HostFile[]; callTimeoutMs: number; workspace?: string };
const aborts = new Map<number, AbortController>();
const errorOf = (e: unknown, path: string) => {
  const err = e && typeof e === 'object' && 'message' in e ? (e as Error) : new Error(String(e));
  return { message: String(err.message), stack: err.stack ? String(err.stack) : undefined, path };
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
      });
    }
  }
  hello = { ready: true, tools: specs, reward: reward?.path };
} catch (e) {
  hello = { loadError: errorOf(e, loading) };
}
parentPort!.postMessage(hello);

parentPort!.on('message', (req: HostRequest) => {
  if (req.op === 'abort') {
    aborts.get(req.id)?.abort(req.reason);
    return;
  }
  if (req.op === 'endEpisode') {
    for (const m of new Set([...tools.values()].map((t) => t.m))) endEpisodeInContext(m, req.episode);
    return;
  }
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
  const logs = () => (target ? target.m.takeLogs() : []);
  parentPort!.postMessage({ id: req.id, started: true } satisfies HostStarted);
  work().then(
    (value) => parentPort!.postMessage({ id: req.id, ok: true, value, logs: logs() } satisfies HostReply),
    (e: unknown) => parentPort!.postMessage({ id: req.id, ok: false, error: errorOf(e, path), logs: logs() } satisfies HostReply),
  );
});
