/**
 * The vm contexts of `environment.sandbox: process` (V8-fast, for compute-heavy tools whose code
 * is consented like a plugin's): NOT a boundary, the permission model around the process is. The
 * default engine is QuickJS (./sandbox-quickjs.ts). Nothing from the host realm is handed to user code: a host object's constructor
 * chain would lead back to the worker realm's Function and `process`. The console,
 * `require('arbor/env')` (the reward helpers, re-evaluated from their source inside the context),
 * the tool call and the reward call are all defined by a prelude evaluated inside the context;
 * arguments and summaries cross as JSON strings; results are read back as plain data.
 */
import vm from 'node:vm';
import { bestTokenF1, exactMatch, f1Score, normalizeAnswer, normalizeRewardValue, substringMatch } from './rewards';
import { workspaceReader } from './workspace-read';

const helpers = [normalizeAnswer, exactMatch, substringMatch, f1Score, bestTokenF1].map((f) => f.toString()).join('\n');
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
var __timers = [], __timerSeq = 0;
var setTimeout = function (fn, ms) {
  var id = ++__timerSeq;
  __timers.push({ id: id, due: Date.now() + (Number(ms) || 0), fn: fn, args: [].slice.call(arguments, 2) });
  return id;
};
var clearTimeout = function (id) { __timers = __timers.filter(function (t) { return t.id !== id; }); };
var __nextDue = function () { return __timers.reduce(function (m, t) { return m < 0 || t.due < m ? t.due : m; }, -1); };
var __fireTimers = function (now) {
  var due = __timers.filter(function (t) { return t.due <= now; });
  __timers = __timers.filter(function (t) { return t.due > now; });
  due.forEach(function (t) { try { t.fn.apply(null, t.args); } catch (e) { __logs.push('uncaught in a timer: ' + (e && e.message)); } });
};
var __episodes = {}, __signals = {};
var __signal = function () {
  return {
    aborted: false, reason: undefined, onabort: null, __l: [],
    addEventListener: function (type, fn) { if (type === 'abort' && typeof fn === 'function') this.__l.push(fn); },
    removeEventListener: function (type, fn) { this.__l = this.__l.filter(function (f) { return f !== fn; }); },
    throwIfAborted: function () { if (this.aborted) throw new Error(String(this.reason || 'aborted')); },
  };
};
var __abortCall = function (callId, reason) {
  var s = __signals[callId];
  if (!s || s.aborted) return;
  s.aborted = true;
  s.reason = reason;
  var ev = { type: 'abort', target: s };
  try { if (typeof s.onabort === 'function') s.onabort(ev); } catch (e) { __logs.push('uncaught in onabort: ' + (e && e.message)); }
  s.__l.slice().forEach(function (f) { try { f(ev); } catch (e) { __logs.push('uncaught in an abort listener: ' + (e && e.message)); } });
};
var __endEpisode = function (id) { delete __episodes[id]; };
var __callTool = function (tool, argsJson, episodeId, callId) {
  var signal = __signals[callId] = __signal();
  var episode = __episodes[episodeId] || (__episodes[episodeId] = {});
  // The synchronous part runs now, inside runInContext and so under its time limit.
  var started;
  try { started = Promise.resolve(tool.execute(JSON.parse(argsJson), { signal: signal, episode: episode, readFile: __readFile })); }
  catch (e) { started = Promise.reject(e); }
  return started
    .then(function (r) {
      delete __signals[callId];
      return JSON.stringify({ content: r && r.content, success: r && r.success, metadata: r && r.metadata });
    }, function (e) { delete __signals[callId]; throw e; });
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
  /** Keep the context's timers firing while `p` runs. */
  track<T>(p: Promise<T>): Promise<T>;
  /** Start firing the context's timers (after code that may have set one). */
  pump(): void;
}

/**
 * ctx.readFile inside the context: the host reader is captured in a closure the user's code cannot
 * reach, never throws into the context (its answer crosses as a JSON string, parsed by the
 * context's JSON), so no host object or host Error is ever handed to user code.
 */
