/**
 * The engine user code runs in: QuickJS (Bellard's, the 2025 release; quickjs-ng 0.32 put a property-access error on its function's first line) compiled to WebAssembly, inside the sandbox
 * process (./sandbox-child.ts). Its heap is wasm linear memory, not V8's: no host object,
 * function or prototype exists in it, so no constructor chain, overridden promise method or stack
 * frame can lead back to Node. The Tool API is a prelude evaluated inside the guest (console,
 * `require('arbor/env')`, timers, ctx.signal, ctx.episode, the tool and reward wrappers) over
 * three host calls that take and return plain data: `log(text)`, `read(path) → text | [error]` and
 * `done(callId, ok, JSON text)`. The prelude receives them as arguments and keeps them in its
 * closure (never on the global object); even a guest that got hold of one could only log a line,
 * read a workspace file or finish one of its own calls.
 *
 * Limits come from the engine: an interrupt handler stops any entry into the guest after the call
 * time limit (a synchronous loop fails its call; a loop in a timer reloads the context; a loop after
 * an await rejects its async function; an interrupt escaping a promise job replaces the process), the wasm memory's maximum bounds the
 * heap (shared by the environment's files; malloc fails past it), and a stack limit stops deep
 * recursion before the host's own stack does. A builtin's own loop (`new Array(1e8).fill(0)`)
 * does not poll the interrupt handler: the host kills the process just after the call's limit. Logs, results and error texts are cut to a size in the guest (with a
 * note) and refused above a hard limit by the host, which checks a string's length before copying it.
 */
import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import variant from '@jitl/quickjs-wasmfile-release-sync';
import { bestTokenF1, exactMatch, f1Score, normalizeAnswer, substringMatch } from './rewards';
import { workspaceReader } from './workspace-read';

/** Size limits on what crosses out of the guest (characters). */
export const GUEST_LIMITS = {
  /** One console line (cut in the guest with a note). */
  logLine: 8192,
  /** Console output kept per call: lines and characters (the rest counted in one note). */
  logLines: 1000,
  logChars: 256 * 1024,
  /** A tool's content (cut in the guest with a note). */
  result: 1024 * 1024,
  /** A tool's metadata as JSON (replaced by a note when longer). */
  metadata: 64 * 1024,
  /** An error's message and stack (each). */
  error: 16 * 1024,
  /** A reward's value as JSON (refused when longer). */
  reward: 256 * 1024,
  /** What the host copies out of the guest at most in one string; longer is refused uncopied. */
  hard: 2 * 1024 * 1024 + 65536,
};

/** Stack limit for the guest: below what the host's native stack allows for wasm frames (measured: 1 MB overflows Node's). */
const GUEST_STACK_BYTES = 256 * 1024;

const HELPERS = [normalizeAnswer, exactMatch, substringMatch, f1Score, bestTokenF1].map((f) => f.toString()).join('\n');

/**
 * Evaluated once per file context; returns the host's entry points. Everything the guest calls
 * from its own builtins is captured first, so user code that replaces a builtin changes only
 * what its own calls see.
 */
