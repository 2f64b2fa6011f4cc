/**
 * Import of verl / Agent-R1 rollout dumps and export of runs.
 * A verl dump folder holds `{step}.jsonl` files, one object per sample with `input`, `output`,
 * `score` (and often `gts`, `step` and extra reward keys). Samples with the same input at a step
 * form a group.
 */
import { closeSync, createReadStream, openSync, readdirSync, writeFileSync, writeSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Store, TrajectoryRecord } from './store';

export async function importVerlDump(store: Store, dir: string, opts: { name?: string; onProgress?: (file: string, n: number, filesDone: number, filesTotal: number) => void } = {}): Promise<{ runId: string; trajectories: number; steps: number[] }> {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => /^\d+\.jsonl$/.test(f)).sort((a, b) => parseInt(a) - parseInt(b));
  } catch (e) {
    throw new Error(`${dir}: cannot read the dump folder (${(e as Error).message})`);
  }
  if (files.length === 0) throw new Error(`${dir}: no {step}.jsonl files found (a verl rollout dump has files like 1.jsonl, 2.jsonl)`);
  const runId = store.createRun({ name: opts.name ?? `verl:${basename(dir)}`, template: 'import-verl', config: { source: dir }, tags: ['imported', 'verl'], status: 'running' });
  try {
    const r = await importFiles(store, runId, dir, files, opts.onProgress);
    store.setStatus(runId, 'completed');
    return r;
  } catch (e) {
    // A bad line leaves no half-imported run behind.
    store.deleteRun(runId);
    throw e;
  }
}

async function importFiles(store: Store, runId: string, dir: string, files: string[], onProgress?: (file: string, n: number, filesDone: number, filesTotal: number) => void): Promise<{ runId: string; trajectories: number; steps: number[] }> {
  let count = 0;
  const steps: number[] = [];
  for (const f of files) {
    const fileStep = parseInt(f);
    const groups = new Map<string, number>();
    const samples = new Map<number, number>();
    const batch: TrajectoryRecord[] = [];
    const rl = createInterface({ input: createReadStream(join(dir, f)), crlfDelay: Infinity });
    let line = 0;
    for await (const text of rl) {
      line++;
      if (!text.trim()) continue;
      let o: Record<string, unknown>;
      try {
        o = JSON.parse(text);
      } catch (e) {
        throw new Error(`${join(dir, f)}:${line}: invalid JSON (${(e as Error).message})`);
      }
      for (const k of ['input', 'output', 'score'] as const) {
        if (o[k] === undefined) throw new Error(`${join(dir, f)}:${line}: missing field "${k}"`);
      }
      const score = Number(o.score);
      if (!Number.isFinite(score)) throw new Error(`${join(dir, f)}:${line}: field "score" must be a number, got ${JSON.stringify(o.score)}`);
      const input = String(o.input);
      if (!groups.has(input)) groups.set(input, groups.size);
      const g = groups.get(input)!;
      const s = samples.get(g) ?? 0;
      samples.set(g, s + 1);
      const components: Record<string, number> = {};
      for (const [k, v] of Object.entries(o)) if (!['input', 'output', 'score', 'step', 'gts'].includes(k) && typeof v === 'number') components[k] = v;
      batch.push({
        step: typeof o.step === 'number' ? o.step : fileStep, group: g, sample: s, task: input, prompt: input, reward: score,
        outcome: { components, gts: o.gts ?? null },
        turns: [{ role: 'env', text: input }, { role: 'model', text: String(o.output) }],
      });
    }
    store.db.transaction(() => { for (const t of batch) store.writeTrajectory(runId, t); })();
    if (batch.length) {
      const mean = batch.reduce((a, t) => a + t.reward, 0) / batch.length;
      store.writeMetrics(runId, batch[0].step, { 'reward/mean': mean, 'rollout/samples': batch.length });
      steps.push(batch[0].step);
    }
    count += batch.length;
    onProgress?.(f, count, files.indexOf(f) + 1, files.length);
  }
  return { runId, trajectories: count, steps };
}

function csvCell(v: unknown): string {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** A run's metrics as CSV: step, time, then one column per metric key. */
export function exportMetricsCsv(store: Store, runId: string, file: string): number {
  store.getRun(runId);
  const rows = store.db.prepare('SELECT key, step, time, value FROM metrics WHERE run_id = ? ORDER BY step, key').all(runId) as { key: string; step: number; time: number; value: number | null }[];
  const keys = [...new Set(rows.map((r) => r.key))].sort();
  const bySteps = new Map<number, { time: number; vals: Record<string, number | null> }>();
  for (const r of rows) {
    let e = bySteps.get(r.step);
    if (!e) bySteps.set(r.step, (e = { time: r.time, vals: {} }));
    e.vals[r.key] = r.value;
  }
  const lines = [['step', 'time', ...keys].map(csvCell).join(',')];
  for (const [step, e] of bySteps) lines.push([step, e.time, ...keys.map((k) => e.vals[k])].map(csvCell).join(','));
  writeFileSync(file, lines.join('\n') + '\n');
  return bySteps.size;
}

/** A run's trajectories as JSONL, one trajectory (with its turns) per line. */
export function exportTrajectoriesJsonl(store: Store, runId: string, file: string, onProgress?: (done: number, total: number) => void): number {
  store.getRun(runId);
  const ids = store.searchTrajectories({ runId, limit: 1_000_000 }).map((t) => t.id);
  const fd = openSync(file, 'w');
  try {
    ids.forEach((id, i) => {
      writeSync(fd, JSON.stringify(store.getTrajectory(id)) + '\n');
      if ((i + 1) % 200 === 0 || i + 1 === ids.length) onProgress?.(i + 1, ids.length);
    });
  } finally {
    closeSync(fd);
  }
  return ids.length;
}
