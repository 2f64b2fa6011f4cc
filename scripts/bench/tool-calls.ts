/**
 * Per-call cost of a user tool under each isolation, for bench:rollout's tool-call rows (and
 * `npm run bench:tool-call` alone). The same small tool (a string transform) is called through
 * runCall, the path a rollout takes:
 *  - in-process: the tool object itself (no isolation; what built-in tools cost);
 *  - worker+vm: a worker thread running the tool in a vm context (the same vm layer the sandbox
 *    process uses), a start and a reply message per call: the isolation before issue #25, kept
 *    here as the baseline (it did not hold);
 *  - sandbox V8: SandboxHost with `environment.sandbox: process` (the tool in a vm context of
 *    the sandbox process, under the permission model, batched IPC): the boundary before issue 37;
 *  - sandbox QuickJS: SandboxHost's default since issue 37 (the same process, the tool in
 *    QuickJS compiled to WebAssembly, plain data across three host calls) (engine/env/sandbox-host.ts).
 * Two patterns: one call at a time, and 64 calls in flight (a rollout batch's tool turns).
 */
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { compile } from '../../engine/env/sandbox-compile';
import { SandboxHost } from '../../engine/env/sandbox-host';
import { runCall, type Tool } from '../../engine/env/tool';

const SOURCE = `export const echo = {
  name: 'echo',
  description: 'upper-cases its text',
  parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  execute(args: { text: string }) { return { content: args.text.toUpperCase(), success: true }; },
};
`;

export interface ToolCallRow {
  isolation: 'in-process' | 'worker+vm' | 'sandbox V8' | 'sandbox QuickJS';
  inFlight: number;
  calls: number;
  msPerCall: number;
}

/** The pre-#25 path: one worker thread, the tool in a vm context (./tool-call-worker.ts), a message per call. */
const BOOTSTRAP = new URL('../../engine/worker-bootstrap.mjs', import.meta.url);
const WORKER = fileURLToPath(new URL('./tool-call-worker.ts', import.meta.url));

async function workerVmTool(code: string): Promise<{ tool: Tool; close: () => Promise<number> }> {
  const w = new Worker(BOOTSTRAP, { workerData: { __module: WORKER, code } });
  await new Promise((r) => w.once('message', r));
  const pending = new Map<number, (r: { content: string; success: boolean }) => void>();
  let seq = 0;
  w.on('message', (m: { id: number; r?: { content: string; success: boolean } }) => {
    if (!m.r) return;
    pending.get(m.id)?.(m.r);
    pending.delete(m.id);
  });
  const tool: Tool = {
    name: 'echo',
    description: '',
    parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    execute: (args) =>
      new Promise((resolve) => {
        const id = ++seq;
        pending.set(id, resolve);
        w.postMessage({ id, args });
      }),
  };
  return { tool, close: () => w.terminate() };
}

async function time(tools: Map<string, Tool>, calls: number, inFlight: number): Promise<number> {
  const one = (i: number) => runCall(tools, { name: 'echo', args: { text: `call ${i}` } });
  for (let i = 0; i < 50; i++) await one(i); // warm-up
  const t0 = performance.now();
  for (let done = 0; done < calls; done += inFlight) {
    const outs = await Promise.all(Array.from({ length: Math.min(inFlight, calls - done) }, (_, k) => one(done + k)));
    if (!outs.every((o) => o.success)) throw new Error(`a tool call failed: ${outs.find((o) => !o.success)?.error}`);
  }
  return (performance.now() - t0) / calls;
}

/** Median ms per call of each isolation and pattern over `reps` repetitions. */
export async function measureToolCalls(opts: { calls?: number; reps?: number } = {}): Promise<ToolCallRow[]> {
  const calls = opts.calls ?? 1000;
  const reps = opts.reps ?? 3;
  const c = await compile(SOURCE, 'tools/echo.ts');
  if ('error' in c) throw new Error(c.error!.message);
  const inProcess: Tool = {
    name: 'echo',
    description: '',
    parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    execute: (args) => ({ content: String(args.text).toUpperCase(), success: true }),
  };
  const wv = await workerVmTool(c.code);
  const v8 = await SandboxHost.open({ tools: [{ path: 'tools/echo.ts', source: SOURCE }] }, undefined, undefined, { engine: 'process' });
  const host = await SandboxHost.open({ tools: [{ path: 'tools/echo.ts', source: SOURCE }] });
  const sets: [ToolCallRow['isolation'], Map<string, Tool>][] = [
    ['in-process', new Map([['echo', inProcess]])],
    ['worker+vm', new Map([['echo', wv.tool]])],
    ['sandbox V8', v8.tools],
    ['sandbox QuickJS', host.tools],
  ];
  const rows: ToolCallRow[] = [];
  try {
    for (const inFlight of [1, 64])
      for (const [isolation, tools] of sets) {
        const ms: number[] = [];
        for (let r = 0; r < reps; r++) ms.push(await time(tools, calls, inFlight));
        ms.sort((a, b) => a - b);
        rows.push({ isolation, inFlight, calls, msPerCall: ms[Math.floor(ms.length / 2)]! });
      }
  } finally {
    await wv.close();
    await v8.close();
    await host.close();
  }
  return rows;
}

export function printToolCallRows(rows: ToolCallRow[]): void {
  console.log(
    '\nTool calls through runCall, ms per call (median of repetitions): in-process, worker+vm (before #25), the sandbox process with V8 vm contexts (before #37) and with QuickJS (now)',
  );
  console.log('isolation        in flight  calls  ms/call  vs sandbox V8');
  for (const r of rows) {
    const base = rows.find((b) => b.isolation === 'sandbox V8' && b.inFlight === r.inFlight)!;
    console.log(
      `${r.isolation.padEnd(16)} ${String(r.inFlight).padStart(9)} ${String(r.calls).padStart(6)}  ${r.msPerCall.toFixed(3).padStart(7)}  ${(r.msPerCall / base.msPerCall).toFixed(2).padStart(12)}×`,
    );
  }
}
