/**
 * Runs one piece of user code (a tool call or a reward) inside a fresh node:vm context, in a
 * worker thread the parent terminates on timeout and whose heap is capped (resourceLimits).
 * The context has the JavaScript built-ins, a console, and `require('arbor/env')` for the reward
 * helpers — no process, no filesystem, no timers, no other modules.
 */
import vm from 'node:vm';
import { parentPort, workerData } from 'node:worker_threads';
import { runCall, type Tool } from './tool';
import { exactMatch, f1Score, normalizeAnswer, substringMatch, type EpisodeSummary } from './rewards';

export interface SandboxJob {
  code: string;
  path: string;
  kind: 'tool' | 'reward';
  /** Tool: the export to call (a Tool's name or its export name); default: the only tool. */
  tool?: string;
  args?: unknown;
  summary?: EpisodeSummary;
  callTimeoutMs: number;
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
/*
 * Nothing from this realm is handed to the user's code: a host object's constructor chain would
 * lead back to this realm's Function and `process`. The console, `require('arbor/env')` (the
 * reward helpers, re-evaluated from their source inside the context), the tool call and the
 * reward call are all defined by a prelude evaluated inside the context; arguments and
 * summaries cross as JSON strings; results are read back as plain data.
 */
const helpers = [normalizeAnswer, exactMatch, substringMatch, f1Score].map((f) => f.toString()).join('\n');
const PRELUDE = `
var __logs = [];
var __fmt = function (xs) { return xs.map(function (x) { return typeof x === 'string' ? x : JSON.stringify(x); }).join(' '); };
var console = { log: function () { __logs.push(__fmt([].slice.call(arguments))); } };
console.warn = console.log; console.error = console.log; console.info = console.log;
var __arborEnv = (function () { ${helpers}
  return Object.freeze({ normalizeAnswer: normalizeAnswer, exactMatch: exactMatch, substringMatch: substringMatch, f1Score: f1Score }); })();
var require = function (name) {
  if (name === 'arbor/env') return __arborEnv;
  throw new Error("require('" + name + "') is not available in the sandbox (only 'arbor/env')");
};
var module = { exports: {} };
var exports = module.exports;
var __callTool = function (tool, argsJson) {
  var signal = { aborted: false, reason: undefined, addEventListener: function () {}, removeEventListener: function () {} };
  return Promise.resolve(tool.execute(JSON.parse(argsJson), { signal: signal, episode: {} })).then(function (r) {
    return JSON.stringify({ content: r && r.content, success: r && r.success, metadata: r && r.metadata });
  });
};
var __callReward = function (fn, summaryJson) {
  return Promise.resolve(fn(JSON.parse(summaryJson))).then(function (v) { return JSON.stringify(v === undefined ? null : v); });
};
`;

const context = vm.createContext({});
vm.runInContext(PRELUDE, context, { filename: 'sandbox-prelude.js' });
const logs = (): string[] => JSON.parse(vm.runInContext('JSON.stringify(__logs)', context)) as string[];

function loadModule(): Record<string, unknown> {
  new vm.Script(job.code, { filename: job.path }).runInContext(context, { timeout: job.callTimeoutMs });
  return vm.runInContext('module.exports', context) as Record<string, unknown>;
}

const isTool = (x: unknown): x is Tool => !!x && typeof x === 'object' && typeof (x as Tool).execute === 'function' && typeof (x as Tool).name === 'string';

async function main(): Promise<SandboxReply> {
  const exp = loadModule();
  if (job.kind === 'tool') {
    const tools = Object.entries(exp).filter(([, v]) => isTool(v)) as [string, Tool][];
    if (tools.length === 0) throw new Error(`${job.path}: exports no tool (an object with name, description, parameters and execute)`);
    const picked = job.tool ? tools.find(([k, t]) => k === job.tool || t.name === job.tool) : tools.length === 1 ? tools[0] : undefined;
    if (!picked) throw new Error(`${job.path}: ${job.tool ? `no tool named "${job.tool}"` : 'exports several tools; choose one'} (exports: ${tools.map(([k, t]) => `${k} (${t.name})`).join(', ')})`);
    const user = picked[1];
    const callTool = vm.runInContext('__callTool', context) as (t: unknown, a: string) => Promise<string>;
    // The same path a model's call takes (argument validation against a copy of the schema, size
    // limit, timeout, errors as observations); the call itself runs inside the context.
    const proxy: Tool = {
      name: String(user.name),
      description: String(user.description ?? ''),
      parameters: JSON.parse(JSON.stringify(user.parameters ?? {})) as Record<string, unknown>,
      execute: async (args) => JSON.parse(await callTool(user, JSON.stringify(args))) as { content: string; success: boolean },
    };
    const out = await runCall(new Map([[proxy.name, proxy]]), { name: proxy.name, args: job.args as Record<string, unknown> }, { timeoutMs: job.callTimeoutMs, maxArgChars: 100_000, maxResultChars: 100_000 });
    const stack = out.thrown && typeof out.thrown === 'object' && 'stack' in out.thrown ? String((out.thrown as Error).stack) : undefined;
    return { ok: out.success, value: { content: out.result, success: out.success, metadata: out.metadata, latencyMs: out.latencyMs }, error: out.success ? undefined : { message: out.error ?? out.result, stack }, logs: logs() };
  }
  const fns = Object.entries(exp).filter(([, v]) => typeof v === 'function');
  const fn = typeof exp.reward === 'function' ? exp.reward : typeof exp.default === 'function' ? exp.default : fns.length === 1 ? fns[0]![1] : undefined;
  if (typeof fn !== 'function') throw new Error(`${job.path}: export a reward function as \`reward\` (or default); found ${fns.map(([k]) => k).join(', ') || 'no functions'}`);
  const callReward = vm.runInContext('__callReward', context) as (f: unknown, s: string) => Promise<string>;
  const v = JSON.parse(await callReward(fn, JSON.stringify(job.summary))) as unknown;
  const reward = typeof v === 'number' ? v : (v as { reward?: unknown } | null)?.reward;
  if (typeof reward !== 'number' || !Number.isFinite(reward)) throw new Error(`${job.path}: the reward function returned ${JSON.stringify(v)}; expected a finite number or { reward, components }`);
  return { ok: true, value: typeof v === 'number' ? { reward } : v, logs: logs() };
}

main().then(
  (r) => parentPort!.postMessage(r),
  (e: unknown) => {
    // Errors thrown inside the vm context are that context's Error, not this realm's.
    const err = e && typeof e === 'object' && 'message' in e ? (e as Error) : new Error(String(e));
    parentPort!.postMessage({ ok: false, error: { message: String(err.message), stack: err.stack ? String(err.stack) : undefined }, logs: logs() } satisfies SandboxReply);
  },
);
