/**
 * The sandbox's compile step and its error mapping, shared by the "try it" path (./sandbox.ts)
 * and the run's sandbox host (./sandbox-host.ts): TypeScript → CommonJS with esbuild (source map
 * kept), and a stack's positions mapped back to the user's TypeScript line and column.
 */
import { transform } from 'esbuild';
import { SourceMapConsumer, type RawSourceMap } from 'source-map-js';

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
