// What user code can reach in the QuickJS sandbox (issue 37): a tool walks the guest's global
// object and every value the Tool API hands it or returns (ctx, ctx.signal, ctx.episode, the
// arguments, ctx.readFile's text and its error, require('arbor/env'), console, timers, a promise),
// through own properties (values, getters, setters, symbols) and prototypes to a fixed depth.
// Every function it finds must be the guest engine's own: either code written in the guest (the
// prelude's or the user's, which has source text) or a builtin that a pristine QuickJS context
// (created here, with nothing added) also has. A host function (QuickJS shows one as native code)
// would be a native function the pristine context does not have.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxHost } from '../../../engine/env/sandbox-host';
import { loadQuickJs } from '../../../engine/env/sandbox-quickjs';
import { runCall } from '../../../engine/env/tool';

/** The walker, the same text in the sandbox and in the pristine context. */
const WALKER = `
function walk(roots, depth, known) {
  var seen = new Set(), natives = new Map(), unknown = [], functions = 0, queue = [];
  for (var i = 0; i < roots.length; i++) queue.push([roots[i][0], roots[i][1], 0]);
  var isNative = function (f) { try { return /\\[native code\\]/.test(Function.prototype.toString.call(f)); } catch (e) { return true; } };
  while (queue.length) {
    var item = queue.shift(), path = item[0], v = item[1], d = item[2];
    if (v === null || v === undefined) continue;
    if (typeof v !== 'object' && typeof v !== 'function') {
      if (d < depth) queue.push([path + '.<proto>', Object.getPrototypeOf(Object(v)), d + 1]);
      continue;
    }
    if (seen.has(v)) continue;
    seen.add(v);
    if (typeof v === 'function') {
      functions++;
      if (isNative(v)) {
        if (known && !known.has(v)) unknown.push(path);
        if (!natives.has(v)) natives.set(v, path);
      }
    }
    if (d >= depth) continue;
    var keys = Reflect.ownKeys(v);
    for (var j = 0; j < keys.length; j++) {
      var k = keys[j], desc;
      try { desc = Object.getOwnPropertyDescriptor(v, k); } catch (e) { continue; }
      if (!desc) continue;
      var name = path + '.' + String(k);
      if ('value' in desc) queue.push([name, desc.value, d + 1]);
      if (desc.get) queue.push([name + '<get>', desc.get, d + 1]);
      if (desc.set) queue.push([name + '<set>', desc.set, d + 1]);
    }
    queue.push([path + '.<proto>', Object.getPrototypeOf(v), d + 1]);
  }
  return { natives: natives, unknown: unknown, functions: functions, objects: seen.size };
}
// Builtins reached through syntax rather than a global name (AsyncFunction, generators, iterators).
function intrinsics() {
  return [['async', async function () {}], ['generator', function* () {}], ['asyncGenerator', async function* () {}],
    ['arrayIterator', [][Symbol.iterator]()], ['mapIterator', new Map().entries()], ['setIterator', new Set().values()],
    ['stringIterator', ''[Symbol.iterator]()], ['regexpIterator', 'a'.matchAll(/a/g)], ['arguments', (function () { return arguments; })()]];
}
`;

const TOOL = `${WALKER}
export const reach = {
  name: 'reach',
  description: 'walks what it can reach',
  parameters: { type: 'object', properties: { builtins: { type: 'array', items: { type: 'string' } } }, required: ['builtins'] },
  async execute(args: { builtins: string[] }, ctx: any) {
    const g: any = globalThis;
    // The engine's builtins, found from the names a pristine context has: the reference set.
    const builtins = walk([...args.builtins.map((n) => ['globalThis.' + n, g[n]]), ...intrinsics()], 8, undefined);
    let readError: unknown;
    try { ctx.readFile('../outside.txt'); } catch (e) { readError = e; }
    const env = require('arbor/env');
    const timer = setTimeout(() => {}, 1);
    clearTimeout(timer);
    const roots: [string, unknown][] = [
      ['globalThis', globalThis], ['ctx', ctx], ['args', args], ['ctx.signal', ctx.signal], ['ctx.episode', ctx.episode],
      ['readFile()', ctx.readFile('data.txt')], ['readFile error', readError], ['arbor/env', env],
      ['exactMatch()', env.exactMatch('a', ['a'])], ['normalizeAnswer()', env.normalizeAnswer('The A')], ['f1Score()', env.f1Score('a b', ['a'])],
      ['console', console], ['setTimeout()', timer], ['module', (globalThis as any).module], ['a promise', Promise.resolve(1)],
      ['an async function', async () => 1],
    ];
    const all = walk(roots, 6, builtins.natives);
    return { content: JSON.stringify({ builtins: builtins.natives.size, unknown: all.unknown, functions: all.functions, objects: all.objects }), success: true };
  },
};
`;

let dir: string;
let host: SandboxHost | undefined;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'arbor-reach-'));
  mkdirSync(join(dir, 'ws'));
  writeFileSync(join(dir, 'ws', 'data.txt'), 'inside');
});
afterAll(async () => {
  await host?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('what the guest can reach', () => {
  it('every function reachable from the global object and from what the Tool API hands over is the guest engine’s own', async () => {
    // A pristine QuickJS context: its global names and how many native functions they reach.
    const wasmFile = join(dirname(createRequire(import.meta.url).resolve('@jitl/quickjs-wasmfile-release-sync')), 'emscripten-module.wasm');
    const qjs = await loadQuickJs(new Uint8Array(readFileSync(wasmFile)).buffer, 64);
    const ctx = qjs.newRuntime().newContext();
    const r = ctx.evalCode(
      `${WALKER}; var names = Object.getOwnPropertyNames(globalThis); JSON.stringify({ names: names, natives: walk(names.map(function (n) { return ['globalThis.' + n, globalThis[n]]; }).concat(intrinsics()), 8).natives.size })`,
    );
    const h = ctx.unwrapResult(r);
    const pristine = JSON.parse(ctx.getString(h)) as { names: string[]; natives: number };
    h.dispose();
    expect(pristine.natives).toBeGreaterThan(300);

    host = await SandboxHost.open({ tools: [{ path: 'tools/reach.ts', source: TOOL }] }, { timeoutMs: 20_000, memoryMb: 96 }, join(dir, 'ws'));
    const out = await runCall(
      host.tools,
      { name: 'reach', args: { builtins: pristine.names } },
      { timeoutMs: 30_000, maxArgChars: 100_000, maxResultChars: 100_000 },
    );
    expect(out.success, out.result).toBe(true);
    const got = JSON.parse(out.result) as { builtins: number; unknown: string[]; functions: number; objects: number };
    // The same builtins as a context with nothing added (the prelude adds no native function)...
    expect(got.builtins).toBe(pristine.natives);
    // ...and nothing native beyond them anywhere the walk went.
    expect(got.unknown).toEqual([]);
    expect(got.functions).toBeGreaterThan(pristine.natives);
    expect(got.objects).toBeGreaterThan(100);
  }, 120_000);
});