function installReader(context: vm.Context, workspace: string | undefined): void {
  const reader = workspaceReader(workspace);
  const host = (p: unknown): string => {
    try {
      return JSON.stringify({ ok: true, text: reader(String(p)) });
    } catch (e) {
      return JSON.stringify({ ok: false, error: String((e as Error)?.message ?? e) });
    }
  };
  const install = vm.runInContext(
    '(function (h) { return function (p) { var r = JSON.parse(h(String(p))); if (!r.ok) throw new Error(r.error); return r.text; }; })',
    context,
  ) as (h: (p: unknown) => string) => unknown;
  (context as Record<string, unknown>).__readFile = install(host);
}

/** Evaluate compiled (CommonJS) user code in a fresh context; `timeoutMs` bounds the module's top level. */
export function loadSandboxModule(code: string, path: string, timeoutMs: number, workspace?: string): SandboxModule {
  // A context whose global is an ordinary object of its own realm (not a contextified host
  // object), so constructor chains from it stay inside. This is not the security boundary: the
  // process around it is (./sandbox-child.ts).
  const context = vm.createContext(vm.constants.DONT_CONTEXTIFY);
  vm.runInContext(PRELUDE, context, { filename: 'sandbox-prelude.js' });
  installReader(context, workspace);
  let pumping: NodeJS.Timeout | undefined;
  let inflight = 0;
  // The context's timers are a list inside it; the worker fires the due ones while calls are in
  // flight or timers are pending (a 5 ms tick), each firing under the vm timeout.
  const pump = () => {
    if (pumping) return;
    pumping = setInterval(() => {
      try {
        vm.runInContext('__fireTimers(Date.now())', context, { timeout: timeoutMs, filename: `${path} (timer)` });
      } catch (e) {
        (context as Record<string, unknown>).__pumpError = String((e as Error)?.message ?? e);
      }
      if (inflight === 0 && (vm.runInContext('__nextDue()', context) as number) < 0) {
        clearInterval(pumping);
        pumping = undefined;
      }
    }, 5);
    pumping.unref?.();
  };
  const m: SandboxModule = {
    context,
    exports: {},
    takeLogs: () => JSON.parse(vm.runInContext('JSON.stringify(__logs.splice(0))', context)) as string[],
    track<T>(p: Promise<T>): Promise<T> {
      inflight++;
      pump();
      return p.finally(() => {
        inflight--;
      });
    },
    pump,
  };
  inContext(code, m, timeoutMs, path, path);
  m.exports = vm.runInContext('module.exports', context) as Record<string, unknown>;
  if ((vm.runInContext('__nextDue()', context) as number) >= 0) pump();
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

let callSeq = 0;

/**
 * Call a tool inside its context. The synchronous part is bounded by `timeoutMs` (vm timeout).
 * `episode` names the episode whose ctx.episode object the call shares (kept in the context until
 * endEpisode); `signal` aborting sets the context's ctx.signal and runs its abort listeners.
 */
export async function callToolInContext(
  m: SandboxModule,
  exportName: string,
  args: unknown,
  timeoutMs: number,
  path: string,
  opts: { episode?: number; signal?: AbortSignal } = {},
): Promise<{ content: string; success: boolean; metadata?: Record<string, unknown> }> {
  const callId = ++callSeq;
  const episode = opts.episode ?? -callId; // no episode: a state of its own
  const onAbort = () => {
    try {
      vm.runInContext(
        `__abortCall(${callId}, ${JSON.stringify(String((opts.signal?.reason as Error | undefined)?.message ?? opts.signal?.reason ?? 'aborted'))})`,
        m.context,
        { timeout: timeoutMs },
      );
    } catch {
      /* a listener that loops is stopped by the vm timeout */
    }
  };
  const p = inContext(
    `__callTool(module.exports[${JSON.stringify(exportName)}], ${JSON.stringify(JSON.stringify(args ?? {}))}, ${episode}, ${callId})`,
    m,
    timeoutMs,
    path,
  ) as Promise<string>;
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  if (opts.signal?.aborted) onAbort();
  try {
    return JSON.parse(await m.track(p)) as { content: string; success: boolean; metadata?: Record<string, unknown> };
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    if (opts.episode === undefined) vm.runInContext(`__endEpisode(${episode})`, m.context);
  }
}

/** Forget an episode's shared state (ctx.episode) in a module's context. */
export function endEpisodeInContext(m: SandboxModule, episode: number): void {
  vm.runInContext(`__endEpisode(${Number(episode)})`, m.context);
}

/** Run an expression in the context; an endless synchronous loop stops at `timeoutMs` with an error naming the file. */
function inContext(expr: string, m: SandboxModule, timeoutMs: number, path: string, filename = 'sandbox-call.js'): unknown {
  try {
    return vm.runInContext(expr, m.context, { timeout: timeoutMs, filename });
  } catch (e) {
    if ((e as { code?: string } | null)?.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT')
      throw new Error(`${path}: timed out after ${timeoutMs} ms (an endless loop?)`);
    throw e;
  }
}

/** The reward function a module exports: `reward`, else `default`, else its only function. */
export function rewardExport(m: SandboxModule, path: string): string {
  const fns = Object.entries(m.exports).filter(([, v]) => typeof v === 'function');
  const name =
    typeof m.exports.reward === 'function' ? 'reward' : typeof m.exports.default === 'function' ? 'default' : fns.length === 1 ? fns[0]![0] : undefined;
  if (!name) throw new Error(`${path}: export a reward function as \`reward\` (or default); found ${fns.map(([k]) => k).join(', ') || 'no functions'}`);
  return name;
}

/** A returned value as the user wrote it: NaN and ±Infinity (tagged by __callReward) by name. */
function describeReturned(v: unknown): string {
  return JSON.stringify(v ?? null).replace(/"\\u0000nonfinite:(NaN|-?Infinity)"/g, '$1');
}

/** Score a summary with the module's reward; returns { reward, ...rest } (a bare number becomes { reward }). */
export async function callRewardInContext(
  m: SandboxModule,
  path: string,
  summary: unknown,
  timeoutMs: number,
): Promise<{ reward: number; components?: Record<string, number> } & Record<string, unknown>> {
  const name = rewardExport(m, path);
  const p = inContext(
    `__callReward(module.exports[${JSON.stringify(name)}], ${JSON.stringify(JSON.stringify(summary))})`,
    m,
    timeoutMs,
    path,
  ) as Promise<string>;
  return rewardFromJson(await m.track(p), path);
}

/** A reward's value as the guest wrote it (JSON, NaN/±Infinity tagged), checked: { reward, components?, steps? }. */
export function rewardFromJson(text: string, path: string): { reward: number; components?: Record<string, number> } & Record<string, unknown> {
  const v = JSON.parse(text) as unknown;
  // NaN / ±Infinity anywhere in what came back are named as the user wrote them (not "null").
  const shown = describeReturned(v);
  if (shown !== JSON.stringify(v ?? null))
    throw new Error(
      `${path}: the reward function returned ${shown.length > 2000 ? `${shown.slice(0, 2000)}…` : shown}; expected a finite number or { reward, components?, steps? }`,
    );
  const { components, ...rest } = normalizeRewardValue(v, path);
  return Object.keys(components).length ? { ...rest, components } : rest;
}

/** Console output of one call as it leaves the sandbox: at most 1000 lines and 256 K characters, the rest counted in a note. */
export function capLogs(lines: string[], maxLines = 1000, maxChars = 256 * 1024): string[] {
  const out: string[] = [];
  let chars = 0;
  let i = 0;
  for (; i < lines.length && out.length < maxLines && chars < maxChars; i++) {
    const l = String(lines[i]);
    const line = l.length > 8192 + 512 ? `${l.slice(0, 8192)} …[log line truncated: ${l.length} characters]` : l;
    out.push(line);
    chars += line.length;
  }
  if (i < lines.length) out.push(`…[${lines.length - i} more log lines dropped: the limit is ${maxLines} lines or ${maxChars} characters per call]`);
  return out;
}