const PRELUDE = `(function (hostLog, hostRead, hostDone, L) {
'use strict';
var G = globalThis, S = String, apply = Reflect.apply, stringify = JSON.stringify, parse = JSON.parse;
var P = Promise, presolve = Promise.resolve, preject = Promise.reject, pthen = Promise.prototype.then;
var sslice = String.prototype.slice, keys = Object.keys, freeze = Object.freeze, isArray = Array.isArray, now = Date.now;
var isFin = isFinite;
function cut(s, n, what) {
  s = S(s);
  return s.length <= n ? s : apply(sslice, s, [0, n]) + ' …[' + what + ' truncated: ' + s.length + ' characters, the limit is ' + n + ']';
}
function show(x) {
  if (typeof x === 'string') return x;
  var t;
  try { t = stringify(x); } catch (e) { t = undefined; }
  if (t === undefined) { try { t = S(x); } catch (e) { t = '[a value that cannot be shown]'; } }
  return t;
}
function fmt(args) { var s = ''; for (var i = 0; i < args.length; i++) s += (i ? ' ' : '') + show(args[i]); return s; }
function log() { hostLog(cut(fmt(arguments), L.logLine, 'log line')); }
G.console = { log: log, info: log, warn: log, error: log, debug: log };
function describe(e) {
  try {
    if (e && typeof e === 'object' && 'message' in e) {
      var st = e.stack;
      return { message: cut(S(e.message), L.error, 'error message'), name: S(e.name), stack: typeof st === 'string' ? cut(st, L.error, 'stack') : undefined };
    }
    return { message: cut(show(e), L.error, 'error message') };
  } catch (x) { return { message: 'threw a value that cannot be shown' }; }
}
var arborEnv = (function () { ${HELPERS}
  return freeze({ normalizeAnswer: normalizeAnswer, exactMatch: exactMatch, substringMatch: substringMatch, f1Score: f1Score }); })();
function require(name) {
  if (name === 'arbor/env') return arborEnv;
  throw new Error("require('" + S(name) + "') is not available in the sandbox (only 'arbor/env')");
}
G.require = require;
var mod = { exports: {} };
G.module = mod;
G.exports = mod.exports;
var timers = [], timerSeq = 0;
G.setTimeout = function (fn, ms) {
  var id = ++timerSeq, rest = [];
  for (var i = 2; i < arguments.length; i++) rest[rest.length] = arguments[i];
  timers[timers.length] = { id: id, due: now() + (Number(ms) || 0), fn: fn, args: rest };
  return id;
};
G.clearTimeout = function (id) { for (var i = 0; i < timers.length; i++) if (timers[i].id === id) { timers.splice(i, 1); return; } };
function readFile(p) {
  // The file's text, or [the error's message].
  var r = hostRead(S(p));
  if (typeof r === 'string') return r;
  throw new Error(S(r && r[0]));
}
var episodes = {}, signals = {};
function newSignal() {
  var l = [];
  var s = {
    aborted: false, reason: undefined, onabort: null,
    addEventListener: function (type, fn) { if (type === 'abort' && typeof fn === 'function') l[l.length] = fn; },
    removeEventListener: function (type, fn) { for (var i = 0; i < l.length; i++) if (l[i] === fn) { l.splice(i, 1); return; } },
    throwIfAborted: function () { if (s.aborted) throw new Error(S(s.reason || 'aborted')); },
  };
  s.fire = function (reason) {
    if (s.aborted) return;
    s.aborted = true; s.reason = reason;
    var ev = { type: 'abort', target: s }, fns = l.slice();
    try { if (typeof s.onabort === 'function') s.onabort(ev); } catch (e) { log('uncaught in onabort: ' + describe(e).message); }
    for (var i = 0; i < fns.length; i++) { try { fns[i](ev); } catch (e) { log('uncaught in an abort listener: ' + describe(e).message); } }
  };
  return s;
}
var exportsOf = {}, tools = {}, rewardFn;
function settle(id, v, f) {
  var p;
  try { p = apply(presolve, P, [v()]); } catch (e) { p = apply(preject, P, [e]); }
  apply(pthen, p, [function (r) { var out; try { out = f(r); } catch (e) { hostDone(id, false, stringify(describe(e))); return; } hostDone(id, true, out); },
    function (e) { hostDone(id, false, stringify(describe(e))); }]);
}
return {
  load: function (kind, path) {
    var ex = mod.exports, ks = keys(ex);
    if (kind === 'reward') {
      var fns = [];
      for (var i = 0; i < ks.length; i++) if (typeof ex[ks[i]] === 'function') fns[fns.length] = ks[i];
      var name = typeof ex.reward === 'function' ? 'reward' : typeof ex.default === 'function' ? 'default' : fns.length === 1 ? fns[0] : undefined;
      if (!name) throw new Error(path + ': export a reward function as \`reward\` (or default); found ' + (fns.join(', ') || 'no functions'));
      rewardFn = ex[name];
      return stringify({ reward: name });
    }
    var specs = [];
    for (var j = 0; j < ks.length; j++) {
      var t = ex[ks[j]];
      if (!t || typeof t !== 'object' || typeof t.execute !== 'function' || typeof t.name !== 'string') continue;
      var n = S(t.name);
      if (tools[n]) throw new Error(path + ': a tool named "' + n + '" is defined twice');
      tools[n] = t;
      specs[specs.length] = { name: n, exportName: ks[j], description: S(t.description == null ? '' : t.description), parameters: parse(stringify(t.parameters == null ? { type: 'object' } : t.parameters)) };
    }
    return stringify({ tools: specs });
  },
  tool: function (id, name, argsJson, episode) {
    var t = tools[name];
    var signal = signals[id] = newSignal();
    var ep = episodes[episode] || (episodes[episode] = {});
    var ctx = { signal: signal, episode: ep, readFile: readFile };
    settle(id, function () { if (!t) throw new Error('no sandboxed tool named "' + name + '"'); return t.execute(parse(argsJson), ctx); }, function (r) {
      delete signals[id];
      var meta = r && r.metadata, m;
      if (meta && typeof meta === 'object' && !isArray(meta)) {
        m = stringify(meta);
        if (m && m.length > L.metadata) m = stringify({ truncated: 'metadata of ' + m.length + ' characters dropped, the limit is ' + L.metadata });
      }
      var c = r && r.content;
      return '{"content":' + stringify(cut(c == null ? '' : c, L.result, 'result')) + ',"success":' + (r && r.success === false ? 'false' : 'true') + (m ? ',"metadata":' + m : '') + '}';
    });
  },
  reward: function (id, summaryJson) {
    settle(id, function () { if (!rewardFn) throw new Error('this environment has no reward file'); return rewardFn(parse(summaryJson)); }, function (v) {
      // NaN and ±Infinity survive the trip as tagged strings, so the error can say what came back.
      return stringify(v === undefined ? null : v, function (k, x) { return typeof x === 'number' && !isFin(x) ? '\\u0000nonfinite:' + S(x) : x; });
    });
  },
  describe: function (e) { return stringify(describe(e)); },
  abort: function (id, reason) { var s = signals[id]; if (s) { delete signals[id]; s.fire(reason); } },
  forget: function (id) { delete signals[id]; },
  endEpisode: function (id) { delete episodes[id]; },
  timers: function () {
    var t = now(), due = [], keep = [], next = -1;
    for (var i = 0; i < timers.length; i++) (timers[i].due <= t ? due : keep)[(timers[i].due <= t ? due : keep).length] = timers[i];
    timers = keep;
    for (var j = 0; j < due.length; j++) { try { apply(due[j].fn, undefined, due[j].args); } catch (e) { log('uncaught in a timer: ' + describe(e).message); } }
    for (var k = 0; k < timers.length; k++) if (next < 0 || timers[k].due < next) next = timers[k].due;
    return next;
  },
};
})`;

