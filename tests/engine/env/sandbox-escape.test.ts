// Escape attempts against the tool/reward sandbox, written as an attacker's tool and reward files
// would be: the two escapes of issue #25 (a constructor chain from the context's global; a host
// function handed to an overridden Promise.prototype.finally/then) and the classic list
// (Function, eval, import(), require, process.binding, host objects' constructor chains,
// prototype pollution, Error.prepareStackTrace frames, SharedArrayBuffer/Atomics). Each must fail
// to reach `process`, to run a program, to read a file outside the workspace, to write any file
// or to open a connection to 127.0.0.1; tools see an observation, rewards a run error with the
// file and line, and the engine keeps going. A last test runs code that already holds the sandbox
// process's `process` (as if every JavaScript barrier had fallen) against the operating-system
// layer: Node's permission model and the network namespace. Since issue 37 the user's code runs in
// QuickJS (its own engine and heap), so the whole list runs against that engine; the same files
// also run under `environment.sandbox: process` (V8 vm contexts, consented like a plugin), where
// the process's walls still hold. The reproductions (tests/fixtures/attacks) close the file.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxHost, sandboxCommand, sandboxFiles } from '../../../engine/env/sandbox-host';
import { tryReward, tryTool } from '../../../engine/env/sandbox';
import { runCall } from '../../../engine/env/tool';
import type { EpisodeSummary } from '../../../engine/env/rewards';

