/**
 * The user-code sandbox behind the editor's "try it": a tool file run with given arguments, or
 * a reward file scoring a stored trajectory. The TypeScript is compiled with esbuild (source map
 * kept), then run in a worker thread (./sandbox-worker.ts) inside a fresh vm context, with a
 * heap cap and a wall-clock limit that terminates the worker. Errors come back with the user's
 * file path and the line/column in their TypeScript source.
 */
import { transform } from 'esbuild';
import { SourceMapConsumer, type RawSourceMap } from 'source-map-js';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import type { EpisodeSummary } from './rewards';
import type { SandboxJob, SandboxReply } from './sandbox-worker';

export interface SandboxLimits {
  /** Wall-clock limit for the whole run (module load + call), ms. */
  timeoutMs: number;
  /** Heap limit of the worker, MB. */
  memoryMb: number;
}

export const DEFAULT_SANDBOX_LIMITS: SandboxLimits = { timeoutMs: 5000, memoryMb: 96 };

export interface TryResult {
  ok: boolean;
  value?: unknown;
  error?: { message: string; path: string; line?: number; column?: number; stack?: string };
  logs: string[];
  ms: number;
}

const WORKER = fileURLToPath(new URL('./sandbox-worker.ts', import.meta.url));
const BOOTSTRAP = new URL('../worker-bootstrap.mjs', import.meta.url);

export async function compile(source: string, path: string): Promise<{ code: string; map: RawSourceMap } | { error: TryResult['error'] }> {
  try {
    const r = await transform(source, { loader: 'ts', format: 'cjs', target: 'es2022', sourcemap: 'external', sourcefile: path });
    return { code: r.code, map: JSON.parse(r.map) as RawSourceMap };
  } catch (e) {
    const first = (e as { errors?: { text: string; location?: { line: number; column: number } }[] }).errors?.[0];
    if (!first) throw e;
    return { error: { message: `${path}: ${first.text}`, path, line: first.location?.line, column: first.location ? first.location.column + 1 : undefined } };
  }
}

/** The stack with every frame in the user's file rewritten to their TypeScript line and column. */
export function mapStack(stack: string | undefined, path: string, map: RawSourceMap): string | undefined {
  if (!stack) return stack;
  const esc = path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const consumer = new SourceMapConsumer(map);
  // Frames are path:line:column; V8's header line of a thrown error is path:line alone.
  return stack.replace(new RegExp(`${esc}:(\\d+)(?::(\\d+))?`, 'g'), (whole, l: string, c: string | undefined) => {
    const pos = c
      ? consumer.originalPositionFor({ line: Number(l), column: Number(c) - 1 })
      : consumer.originalPositionFor({ line: Number(l), column: 0, bias: SourceMapConsumer.LEAST_UPPER_BOUND });
    if (!pos.line) return whole;
    return c ? `${path}:${pos.line}:${(pos.column ?? 0) + 1}` : `${path}:${pos.line}`;
  });
}

/** The first stack frame in the user's file, mapped back to their TypeScript line and column. */
export function locate(stack: string | undefined, path: string, map: RawSourceMap): { line?: number; column?: number } {
  if (!stack) return {};
  const esc = path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(`${esc}:(\\d+):(\\d+)`).exec(stack);
  if (!m) return {};
  const pos = new SourceMapConsumer(map).originalPositionFor({ line: Number(m[1]), column: Number(m[2]) - 1 });
  return pos.line ? { line: pos.line, column: (pos.column ?? 0) + 1 } : {};
}

async function run(source: string, path: string, job: Omit<SandboxJob, 'code' | 'path' | 'callTimeoutMs'>, limits: SandboxLimits): Promise<TryResult> {
  const t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  const c = await compile(source, path);
  if ('error' in c) return { ok: false, error: c.error, logs: [], ms: ms() };
  const full: SandboxJob = { ...job, code: c.code, path, callTimeoutMs: limits.timeoutMs };
  const worker = new Worker(BOOTSTRAP, {
    workerData: { __module: WORKER, job: full },
    resourceLimits: { maxOldGenerationSizeMb: limits.memoryMb, maxYoungGenerationSizeMb: 16 },
    stdout: true,
    stderr: true,
  });
  const reply = await new Promise<SandboxReply | { killed: string }>((resolve) => {
    const kill = (why: string) => () => {
      void worker.terminate();
      resolve({ killed: why });
    };
    // Loading the worker's modules may take a few seconds on a busy machine (generous limit);
    // the user's time limit starts when it reports ready.
    let timer = setTimeout(kill(`${path}: the sandbox did not start within 60 s`), 60_000);
    worker.on('message', (m: SandboxReply | { ready: true }) => {
      clearTimeout(timer);
      if ('ready' in m)
        timer = setTimeout(kill(`${path}: timed out after ${limits.timeoutMs} ms (an endless loop?); the sandbox was stopped`), limits.timeoutMs + 250);
      else resolve(m);
    });
    worker.once('error', (e: Error & { code?: string }) => {
      clearTimeout(timer);
      resolve({
        killed: e.code === 'ERR_WORKER_OUT_OF_MEMORY' ? `${path}: exceeded the sandbox memory limit (${limits.memoryMb} MB)` : `${path}: ${e.message}`,
      });
    });
    worker.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ killed: `${path}: the sandbox exited (code ${code}) without a result` });
    });
  });
  void worker.terminate();
  if ('killed' in reply) return { ok: false, error: { message: reply.killed, path }, logs: [], ms: ms() };
  if (reply.ok) return { ok: true, value: reply.value, logs: reply.logs, ms: ms() };
  const where = locate(reply.error?.stack, path, c.map);
  return {
    ok: false,
    value: reply.value,
    error: { message: reply.error?.message ?? 'failed', path, stack: mapStack(reply.error?.stack, path, c.map), ...where },
    logs: reply.logs,
    ms: ms(),
  };
}

/** Run the tool exported by `source` with `args`, as a model's call would run (validation, timeout). */
export function tryTool(
  req: { source: string; path?: string; tool?: string; args: unknown; workspace?: string },
  limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS,
): Promise<TryResult> {
  return run(req.source, req.path ?? 'tool.ts', { kind: 'tool', tool: req.tool, args: req.args, workspace: req.workspace }, limits);
}

/** Score an episode summary with the reward function exported by `source`. */
export function tryReward(req: { source: string; path?: string; summary: EpisodeSummary }, limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS): Promise<TryResult> {
  return run(req.source, req.path ?? 'reward.ts', { kind: 'reward', summary: req.summary }, limits);
}
