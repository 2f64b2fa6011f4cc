/**
 * Runs one piece of user code (a tool call or a reward) inside a fresh node:vm context, in a
 * worker thread the parent terminates on timeout and whose heap is capped (resourceLimits).
 * The context has the JavaScript built-ins, a console, and `require('arbor/env')` for the reward
 * helpers — no process, no filesystem, no timers, no other modules.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { DEFAULT_LIMITS, runCall, type Tool } from './tool';
import type { EpisodeSummary } from './rewards';
import { callRewardInContext, callToolInContext, loadSandboxModule, toolExports } from './sandbox-context';

export interface SandboxJob {
  code: string;
  path: string;
  kind: 'tool' | 'reward';
  /** Tool: the export to call (a Tool's name or its export name); default: the only tool. */
  tool?: string;
  args?: unknown;
  summary?: EpisodeSummary;
  callTimeoutMs: number;
  /** Folder the tool may read with ctx.readFile. */
  workspace?: string;
}

export interface SandboxReply {
  ok: boolean;
  value?: unknown;
  error?: { message: string; stack?: string };
  logs: string[];
}

const job = workerData.job as SandboxJob;
// Modules are loaded: the parent starts the user's time limit now.
parentPort!.postMessage({ ready: true });
let logs = (): string[] => [];

async function main(): Promise<SandboxReply> {
  const m = loadSandboxModule(job.code, job.path, job.callTimeoutMs, job.workspace);
  logs = m.takeLogs;
  if (job.kind === 'tool') {
    const tools = toolExports(m);
    if (tools.length === 0) throw new Error(`${job.path}: exports no tool (an object with name, description, parameters and execute)`);
    const picked = job.tool ? tools.find(([k, t]) => k === job.tool || t.name === job.tool) : tools.length === 1 ? tools[0] : undefined;
    if (!picked)
      throw new Error(
        `${job.path}: ${job.tool ? `no tool named "${job.tool}"` : 'exports several tools; choose one'} (exports: ${tools.map(([k, t]) => `${k} (${t.name})`).join(', ')})`,
      );
    const [exportName, user] = picked;
    // The same path a model's call takes (argument validation against a copy of the schema, size
    // limit, timeout, errors as observations); the call itself runs inside the context.
    const proxy: Tool = {
      name: String(user.name),
      description: String(user.description ?? ''),
      parameters: JSON.parse(JSON.stringify(user.parameters ?? {})) as Record<string, unknown>,
      execute: (args, ctx) => callToolInContext(m, exportName, args, job.callTimeoutMs, job.path, { episode: 1, signal: ctx.signal }),
    };
    const out = await runCall(
      new Map([[proxy.name, proxy]]),
      { name: proxy.name, args: job.args as Record<string, unknown> },
      { ...DEFAULT_LIMITS, timeoutMs: job.callTimeoutMs },
      { episode: {} },
    );
    const stack = out.thrown && typeof out.thrown === 'object' && 'stack' in out.thrown ? String((out.thrown as Error).stack) : undefined;
    return {
      ok: out.success,
      value: { content: out.result, success: out.success, metadata: out.metadata, latencyMs: out.latencyMs },
      error: out.success ? undefined : { message: out.error ?? out.result, stack },
      logs: logs(),
    };
  }
  const value = await callRewardInContext(m, job.path, job.summary, job.callTimeoutMs);
  return { ok: true, value, logs: logs() };
}

main().then(
  (r) => parentPort!.postMessage(r),
  (e: unknown) => {
    // Errors thrown inside the vm context are that context's Error, not this realm's.
    const err = e && typeof e === 'object' && 'message' in e ? (e as Error) : new Error(String(e));
    parentPort!.postMessage({
      ok: false,
      error: { message: String(err.message), stack: err.stack ? String(err.stack) : undefined },
      logs: logs(),
    } satisfies SandboxReply);
  },
);