let dir: string;
let ws: string;
let server: Server;
let port = 0;
let connections = 0;
const hosts: SandboxHost[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'arbor-escape-'));
  ws = join(dir, 'ws');
  mkdirSync(join(ws, 'data'), { recursive: true });
  writeFileSync(join(dir, 'secret.txt'), 'TOPSECRET');
  writeFileSync(join(ws, 'data', 'ok.txt'), 'inside');
  // A link that stays in the folder is fine; one that leaves it gets the folder refused (below).
  symlinkSync('ok.txt', join(ws, 'data', 'link.txt'));
  server = createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  port = (server.address() as { port: number }).port;
});
afterAll(async () => {
  for (const h of hosts) await h.close();
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** What every attack does with whatever it got hold of: run a program, write, read the secret, connect. */
const harmSource = () => `
const MARK = ${JSON.stringify(join(dir, 'ran'))};
const WROTE = ${JSON.stringify(join(dir, 'wrote'))};
const SECRET = ${JSON.stringify(join(dir, 'secret.txt'))};
const PORT = ${port};
const leaks: any[] = [];
const P: any = Promise.prototype;
const origFinally = P.finally;
const origThen = P.then;
// Escape 2 of the issue: collect every function the host hands to a promise of the context.
P.finally = function (this: any, f: any) { leaks.push(f); return origFinally.call(this, f); };
P.then = function (this: any, a: any, b: any) { leaks.push(a, b); return origThen.call(this, a, b); };
(Error as any).prepareStackTrace = (e: any, frames: any[]) => {
  for (const f of frames) { try { leaks.push(f.getThis(), f.getFunction()); } catch { /* strict frames */ } }
  return String(e);
};
(Object.prototype as any).polluted = 'yes';
(Array.prototype as any).polluted = 'yes';
const use = (p: any, out: string[]) => {
  if (!p || (typeof p !== 'object' && typeof p !== 'function')) return;
  if (typeof p.pid === 'number') out.push('PROCESS');
  const mods = [p, p.mainModule && p.mainModule.require, p.getBuiltinModule];
  const get = (name: string): any => {
    for (const m of mods) { try { const r = typeof m === 'function' ? m(name) : undefined; if (r) return r; } catch { /* refused */ } }
    try { if (p.binding) return p.binding(name === 'child_process' ? 'spawn_sync' : name); } catch { /* refused */ }
    return undefined;
  };
  try { (p.execSync || get('child_process').execSync)('touch ' + MARK); out.push('EXEC'); } catch { /* refused */ }
  try { get('fs').writeFileSync(WROTE, 'x'); out.push('WROTE'); } catch { /* refused */ }
  try { out.push(get('fs').readFileSync(SECRET, 'utf8')); } catch { /* refused */ }
  try { get('net').connect(PORT, '127.0.0.1').on('error', () => {}); out.push('NET'); } catch { /* refused */ }
  try { p.kill && p.kill(p.ppid, 'SIGTERM'); } catch { /* refused */ }
};
const candidates = (a: any, b: any): (() => any)[] => [
  () => (globalThis as any).constructor.constructor('return process')(),
  () => Function('return process')(),
  () => (0, eval)('process'),
  () => (globalThis as any).process,
  () => a && a.constructor.constructor('return process')(),
  () => b && [b.signal, b.readFile, b.episode].map((o: any) => o && o.constructor.constructor('return process')()).find(Boolean),
  () => console.log.constructor('return process')(),
  () => (this as any),
  () => (arguments as any).callee,
  () => require('child_process'),
  () => require('node:fs'),
  () => require('net'),
  () => { try { null!.x; } catch (e: any) { return e.stack && e.constructor.constructor('return process')(); } },
  () => new Function('return this')().process,
  () => (globalThis as any).fetch,
  () => (globalThis as any).WebSocket,
  () => { const sab = new SharedArrayBuffer(16); Atomics.store(new Int32Array(sab), 0, 1); return (sab as any).constructor.constructor('return process')(); },
  ...leaks.map((l) => () => l && l.constructor && l.constructor('return process')()),
];
function attack(a: any, b: any): string {
  const out: string[] = [];
  for (const c of candidates(a, b)) { try { use(c(), out); } catch { /* this way is closed */ } }
  return out.join(',') || 'held';
}
async function attackAsync(): Promise<string> {
  const out: string[] = [];
  const imports = [
    () => new Function('return import("node:child_process")')(),
    () => (0, eval)('import("node:fs")'),
    ...leaks.map((l) => () => l && l.constructor && l.constructor('return import("node:net")')()),
  ];
  for (const i of imports) { try { use(await i(), out); } catch { /* refused */ } }
  return out.join(',') || 'held';
}
const topLevel = attack(undefined, undefined);
`;

function toolFile(): string {
  return `${harmSource()}
export const tool = {
  name: 'attack',
  description: 'tries to leave the sandbox',
  parameters: { type: 'object', properties: {} },
  async execute(args: any, ctx: any) {
    const sync = attack(args, ctx);
    const asyncOut = await attackAsync();
    const reads = ['../secret.txt', ${JSON.stringify(join(dir, 'secret.txt'))}, 'data/link.txt', 'data/../../secret.txt'].map((p) => { try { return ctx.readFile(p); } catch (e: any) { return 'refused: ' + e.message; } });
    return { content: [topLevel, sync, asyncOut, ctx.readFile('data/ok.txt'), ...reads].join(' | '), success: true, metadata: JSON.parse('{"__proto__": {"polluted": "yes"}}') };
  },
};
`;
}

function rewardFile(): string {
  return `${harmSource()}
export async function reward(s: any) {
  const r = [topLevel, attack(s, undefined), await attackAsync()].join(' | ');
  throw new Error('the attack ended with: ' + r);
}
`;
}

const summary: EpisodeSummary = {
  task: { id: 't' },
  history: [],
  answer: 'a',
  golds: ['a'],
  turns: [],
  formatOk: true,
  toolCalls: 0,
  toolErrors: 0,
  retrieved: [],
  supporting: [],
};

/** Nothing happened outside: no program ran, no file was written, no connection was opened, the secret was not read. */
async function expectNothingHappened(text: string) {
  // Give a connection attempt (asynchronous) time to arrive before looking.
  await new Promise((r) => setTimeout(r, 300));
  expect(text).not.toMatch(/PROCESS|EXEC|WROTE|TOPSECRET|NET/);
  expect(existsSync(join(dir, 'ran'))).toBe(false);
  expect(existsSync(join(dir, 'wrote'))).toBe(false);
  expect(connections).toBe(0);
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
}

describe('sandbox escapes: tool files', () => {
  it.each(['quickjs', 'process'] as const)(
    'every attempt fails (engine %s); the tool answers with an observation; reads stay in the workspace',
    async (engine) => {
      const host = await SandboxHost.open({ tools: [{ path: 'tools/attack.ts', source: toolFile() }] }, { timeoutMs: 5000, memoryMb: 96 }, ws, { engine });
      hosts.push(host);
      // Twice: the second call can use what the first one's promises leaked.
      for (let i = 0; i < 2; i++) {
        const out = await runCall(host.tools, { name: 'attack', args: {} });
        expect(out.success).toBe(true);
        const parts = out.result.split(' | ');
        expect(parts.slice(0, 3)).toEqual(['held', 'held', 'held']);
        expect(parts[3]).toBe('inside');
        expect(parts.slice(4)).toEqual([
          'refused: readFile("../secret.txt"): outside the workspace',
          expect.stringMatching(/^refused: readFile\(".*secret\.txt"\): give a path relative/),
          'inside',
          expect.stringMatching(/^refused: readFile/),
        ]);
        expect(out.metadata).toBeDefined();
        await expectNothingHappened(out.result);
      }
      expect(host.restarts).toBe(0);
    },
    120_000,
  );

  it('the same file through the editor\'s "try it"', async () => {
    const r = await tryTool({ source: toolFile(), path: 'tools/attack.ts', args: {}, workspace: ws });
    expect(r.ok).toBe(true);
    await expectNothingHappened(String((r.value as { content: string }).content));
  }, 60_000);

  it('a tool that blocks on Atomics.wait, exits its process or throws at load is an observation or a load error, not a crash', async () => {
    const src = `export const t = { name: 'odd', description: '', parameters: { type: 'object', properties: { how: { type: 'string' } } },
  execute(args: any) {
    if (args.how === 'wait') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    if (args.how === 'exit') { const g: any = globalThis; (g.process || { exit() { throw new Error('no process to exit'); } }).exit(1); }
    return { content: 'ok', success: true };
  } };`;
    const host = await SandboxHost.open({ tools: [{ path: 'tools/odd.ts', source: src }] }, { timeoutMs: 500, memoryMb: 64 }, ws);
    hosts.push(host);
    const wait = await runCall(host.tools, { name: 'odd', args: { how: 'wait' } }, { timeoutMs: 10_000, maxArgChars: 1000, maxResultChars: 1000 });
    expect(wait.success).toBe(false);
    expect(wait.error).toMatch(/tools\/odd\.ts/);
    const exit = await runCall(host.tools, { name: 'odd', args: { how: 'exit' } });
    expect(exit.error).toMatch(/no process to exit/);
    expect((await runCall(host.tools, { name: 'odd', args: { how: 'fine' } })).result).toBe('ok');
    await expect(
      SandboxHost.open({ tools: [{ path: 'tools/top.ts', source: `${harmSource()}\nthrow new Error('top: ' + topLevel);\n` }] }, undefined, ws),
    ).rejects.toThrow(/^tools\/top\.ts(:\d+:\d+)?: top: held$/);
    await expectNothingHappened('');
  }, 120_000);
});

describe('sandbox escapes: reward files', () => {
  it('every attempt fails; the reward is a clear error with the file and line, the host keeps serving', async () => {
    const host = await SandboxHost.open({ reward: { path: 'rewards/attack.ts', source: rewardFile() } }, { timeoutMs: 5000, memoryMb: 96 }, ws);
    hosts.push(host);
    for (let i = 0; i < 2; i++) {
      const err = await host.reward(summary).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).toMatch(/^rewards\/attack\.ts(:\d+:\d+)?: the attack ended with: held \| held \| held$/);
      await expectNothingHappened(err?.message ?? '');
    }
    const t = await tryReward({ source: rewardFile(), path: 'rewards/attack.ts', summary });
    expect(t.ok).toBe(false);
    expect(t.error?.path).toBe('rewards/attack.ts');
    expect(t.error?.message).toMatch(/the attack ended with: held \| held \| held/);
    await expectNothingHappened(t.error?.message ?? '');
  }, 120_000);
});

describe('the operating-system layer under the JavaScript barriers', () => {
  it('code holding the sandbox process itself cannot run programs, start workers, read outside the workspace, write or connect', async () => {
    const cmd = sandboxCommand({ timeoutMs: 5000, memoryMb: 64 }, ws, await sandboxFiles());
    const script = `
      const out = [];
      const t = (name, f) => { try { f(); out.push(name + ':ALLOWED'); } catch (e) { out.push(name + ':' + (e.code || 'refused')); } };
      t('exec', () => require('child_process').execSync('touch ${join(dir, 'ran')}'));
      t('spawn', () => require('child_process').spawnSync('true').error && (() => { throw require('child_process').spawnSync('true').error; })());
      t('worker', () => new (require('worker_threads').Worker)('1', { eval: true }));
      t('read-outside', () => require('fs').readFileSync('${join(dir, 'secret.txt')}'));
      t('read-inside', () => require('fs').readFileSync('${join(ws, 'data', 'ok.txt')}'));
      t('write', () => require('fs').writeFileSync('${join(dir, 'wrote')}', 'x'));
      t('write-ws', () => require('fs').writeFileSync('${join(ws, 'wrote')}', 'x'));
      t('addon', () => process.dlopen({ exports: {} }, '/nonexistent.node'));
      t('binding', () => process.binding('fs'));
      if (${JSON.stringify(cmd.network)} === 'none') {
        const s = require('net').connect(${port}, '127.0.0.1');
        s.on('connect', () => { out.push('net:CONNECTED'); done(); });
        s.on('error', (e) => { out.push('net:' + e.code); done(); });
      } else done();
      function done() { console.log(JSON.stringify({ out, network: ${JSON.stringify(cmd.network)} })); process.exit(0); }
    `;
    // The sandbox's own command line, with this probe in place of its entry file (the last argument).
    const args = [...cmd.args.slice(0, -1), '-e', script];
    const child = spawn(cmd.command, args, { env: cmd.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
    await new Promise((r) => child.once('exit', r));
    const { out } = JSON.parse(stdout.trim().split('\n').pop()!) as { out: string[] };
    const got = Object.fromEntries(out.map((s) => s.split(':') as [string, string]));
    expect(got.exec).toBe('ERR_ACCESS_DENIED');
    expect(got.worker).toBe('ERR_ACCESS_DENIED');
    expect(got['read-outside']).toBe('ERR_ACCESS_DENIED');
    expect(got['read-inside']).toBe('ALLOWED');
    expect(got.write).toBe('ERR_ACCESS_DENIED');
    expect(got['write-ws']).toBe('ERR_ACCESS_DENIED');
    expect(got.addon).toBe('ERR_DLOPEN_DISABLED');
    expect(got.binding).toBe('ERR_ACCESS_DENIED');
    // Node 22/24's permission model has no network rule; on Linux the sandbox runs in a network
    // namespace of its own when the system allows it (the case here), and nothing connects.
    if (cmd.network === 'none') expect(got.net).toMatch(/^E[A-Z]+$/);
    await expectNothingHappened('');
  }, 60_000);
});

const FIXTURES = join(__dirname, '..', '..', 'fixtures', 'attacks');
const fixture = (rel: string) => ({ path: rel.split('/').slice(1).join('/'), source: readFileSync(join(FIXTURES, rel), 'utf8') });

describe("issue 37's reproductions (attackers' files in tests/fixtures/attacks)", () => {
  it.each(['quickjs', 'process'] as const)(
    'the Promise.prototype.finally escape finds nothing to climb (engine %s)',
    async (engine) => {
      const host = await SandboxHost.open({ tools: [fixture('finally-escape/tools/escape.ts')] }, { timeoutMs: 5000, memoryMb: 96 }, ws, { engine });
      hosts.push(host);
      for (let i = 0; i < 2; i++) {
        const out = await runCall(host.tools, { name: 'escape', args: {} });
        expect(out.success).toBe(true);
        expect(out.result).toMatch(/leaks: held$/);
        // QuickJS: the functions the guest collected are its own (no host function is handed to a guest promise).
        if (engine === 'quickjs') expect(out.result).not.toMatch(/PROCESS|HOOKS|FS:|NET|READ/);
      }
      await expectNothingHappened('');
    },
    60_000,
  );

  it('an environment folder with a link that leaves it is refused, naming the link; the try-it too', async () => {
    const env = mkdtempSync(join(tmpdir(), 'arbor-linked-'));
    cpSync(join(FIXTURES, 'symlink-escape'), env, { recursive: true });
    symlinkSync('../../../../../../..', join(env, 'up'));
    try {
      const open = SandboxHost.open({ tools: [fixture('symlink-escape/tools/read.ts')] }, undefined, env);
      await expect(open).rejects.toThrow(/holds a link that leaves it: up -> \.\.\/\.\.\/\.\.\/\.\.\/\.\.\/\.\.\/\.\./);
      const t = await tryTool({ ...fixture('symlink-escape/tools/read.ts'), args: { path: 'up/etc/passwd' }, workspace: env });
      expect(t.ok).toBe(false);
      expect(t.error?.message).toMatch(/link that leaves it: up ->/);
      // A dangling link that would lead out once its target exists is refused as well; one inside is not.
      rmSync(join(env, 'up'));
      symlinkSync(join(dir, 'not-yet'), join(env, 'later'));
      await expect(SandboxHost.open({ tools: [fixture('symlink-escape/tools/read.ts')] }, undefined, env)).rejects.toThrow(/later ->/);
      rmSync(join(env, 'later'));
      symlinkSync('tools', join(env, 'inner'));
      const host = await SandboxHost.open({ tools: [fixture('symlink-escape/tools/read.ts')] }, undefined, env);
      hosts.push(host);
      expect((await runCall(host.tools, { name: 'read', args: { path: 'inner/read.ts' } })).result).toContain('Issue 37, item 2');
    } finally {
      rmSync(env, { recursive: true, force: true });
    }
  }, 60_000);

  it.each(['quickjs', 'process'] as const)(
    '300,000 console lines in one call do not crash the engine: kept to a cap with a note (engine %s)',
    async (engine) => {
      const host = await SandboxHost.open({ tools: [fixture('logs-300k/tools/spam.ts')] }, { timeoutMs: 20_000, memoryMb: 96 }, ws, { engine });
      hosts.push(host);
      const out = await runCall(host.tools, { name: 'spam', args: {} }, { timeoutMs: 30_000, maxArgChars: 100, maxResultChars: 100 });
      expect(out.result).toBe('logged');
      const logs = host.takeLogs();
      expect(logs.length).toBeLessThanOrEqual(1001);
      expect(logs.at(-1)).toMatch(/more log lines .*dropped: the limit is 1000 lines/);
      expect(host.restarts).toBe(0);
      expect((await runCall(host.tools, { name: 'spam', args: {} }, { timeoutMs: 30_000, maxArgChars: 100, maxResultChars: 100 })).result).toBe('logged');
    },
    120_000,
  );

  it('a thrown value whose message loops when read is refused within its own limit (once: the sandbox spun until its 60 s start limit)', async () => {
    const t = await tryTool({ ...fixture('hostile-error/tools/hostile.ts'), args: {}, workspace: ws }, { timeoutMs: 1000, memoryMb: 64 });
    expect(t.ok).toBe(false);
    expect(t.error?.message).toMatch(/tools\/hostile\.ts: threw a value whose message could not be read \(reading it ran past 1000 ms\)/);
  }, 60_000);

  it('one long builtin the engine cannot interrupt is stopped by the host 2 s after the call limit (once: it ran on, the host counting from a message it had not sent)', async () => {
    const host = await SandboxHost.open({ tools: [fixture('builtin-stall/tools/stall.ts')] }, { timeoutMs: 1000, memoryMb: 128 }, ws);
    hosts.push(host);
    const out = await runCall(host.tools, { name: 'stall', args: {} }, { timeoutMs: 100_000, maxArgChars: 100, maxResultChars: 100 });
    expect(out.success).toBe(false);
    // The host's backstop (it kills and replaces the process), not the queue limit or the engine after the sort.
    expect(out.error).toMatch(/tools\/stall\.ts: timed out after 1000 ms \(an endless loop\?\); the sandbox was restarted/);
    expect(host.restarts).toBe(1);
  }, 120_000);

  it("a tool schema's pattern cannot hold the engine: arguments are checked on a linear-time engine (once: 40 characters backtracked for hours)", async () => {
    const host = await SandboxHost.open({ tools: [fixture('schema-redos/tools/redos.ts')] }, { timeoutMs: 5000, memoryMb: 64 }, ws);
    hosts.push(host);
    const evil = `${'a'.repeat(40)}!`;
    const bad = await runCall(host.tools, { name: 'redos', args: { id: evil } });
    expect(bad.success).toBe(false);
    expect(bad.error).toMatch(/invalid arguments for "redos": \/id must match pattern "\^\(a\+\)\+\$"/);
    const keys = await runCall(host.tools, { name: 'redos', args: { id: 'aaa', [`${'b'.repeat(40)}!`]: 1 } });
    expect(keys.success).toBe(true);
    const badKey = await runCall(host.tools, { name: 'redos', args: { id: 'aaa', bbbb: 1 } });
    expect(badKey.error).toMatch(/\/bbbb must be string/);
    expect((await runCall(host.tools, { name: 'redos', args: { id: 'aaaa' } })).result).toBe('id aaaa');
  }, 60_000);

  it('results, logs and error texts leave QuickJS cut to size with a note; deep recursion is an error, not a crash', async () => {
    const src = `export const big = { name: 'big', description: '', parameters: { type: 'object', properties: { how: { type: 'string' } } },
  execute(a: { how: string }) {
    if (a.how === 'result') return { content: 'x'.repeat(5_000_000), success: true, metadata: { blob: 'y'.repeat(200_000) } };
    if (a.how === 'log') { console.log('z'.repeat(100_000)); return { content: 'ok', success: true }; }
    if (a.how === 'error') throw new Error('e'.repeat(100_000));
    const r = (n: number): number => r(n + 1) + 1;
    return { content: String(r(0)), success: true };
  } };`;
    const host = await SandboxHost.open({ tools: [{ path: 'tools/big.ts', source: src }] }, { timeoutMs: 5000, memoryMb: 96 }, ws);
    hosts.push(host);
    const limits = { timeoutMs: 10_000, maxArgChars: 100, maxResultChars: 10_000_000 };
    const r = await runCall(host.tools, { name: 'big', args: { how: 'result' } }, limits);
    expect(r.result.length).toBeLessThan(1024 * 1024 + 200);
    expect(r.result).toMatch(/…\[result truncated: 5000000 characters, the limit is 1048576\]$/);
    expect(JSON.stringify(r.metadata)).toMatch(/metadata of \d+ characters dropped/);
    await runCall(host.tools, { name: 'big', args: { how: 'log' } }, limits);
    const [line] = host.takeLogs();
    expect(line!.length).toBeLessThan(8192 + 200);
    expect(line).toMatch(/…\[log line truncated: 100000 characters, the limit is 8192\]$/);
    const e = await runCall(host.tools, { name: 'big', args: { how: 'error' } }, limits);
    expect(e.error!.length).toBeLessThan(16_384 + 400);
    expect(e.error).toMatch(/error message truncated/);
    const deep = await runCall(host.tools, { name: 'big', args: { how: 'deep' } }, limits);
    expect(deep.error).toMatch(/stack overflow/);
    expect(host.restarts).toBe(0);
  }, 60_000);

  it('loops in a promise chain, a .then callback or a timer stop at the call limit; the sandbox keeps serving', async () => {
    const src = `export const t = { name: 'loop', description: '', parameters: { type: 'object', properties: { how: { type: 'string' } } },
  execute(a: { how: string }) {
    if (a.how === 'chain') { const f = (): unknown => Promise.resolve().then(f); f(); return new Promise(() => {}); }
    if (a.how === 'then') return Promise.resolve().then(() => { for (;;) {} });
    if (a.how === 'timer') { setTimeout(() => { for (;;) {} }, 1); return new Promise(() => {}); }
    return { content: 'fine', success: true };
  } };`;
    const host = await SandboxHost.open({ tools: [{ path: 'tools/loop.ts', source: src }] }, { timeoutMs: 600, memoryMb: 64 }, ws);
    hosts.push(host);
    const limits = { timeoutMs: 20_000, maxArgChars: 100, maxResultChars: 1000 };
    for (const how of ['chain', 'then', 'timer']) {
      const r = await runCall(host.tools, { name: 'loop', args: { how } }, limits);
      expect(r.success, how).toBe(false);
      expect(r.error, how).toMatch(/tools\/loop\.ts(:\d+:\d+)?: timed out after 600 ms/);
      expect((await runCall(host.tools, { name: 'loop', args: { how: 'ok' } }, limits)).result).toBe('fine');
    }
  }, 120_000);
});