const ENTRIES = ['load', 'tool', 'reward', 'describe', 'abort', 'forget', 'endEpisode', 'timers'] as const;
type Entry = (typeof ENTRIES)[number];

/** A failure as it leaves the guest: message, stack (guest positions) and the file. */
export class GuestError extends Error {
  constructor(
    message: string,
    readonly path: string,
    readonly guestStack?: string,
  ) {
    super(message);
  }
}

interface Pending {
  resolve: (json: string) => void;
  reject: (e: GuestError) => void;
  file: GuestFile;
}

/** One file's context in the shared runtime. */
interface GuestFile {
  path: string;
  kind: 'tool' | 'reward';
  code: string;
  ctx: QuickJSContext;
  entries: Record<Entry, QuickJSHandle>;
  logs: string[];
  logChars: number;
  dropped: number;
  nextDue: number;
  /** An entry into this context ran past its time (a loop in a promise job or a timer): the context is reloaded when a call of it times out. */
  looped: boolean;
}

/** The longest the host waits on reading a thrown value's message, name and stack in the guest. */
const ERROR_READ_MS = 1000;

/** Wasm memory QuickJS itself needs besides the guest's heap (its initial 16 MB). */
const ENGINE_MEMORY_MB = 16;

/**
 * The QuickJS module, from the wasm bytes (read by the caller before the sandbox locks itself
 * down), with a wasm memory whose maximum is the memory limit: QuickJS's own malloc limit does
 * not count an allocation's size in this build (no malloc_usable_size; measured: 267 ArrayBuffers
 * of 8 MB under a 32 MB limit), so the bound is the memory itself, and malloc fails past it (the
 * guest gets "out of memory"). One module (and memory) per sandbox process.
 */
