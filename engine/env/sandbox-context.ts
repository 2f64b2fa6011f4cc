/**
 * The vm context user code runs in (shared by the one-shot "try it" worker and the run-long
 * tool host). Nothing from the host realm is handed to user code: a host object's constructor
 * chain would lead back to the worker realm's Function and `process`. The console,
 * `require('arbor/env')` (the reward helpers, re-evaluated from their source inside the context),
 * the tool call and the reward call are all defined by a prelude evaluated inside the context;
 * arguments and summaries cross as JSON strings; results are read back as plain data.
 */
import vm from 'node:vm';
import { exactMatch, f1Score, normalizeAnswer, substringMatch } from './rewards';

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
  // NaN and ±Infinity survive the trip as tagged strings, so the error can say what came back.
  return Promise.resolve(fn(JSON.parse(summaryJson))).then(function (v) { return JSON.stringify(v === undefined ? null : v, function (k, x) { return typeof x === 'number' && !isFinite(x) ? '\u0000nonfinite:' + String(x) : x; }); });
};
`;

export interface SandboxModule {
  context: vm.Context;
  exports: Record<string, unknown>;
  /** Console output so far (and clears it). */
  takeLogs(): string[];
}

/** Evaluate compiled (CommonJS) user code in a fresh context; `timeoutMs` bounds the module's top level. */
export function loadSandboxModule(code: string, path: string, timeoutMs: number): SandboxModule {
  const context = vm.createContext({});
  vm.runInContext(PRELUDE, context, { filename: 'sandbox-prelude.js' });
  const m: SandboxModule = {
    context,
    exports: {},
    takeLogs: () => JSON.parse(vm.runInContext('JSON.stringify(__logs.splice(0))', context)) as string[],
  };
  inContext(code, m, timeoutMs, path, path);
  m.exports = vm.runInContext('module.exports', context) as Record<string, unknown>;
  return m;
}

export interface ToolLike {
  name: string;
  description?: unknown;
  parameters?: unknown;
  execute: (...a: unknown[]) => unknown;
}

export const isToolExport = (x: unknown): x is ToolLike =>
  !!x && typeof x === 'object' && typeof (x as ToolLike).execute === 'function' && typeof (x as ToolLike).name === 'string';

/** The tools a module exports, as [export name, tool]. */
export function toolExports(m: SandboxModule): [string, ToolLike][] {
  return Object.entries(m.exports).filter(([, v]) => isToolExport(v)) as [string, ToolLike][];
}

/** Call a tool inside its context. The synchronous part is bounded by `timeoutMs` (vm timeout). */
export async function callToolInContext(m: SandboxModule, exportName: string, args: unknown, timeoutMs: number, path: string): Promise<{ content: string; success: boolean; metadata?: Record<string, unknown> }> {
  const p = inContext(`__callTool(module.exports[${JSON.stringify(exportName)}], ${JSON.stringify(JSON.stringify(args ?? {}))})`, m, timeoutMs, path) as Promise<string>;
  return JSON.parse(await p) as { content: string; success: boolean; metadata?: Record<string, unknown> };
}

/** Run an expression in the context; an endless synchronous loop stops at `timeoutMs` with an error naming the file. */
function inContext(expr: string, m: SandboxModule, timeoutMs: number, path: string, filename = 'sandbox-call.js'): unknown {
  try {
    return vm.runInContext(expr, m.context, { timeout: timeoutMs, filename });
  } catch (e) {
    if ((e as { code?: string } | null)?.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw new Error(`${path}: timed out after ${timeoutMs} ms (an endless loop?)`);
    throw e;
  }
}

/** The reward function a module exports: `reward`, else `default`, else its only function. */
export function rewardExport(m: SandboxModule, path: string): string {
  const fns = Object.entries(m.exports).filter(([, v]) => typeof v === 'function');
  const name = typeof m.exports.reward === 'function' ? 'reward' : typeof m.exports.default === 'function' ? 'default' : fns.length === 1 ? fns[0]![0] : undefined;
  if (!name) throw new Error(`${path}: export a reward function as \`reward\` (or default); found ${fns.map(([k]) => k).join(', ') || 'no functions'}`);
  return name;
}

/** A returned value as the user wrote it: NaN and ±Infinity (tagged by __callReward) by name. */
function describeReturned(v: unknown): string {
  return JSON.stringify(v ?? null).replace(/"\\u0000nonfinite:(NaN|-?Infinity)"/g, '$1');
}

/** Score a summary with the module's reward; returns { reward, ...rest } (a bare number becomes { reward }). */
export async function callRewardInContext(m: SandboxModule, path: string, summary: unknown, timeoutMs: number): Promise<{ reward: number; components?: Record<string, number> } & Record<string, unknown>> {
  const name = rewardExport(m, path);
  const p = inContext(`__callReward(module.exports[${JSON.stringify(name)}], ${JSON.stringify(JSON.stringify(summary))})`, m, timeoutMs, path) as Promise<string>;
  const v = JSON.parse(await p) as unknown;
  const reward = typeof v === 'number' ? v : (v as { reward?: unknown } | null)?.reward;
  if (typeof reward !== 'number' || !Number.isFinite(reward)) throw new Error(`${path}: the reward function returned ${describeReturned(v)}; expected a finite number or { reward, components }`);
  return typeof v === 'number' ? { reward } : (v as { reward: number });
}
