/**
 * Metric sinks for the loop. The app writes to the SQLite store (engine/store); runs without a
 * store (the CLI with --no-store, tests) append one JSON line per step to <runDir>/metrics.jsonl.
 * Each line is written with a single append, so a kill -9 leaves at most one torn last line,
 * which readers skip and `truncateAfter` removes.
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SinkPort } from '../train/loop';

export interface MetricRow {
  step: number;
  time: number;
  values: Record<string, number>;
}

export function readMetricsJsonl(file: string): MetricRow[] {
  if (!existsSync(file)) return [];
  const rows: MetricRow[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      rows.push(JSON.parse(line) as MetricRow);
    } catch {
      // torn final line from a killed process
    }
  }
  return rows;
}

export class JsonlSink implements SinkPort {
  readonly file: string;
  constructor(runDir: string) {
    this.file = join(runDir, 'metrics.jsonl');
  }
  metrics(step: number, values: Record<string, number>): void {
    appendFileSync(this.file, JSON.stringify({ step, time: Date.now(), values } satisfies MetricRow) + '\n');
  }
  truncateAfter(step: number): void {
    // sft/* rows (the warm start's own step axis) stay, as in the store.
    const keep = readMetricsJsonl(this.file).filter((r) => r.step <= step || Object.keys(r.values).every((k) => k.startsWith('sft/')));
    writeFileSync(this.file, keep.map((r) => JSON.stringify(r) + '\n').join(''));
  }
}

/** Fan one loop's output out to several sinks (e.g. the store and a progress bar). */
export function teeSink(...sinks: SinkPort[]): SinkPort {
  return {
    async metrics(step, values) {
      for (const s of sinks) await s.metrics(step, values);
    },
    async trajectories(step, eps, adv, extra) {
      for (const s of sinks) await s.trajectories?.(step, eps, adv, extra);
    },
    async truncateAfter(step) {
      for (const s of sinks) await s.truncateAfter(step);
    },
    event(kind, payload) {
      for (const s of sinks) s.event?.(kind, payload);
    },
  };
}

/** A run folder's metrics.jsonl, teed into the run's workspace record when it has one. */
export function runSink(dir: string, rec?: { sink: SinkPort }): SinkPort {
  return rec ? teeSink(new JsonlSink(dir), rec.sink) : new JsonlSink(dir);
}

/** A run's record in the workspace store, as the code that runs it ends it. */
export interface RunHandle {
  finish(status: 'completed' | 'stopped' | 'failed', error?: string): void;
}

/**
 * Run `body` for a recorded run (CLI jobs, the demo's and the ablation's phases): when it throws,
 * the record (if any) is finished as failed with the error's message before the error goes on;
 * `cleanup` (interrupt handlers, the task session) runs either way.
 */
export async function recordedRun<T>(rec: RunHandle | undefined, body: () => Promise<T>, cleanup?: () => unknown): Promise<T> {
  try {
    return await body();
  } catch (e) {
    rec?.finish('failed', e instanceof Error ? e.message : String(e));
    throw e;
  } finally {
    await cleanup?.();
  }
}

/** Tool calls of these episodes that the sandbox cut off at its memory limit: [tool name, error]. */
export function memoryLimitHits(episodes: { toolCallsAt?: { calls: unknown[] }[] }[]): { name: string; error: string }[] {
  const out: { name: string; error: string }[] = [];
  for (const e of episodes)
    for (const r of e.toolCallsAt ?? [])
      for (const c of r.calls as { name?: string; error?: string }[])
        if (c.error && /sandbox memory limit/.test(c.error)) out.push({ name: c.name ?? '?', error: c.error });
  return out;
}

/**
 * Watches a run's tool calls for ones the sandbox killed at its memory limit (contained, the
 * model saw an error observation), so the run says so instead of finishing silently: `onHit` is
 * called per step with hits, `count` totals them.
 */
export function memoryLimitWatcher(onHit: (step: number, hits: { name: string; error: string }[]) => void): SinkPort & { count(): number } {
  let total = 0;
  return {
    metrics() {},
    truncateAfter() {},
    trajectories(step, episodes) {
      const hits = memoryLimitHits(episodes);
      if (!hits.length) return;
      total += hits.length;
      onHit(step, hits);
    },
    count: () => total,
  };
}