export function loadQuickJs(wasmBinary: ArrayBuffer, memoryMb: number): Promise<QuickJSWASMModule> {
  const pages = Math.ceil(((memoryMb + ENGINE_MEMORY_MB) * 1024 * 1024) / 65536);
  const wasmMemory = new WebAssembly.Memory({ initial: Math.min(pages, 256), maximum: pages });
  return newQuickJSWASMModuleFromVariant(newVariant(variant, { wasmBinary, wasmMemory }));
}

/**
 * The environment's files in one QuickJS runtime (one context per file, so each file keeps its
 * own scope). Calls are started by `tool`/`reward` and settle through the guest's `done` host call;
 * promise jobs run right after each entry, timers when due.
 */
export class QuickJsEngine {
  private rt: QuickJSRuntime;
  private files: GuestFile[] = [];
  private toolFile = new Map<string, GuestFile>();
  private rewardFile?: GuestFile;
  private pending = new Map<number, Pending>();
  private deadline = Infinity;
  /** Why the engine stopped (a loop in a promise job, a failure of the wasm): every later call fails with it. */
  private dead?: string;
  private timer?: NodeJS.Timeout;
  private stray: string[] = [];

  constructor(
    private readonly qjs: QuickJSWASMModule,
    private readonly limits: { timeoutMs: number; memoryMb: number },
    private readonly workspace?: string,
    /** The engine itself failed (a host-side exception out of the wasm, e.g. the native stack): the process should go. */
    private readonly onFatal: (message: string) => void = () => {},
  ) {
    this.rt = this.newRuntime();
    this.warmUp();
  }

  /**
   * Run the paths a first call takes (a long string into the guest, JSON.parse, property
   * access) once at start, so their compilation (the wasm's tiers, quickjs-emscripten's string
   * copying) is paid here and not inside a tool's first call and its time limit.
   */
  private warmUp(): void {
    const ctx = this.rt.newContext();
    try {
      const json = JSON.stringify({ facts: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`entity number ${i}`, `a fact about entity ${i}`])) });
      const h = ctx.newString(json);
      ctx.setProp(ctx.global, 'W', h);
      h.dispose();
      this.deadline = Date.now() + 10_000;
      const r = ctx.evalCode('var o = JSON.parse(W), n = 0; for (var k in o.facts) n += o.facts[k].length; JSON.stringify(o).length + n');
      this.deadline = Infinity;
      if (r.error) r.error.dispose();
      else r.value.dispose();
    } finally {
      ctx.dispose();
    }
  }

  /** A call into the wasm that threw on the host side leaves the engine in an unknown state: every call fails, the process is replaced. */
  private guard<T>(f: () => T, path: string): T {
    try {
      return f();
    } catch (e) {
      if (e instanceof GuestError) throw e;
      const message = `${path}: the sandbox's engine failed (${String((e as Error)?.message ?? e).slice(0, 200)}); the sandbox is restarted`;
      this.fail(message);
      throw new GuestError(message, path);
    }
  }

  private newRuntime(): QuickJSRuntime {
    const rt = this.qjs.newRuntime();
    rt.setMemoryLimit(this.limits.memoryMb * 1024 * 1024);
    rt.setMaxStackSize(GUEST_STACK_BYTES);
    rt.setInterruptHandler(() => Date.now() > this.deadline);
    return rt;
  }

  /** Evaluate the files; the tools they export (or the reward's export name). Throws a GuestError naming the file. */
  load(files: { path: string; code: string; kind: 'tool' | 'reward' }[]): {
    tools: { name: string; description: string; parameters: Record<string, unknown>; path: string; exportName: string }[];
  } {
    const tools: { name: string; description: string; parameters: Record<string, unknown>; path: string; exportName: string }[] = [];
    for (const f of files) {
      const gf = this.loadFile(f.path, f.code, f.kind);
      if (f.kind === 'reward') {
        this.rewardFile = gf.file;
        continue;
      }
      const spec = gf.specs as { tools?: unknown } | undefined;
      const list = Array.isArray(spec?.tools) ? (spec.tools as Record<string, unknown>[]) : [];
      if (list.length === 0) throw new GuestError(`${f.path}: exports no tool (an object with name, description, parameters and execute)`, f.path);
      for (const t of list) {
        const name = String(t.name);
        const other = this.toolFile.get(name);
        if (other) throw new GuestError(`${f.path}: a tool named "${name}" is already defined in ${other.path}`, f.path);
        this.toolFile.set(name, gf.file);
        const params =
          t.parameters && typeof t.parameters === 'object' && !Array.isArray(t.parameters) ? (t.parameters as Record<string, unknown>) : { type: 'object' };
        tools.push({ name, description: String(t.description ?? ''), parameters: params, path: f.path, exportName: String(t.exportName) });
      }
    }
    return { tools };
  }

  private loadFile(path: string, code: string, kind: 'tool' | 'reward', into?: GuestFile): { file: GuestFile; specs: unknown } {
    const ctx = this.rt.newContext();
    const file: GuestFile = into ?? {
      path,
      kind,
      code,
      ctx,
      entries: {} as Record<Entry, QuickJSHandle>,
      logs: [],
      logChars: 0,
      dropped: 0,
      nextDue: -1,
      looped: false,
    };
    file.ctx = ctx;
    file.looped = false;
    file.nextDue = -1;
    // Listed before its code runs, so the console output of a file that fails to load is kept.
    if (!into) this.files.push(file);
    const hostLog = ctx.newFunction('log', (h) => {
      this.addLog(file, h);
    });
    const hostRead = ctx.newFunction('read', (h) => {
      const r = this.read(ctx, h);
      if ('text' in r) return ctx.newString(r.text);
      // An error: a one-element guest array holding its message.
      const a = ctx.newArray();
      const m = ctx.newString(r.error);
      ctx.setProp(a, 0, m);
      m.dispose();
      return a;
    });
    const hostDone = ctx.newFunction('done', (idH, okH, payloadH) => {
      this.done(file, idH, okH, payloadH);
    });
    const limitsObj = this.unwrap(file, ctx.evalCode(`(${JSON.stringify(GUEST_LIMITS)})`, 'sandbox-limits.js'));
    const prelude = this.unwrap(file, ctx.evalCode(PRELUDE, 'sandbox-prelude.js'));
    const api = this.unwrap(file, ctx.callFunction(prelude, ctx.undefined, hostLog, hostRead, hostDone, limitsObj));
    for (const h of [prelude, hostLog, hostRead, hostDone, limitsObj]) h.dispose();
    for (const e of ENTRIES) file.entries[e] = ctx.getProp(api, e);
    api.dispose();
    // The compiled CommonJS runs as the context's script (module, exports and require are globals
    // of the context), so its lines and columns are the source map's.
    this.deadline = Date.now() + this.limits.timeoutMs;
    const top = this.guard(() => ctx.evalCode(code, path), path);
    this.deadline = Infinity;
    this.unwrap(file, top, path).dispose();
    const kindH = ctx.newString(kind);
    const pathH = ctx.newString(path);
    this.deadline = Date.now() + this.limits.timeoutMs;
    const r = this.guard(() => ctx.callFunction(file.entries.load, ctx.undefined, kindH, pathH), path);
    this.deadline = Infinity;
    for (const h of [kindH, pathH]) h.dispose();
    const json = this.unwrap(file, r, path);
    const text = this.copyString(ctx, json);
    json.dispose();
    this.jobs();
    this.schedule(file);
    return { file, specs: text === undefined ? undefined : JSON.parse(text) };
  }

  /** A result handle, or throw its error as a GuestError. */
  private unwrap(file: GuestFile, r: ReturnType<QuickJSContext['evalCode']>, path = file.path): QuickJSHandle {
    if (r.error) {
      const e = this.errorOf(file, r.error, path);
      r.error.dispose();
      throw e;
    }
    return r.value;
  }

  /**
   * An error handle as plain data, read in the guest by the prelude's `describe` (cut to size)
   * under a time limit of its own: a thrown value's `message`, `name` or `stack` may be a getter
   * or a Proxy trap that loops, and reading it runs guest code after the call's own limit.
   */
  private errorOf(file: GuestFile, h: QuickJSHandle, path: string): GuestError {
    const ctx = file.ctx;
    const describe = file.entries.describe;
    // Before the prelude is in place (it failed to load) only the engine's own errors exist.
    if (!describe?.alive) return this.guestError({}, path);
    const saved = this.deadline;
    this.deadline = Date.now() + Math.min(this.limits.timeoutMs, ERROR_READ_MS);
    let r: ReturnType<QuickJSContext['callFunction']>;
    try {
      r = this.guard(() => ctx.callFunction(describe, ctx.undefined, h), path);
    } finally {
      this.deadline = saved;
    }
    if (r.error) {
      r.error.dispose();
      return new GuestError(
        `${path}: threw a value whose message could not be read (reading it ran past ${Math.min(this.limits.timeoutMs, ERROR_READ_MS)} ms)`,
        path,
      );
    }
    const text = this.copyString(ctx, r.value);
    r.value.dispose();
    let d: { message?: unknown; name?: unknown; stack?: unknown } = {};
    try {
      const j = text === undefined ? undefined : (JSON.parse(text) as unknown);
      if (j && typeof j === 'object') d = j as typeof d;
    } catch {
      /* not the prelude's JSON: the generic message */
    }
    return this.guestError(d, path);
  }

  private guestError(d: { message?: unknown; name?: unknown; stack?: unknown }, path: string): GuestError {
    const message = typeof d.message === 'string' ? d.message : 'failed';
    const cap = (t: string, what: string) => (t.length > GUEST_LIMITS.error + 512 ? `${t.slice(0, GUEST_LIMITS.error)} …[${what} truncated]` : t);
    const stack = typeof d.stack === 'string' ? cap(d.stack, 'stack') : undefined;
    if (d.name === 'InternalError' && message === 'interrupted')
      return new GuestError(`${path}: timed out after ${this.limits.timeoutMs} ms (an endless loop?)`, path);
    if (message === 'out of memory') return new GuestError(`${path}: exceeded the sandbox memory limit (${this.limits.memoryMb} MB)`, path);
    return new GuestError(cap(message, 'error message'), path, stack);
  }

  /** A guest string copied out, if it is one and not longer than the hard limit (its length is read before copying). */
  private copyString(ctx: QuickJSContext, h: QuickJSHandle): string | undefined {
    const r = this.copyOut(ctx, h);
    return r.text;
  }

  private copyOut(ctx: QuickJSContext, h: QuickJSHandle): { text?: string; tooLong?: number } {
    if (ctx.typeof(h) !== 'string') return {};
    const lenH = ctx.getProp(h, 'length');
    const len = ctx.getNumber(lenH);
    lenH.dispose();
    if (!(len <= GUEST_LIMITS.hard)) return { tooLong: len };
    return { text: ctx.getString(h) };
  }

  private addLog(file: GuestFile, h: QuickJSHandle): void {
    const ctx = file.ctx;
    if (ctx.typeof(h) !== 'string') return;
    if (file.logs.length >= GUEST_LIMITS.logLines || file.logChars >= GUEST_LIMITS.logChars) {
      file.dropped++;
      return;
    }
    const s = this.copyString(ctx, h) ?? '';
    const line = s.length > GUEST_LIMITS.logLine + 200 ? `${s.slice(0, GUEST_LIMITS.logLine)} …[log line truncated]` : s;
    file.logs.push(line);
    file.logChars += line.length;
  }

  private read(ctx: QuickJSContext, h: QuickJSHandle): { text: string } | { error: string } {
    if (ctx.typeof(h) !== 'string' || (ctx.getLength(h) ?? 0) > 4096) return { error: 'readFile: give a path (a string of at most 4096 characters)' };
    try {
      return { text: workspaceReader(this.workspace)(ctx.getString(h)) };
    } catch (e) {
      return { error: String((e as Error)?.message ?? e) };
    }
  }

  private done(file: GuestFile, idH: QuickJSHandle, okH: QuickJSHandle, payloadH: QuickJSHandle): void {
    const ctx = file.ctx;
    if (ctx.typeof(idH) !== 'number') return;
    const id = ctx.getNumber(idH);
    const p = this.pending.get(id);
    // Only a call of this file, once.
    if (!p || p.file !== file) return;
    this.pending.delete(id);
    const ok = ctx.typeof(okH) === 'boolean' && ctx.dump(okH) === true;
    const out = this.copyOut(ctx, payloadH);
    if (out.tooLong !== undefined) {
      p.reject(
        new GuestError(`${file.path}: the call's answer has ${out.tooLong} characters, more than the ${GUEST_LIMITS.hard} the sandbox passes on`, file.path),
      );
      return;
    }
    const payload = out.text;
    if (ok && payload !== undefined) {
      p.resolve(payload);
      return;
    }
    let d: Record<string, unknown>;
    try {
      d = payload ? (JSON.parse(payload) as Record<string, unknown>) : {};
    } catch {
      d = { message: String(payload) };
    }
    p.reject(this.guestError(d && typeof d === 'object' ? d : {}, file.path));
  }

  /** Run the guest's promise jobs (each run bounded by the time limit); an overrun marks its context. */
  private jobs(): void {
    for (;;) {
      this.deadline = Date.now() + this.limits.timeoutMs;
      const r = this.guard(() => this.rt.executePendingJobs(-1), 'promise jobs');
      this.deadline = Infinity;
      if (!r.error) {
        r.dispose();
        return;
      }
      const file = this.files.find((f) => f.ctx === r.error.context);
      const e = file ? this.errorOf(file, r.error, file.path) : undefined;
      r.error.dispose();
      if (e && /timed out after/.test(e.message)) {
        // An endless loop in a promise job: the jobs it queues would run again at every later
        // entry, so the process is replaced (as a process whose call overran after an await was
        // before QuickJS); every pending call fails with this message.
        this.fail(`${file?.path ?? 'a promise job'}: timed out after ${this.limits.timeoutMs} ms (an endless loop after an await); the sandbox was restarted`);
        return;
      }
      if (file && e) this.stray.push(`${file.path}: uncaught in a promise job: ${e.message}`);
    }
  }

  /** The engine cannot go on: fail every pending call with `message`, and have the process replaced. */
  private fail(message: string): void {
    this.dead = message;
    for (const [, p] of this.pending) p.reject(new GuestError(message, p.file.path));
    this.pending.clear();
    this.onFatal(message);
  }

  /** Ask a context for its next timer and keep one host timer for the earliest. */
  private schedule(file?: GuestFile): void {
    if (file) file.nextDue = this.entry(file, 'timers', []) as number;
    clearTimeout(this.timer);
    this.timer = undefined;
    const next = Math.min(...this.files.filter((f) => f.nextDue >= 0).map((f) => f.nextDue));
    if (!Number.isFinite(next)) return;
    this.timer = setTimeout(
      () => {
        for (const f of this.files) if (f.nextDue >= 0 && f.nextDue <= Date.now()) f.nextDue = this.entry(f, 'timers', []) as number;
        this.schedule();
      },
      Math.max(0, next - Date.now()),
    );
  }

  /** Call an entry point with plain arguments (numbers, strings); its number result, if any. Runs promise jobs after. */
  private entry(file: GuestFile, name: Entry, args: (string | number)[]): unknown {
    const ctx = file.ctx;
    const hs = args.map((a) => (typeof a === 'number' ? ctx.newNumber(a) : ctx.newString(a)));
    this.deadline = Date.now() + this.limits.timeoutMs;
    const r = this.guard(() => ctx.callFunction(file.entries[name], ctx.undefined, ...hs), file.path);
    this.deadline = Infinity;
    for (const h of hs) h.dispose();
    let out: unknown;
    let err: GuestError | undefined;
    if (r.error) {
      err = this.errorOf(file, r.error, file.path);
      r.error.dispose();
    } else {
      out = ctx.typeof(r.value) === 'number' ? ctx.getNumber(r.value) : undefined;
      r.value.dispose();
    }
    this.jobs();
    if (err) {
      if (name === 'tool' || name === 'reward') throw err;
      if (/timed out|memory limit/.test(err.message)) file.looped = true;
      else this.stray.push(`${file.path}: ${err.message}`);
      return -1;
    }
    return out;
  }

  /** Run a tool call (`id` unique per sandbox); resolves with its result JSON text, rejects with a GuestError. */
  callTool(id: number, name: string, args: unknown, episode: number): Promise<string> {
    const file = this.toolFile.get(name);
    if (!file) return Promise.reject(new GuestError(`no sandboxed tool named "${name}"`, ''));
    return this.call(id, file, 'tool', [name, JSON.stringify(args ?? {}), episode]);
  }

  /** Score a summary; resolves with the reward's JSON text. */
  callReward(id: number, summary: unknown): Promise<string> {
    if (!this.rewardFile) return Promise.reject(new GuestError('this environment has no reward file', ''));
    return this.call(id, this.rewardFile, 'reward', [JSON.stringify(summary)]);
  }

  /** The call's ctx.signal aborts (its listeners run in the guest). */
  abort(id: number, reason: string): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.entry(p.file, 'abort', [id, reason]);
    this.schedule(p.file);
  }

  private call(id: number, file: GuestFile, name: 'tool' | 'reward', args: (string | number)[]): Promise<string> {
    if (this.dead) return Promise.reject(new GuestError(this.dead, file.path));
    return new Promise<string>((resolve, reject) => {
      // The whole call (after its awaits too) has the time limit; past it the call fails, its
      // signal aborts, and a context that looped is loaded afresh.
      const limit = setTimeout(() => {
        if (!this.pending.has(id)) return;
        this.pending.delete(id);
        this.entry(file, 'abort', [id, `timed out after ${this.limits.timeoutMs} ms`]);
        reject(new GuestError(`${file.path}: timed out after ${this.limits.timeoutMs} ms`, file.path));
        if (file.looped) this.reload(file);
        this.schedule(file);
      }, this.limits.timeoutMs);
      this.pending.set(id, {
        resolve: (v) => (clearTimeout(limit), resolve(v)),
        reject: (e) => (clearTimeout(limit), reject(e)),
        file,
      });
      try {
        this.entry(file, name, [id, ...args]);
      } catch (e) {
        const p = this.pending.get(id);
        this.pending.delete(id);
        this.entry(file, 'forget', [id]);
        p?.reject(e as GuestError);
        return;
      }
      this.schedule(file);
    });
  }

  /** Forget an episode's ctx.episode state in every file. */
  endEpisode(episode: number): void {
    for (const f of this.files) this.entry(f, 'endEpisode', [episode]);
  }

  /** Console output since the last take (every file's), with a note for what was dropped. */
  takeLogs(): string[] {
    const out = this.stray.splice(0);
    for (const f of this.files) {
      out.push(...f.logs.splice(0));
      if (f.dropped)
        out.push(
          `…[${f.dropped} more log lines from ${f.path} dropped: the limit is ${GUEST_LIMITS.logLines} lines or ${GUEST_LIMITS.logChars} characters per call]`,
        );
      f.logChars = 0;
      f.dropped = 0;
    }
    return out;
  }

  /** A context whose promise jobs or timers looped: its calls fail, and the file is evaluated afresh. */
  private reload(file: GuestFile): void {
    for (const [id, p] of [...this.pending])
      if (p.file === file) {
        this.pending.delete(id);
        p.reject(new GuestError(`${file.path}: the file's context was reset after an endless loop in a promise or timer`, file.path));
      }
    for (const h of Object.values(file.entries)) if (h.alive) h.dispose();
    file.ctx.dispose();
    try {
      this.loadFile(file.path, file.code, file.kind, file);
    } catch (e) {
      this.stray.push(`${file.path}: could not be reloaded: ${(e as GuestError).message}`);
    }
  }

  dispose(): void {
    clearTimeout(this.timer);
    for (const f of this.files) {
      for (const h of Object.values(f.entries)) if (h.alive) h.dispose();
      if (f.ctx.alive) f.ctx.dispose();
    }
    this.rt.dispose();
  }
}
