/**
 * Import of verl / Agent-R1 rollout dumps and export of runs.
 *
 * Two kinds of verl lines are read, per line, from a dump folder of `{step}.jsonl` files or from
 * one `.jsonl` file:
 *  - the decoded-text rollout dump (`trainer.rollout_data_dir`): `input`, `output`, `score` (and
 *    often `gts`, `step` and extra reward keys); samples with the same input at a step form a group;
 *  - agent-loop outputs with token ids (verl's AgentLoopOutput per sample): `prompt_ids`,
 *    `response_ids`, `response_mask` (1 = model token, 0 = tool/observation token),
 *    `response_logprobs` (optional), `reward_score` (or `score`), `num_turns`, optional `step`,
 *    `uid` (the GRPO group; default: the same prompt ids) and numeric extras. The response is
 *    split at mask changes into model and tool turns with their ids, logprobs and loss masks, so
 *    the trajectory replays token by token (heat map included). Decoding the ids needs the
 *    model's tokenizer (`decode`, from `--tokenizer <model folder>`).
 */
import { closeSync, createReadStream, openSync, readdirSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Store, TrajectoryRecord, TurnRecord } from './store';

export interface VerlImportOptions {
  name?: string;
  /** Token ids → text (the model's tokenizer); needed for agent-loop lines with token ids. */
  decode?: (ids: number[]) => string;
  onProgress?: (file: string, n: number, filesDone: number, filesTotal: number) => void;
}

export async function importVerlDump(
  store: Store,
  dir: string,
  opts: VerlImportOptions = {},
): Promise<{ runId: string; trajectories: number; steps: number[] }> {
  let files: string[];
  let base = dir;
  try {
    if (statSync(dir).isFile()) {
      if (!dir.endsWith('.jsonl')) throw new Error('a single file must be .jsonl (agent-loop outputs or a rollout dump)');
      base = dirname(dir);
      files = [basename(dir)];
    } else
      files = readdirSync(dir)
        .filter((f) => /^\d+\.jsonl$/.test(f))
        .sort((a, b) => parseInt(a) - parseInt(b));
  } catch (e) {
    throw new Error(`${dir}: cannot read the dump (${(e as Error).message})`);
  }
  if (files.length === 0) throw new Error(`${dir}: no {step}.jsonl files found (a verl rollout dump has files like 1.jsonl, 2.jsonl)`);
  const runId = store.createRun({
    name: opts.name ?? `verl:${basename(dir)}`,
    template: 'import-verl',
    config: { source: dir },
    tags: ['imported', 'verl'],
    status: 'running',
  });
  try {
    const r = await importFiles(store, runId, base, files, opts);
    store.setStatus(runId, 'completed');
    return r;
  } catch (e) {
    // A bad line leaves no half-imported run behind.
    store.deleteRun(runId);
    throw e;
  }
}

const TEXT_KEYS = ['input', 'output', 'score', 'step', 'gts'];
const TOKEN_KEYS = [
  'prompt_ids',
  'response_ids',
  'response_mask',
  'response_logprobs',
  'reward_score',
  'score',
  'num_turns',
  'step',
  'uid',
  'metrics',
  'input',
  'output',
  'gts',
];

function intArray(o: Record<string, unknown>, k: string, where: string): number[] {
  const v = o[k];
  if (!Array.isArray(v) || !v.every((x) => Number.isInteger(x))) throw new Error(`${where}: field "${k}" must be a list of integers`);
  return v as number[];
}

/** One agent-loop output line → a trajectory (prompt turn, then model / tool turns by response_mask). */
function tokenRecord(
  o: Record<string, unknown>,
  where: string,
  decode: ((ids: number[]) => string) | undefined,
): { rec: Omit<TrajectoryRecord, 'step' | 'group' | 'sample'>; key: string } {
  if (!decode) throw new Error(`${where}: token ids need the model's tokenizer to decode them (give --tokenizer <model folder>)`);
  const prompt = intArray(o, 'prompt_ids', where);
  const resp = intArray(o, 'response_ids', where);
  const mask = o.response_mask === undefined ? resp.map(() => 1) : intArray(o, 'response_mask', where);
  if (mask.length !== resp.length) throw new Error(`${where}: field "response_mask" has ${mask.length} entries for ${resp.length} response_ids`);
  let lp: number[] | undefined;
  if (o.response_logprobs !== undefined && o.response_logprobs !== null) {
    const v = o.response_logprobs;
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'number')) throw new Error(`${where}: field "response_logprobs" must be a list of numbers`);
    if (v.length !== resp.length) throw new Error(`${where}: field "response_logprobs" has ${v.length} entries for ${resp.length} response_ids`);
    lp = v as number[];
  }
  const score = Number(o.reward_score ?? o.score);
  if (!Number.isFinite(score))
    throw new Error(`${where}: field "reward_score" (or "score") must be a number, got ${JSON.stringify(o.reward_score ?? o.score)}`);
  const tokens = (ids: number[]) => ids.map((t) => decode([t]));
  const promptText = decode(prompt);
  const turns: TurnRecord[] = [{ role: 'env', text: promptText, tokenIds: prompt, tokens: tokens(prompt), lossMask: prompt.map(() => 0) }];
  for (let i = 0; i < resp.length;) {
    const m = mask[i] ? 1 : 0;
    let j = i;
    while (j < resp.length && (mask[j] ? 1 : 0) === m) j++;
    const ids = resp.slice(i, j);
    turns.push({
      role: m ? 'model' : 'tool',
      text: decode(ids),
      tokenIds: ids,
      tokens: tokens(ids),
      lossMask: ids.map(() => m),
      ...(lp ? { logprob: lp.slice(i, j) } : {}),
    });
    i = j;
  }
  const components: Record<string, number> = {};
  for (const [k, v] of Object.entries(o)) if (!TOKEN_KEYS.includes(k) && typeof v === 'number') components[k] = v;
  const key = o.uid !== undefined ? `uid:${String(o.uid)}` : `ids:${prompt.join(',')}`;
  return {
    key,
    rec: {
      task: typeof o.uid === 'string' ? o.uid : undefined,
      prompt: promptText,
      reward: score,
      outcome: { components, numTurns: typeof o.num_turns === 'number' ? o.num_turns : null, gts: o.gts ?? null },
      turns,
    },
  };
}

async function importFiles(
  store: Store,
  runId: string,
  dir: string,
  files: string[],
  opts: VerlImportOptions,
): Promise<{ runId: string; trajectories: number; steps: number[] }> {
  let count = 0;
  const steps: number[] = [];
  for (const f of files) {
    const fileStep = parseInt(f);
    const groups = new Map<string, number>();
    const samples = new Map<string | number, number>();
    const batches: TrajectoryRecord[] = [];
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
      const where = `${join(dir, f)}:${line}`;
      const fileStepOk = Number.isFinite(fileStep);
      if ('response_ids' in o || 'prompt_ids' in o) {
        const { rec, key } = tokenRecord(o, where, opts.decode);
        const step = typeof o.step === 'number' ? o.step : fileStepOk ? fileStep : 0;
        // Groups are numbered within their step.
        const gk = `${step}|${key}`;
        if (!groups.has(gk)) groups.set(gk, [...groups.keys()].filter((k) => k.startsWith(`${step}|`)).length);
        const g = groups.get(gk)!;
        const s = samples.get(gk) ?? 0;
        samples.set(gk, s + 1);
        batches.push({ step, group: g, sample: s, ...rec });
        continue;
      }
      for (const k of ['input', 'output', 'score'] as const) {
        if (o[k] === undefined)
          throw new Error(
            `${where}: missing field "${k}" (a rollout dump line has input, output, score; an agent-loop line has prompt_ids, response_ids, response_mask)`,
          );
      }
      const score = Number(o.score);
      if (!Number.isFinite(score)) throw new Error(`${where}: field "score" must be a number, got ${JSON.stringify(o.score)}`);
      const input = String(o.input);
      if (!groups.has(input)) groups.set(input, groups.size);
      const g = groups.get(input)!;
      const s = samples.get(g) ?? 0;
      samples.set(g, s + 1);
      const components: Record<string, number> = {};
      for (const [k, v] of Object.entries(o)) if (!TEXT_KEYS.includes(k) && typeof v === 'number') components[k] = v;
      batches.push({
        step: typeof o.step === 'number' ? o.step : fileStepOk ? fileStep : 0,
        group: g,
        sample: s,
        task: input,
        prompt: input,
        reward: score,
        outcome: { components, gts: o.gts ?? null },
        turns: [
          { role: 'env', text: input },
          { role: 'model', text: String(o.output) },
        ],
      });
    }
    // One metrics row per step (a single agent-loop file may hold several steps).
    const bySteps = new Map<number, TrajectoryRecord[]>();
    for (const t of batches) bySteps.set(t.step, [...(bySteps.get(t.step) ?? []), t]);
    const batch = batches;
    store.db.transaction(() => {
      for (const t of batch) store.writeTrajectory(runId, t);
    })();
    for (const [step, ts] of [...bySteps].sort((a, b) => a[0] - b[0])) {
      const mean = ts.reduce((a, t) => a + t.reward, 0) / ts.length;
      store.writeMetrics(runId, step, { 'reward/mean': mean, 'rollout/samples': ts.length });
      if (!steps.includes(step)) steps.push(step);
    }
    count += batch.length;
    opts.onProgress?.(f, count, files.indexOf(f) + 1, files.length);
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
  const rows = store.db.prepare('SELECT key, step, time, value FROM metrics WHERE run_id = ? ORDER BY step, key').all(runId) as {
    key: string;
    step: number;
    time: number;
    value: number | null;
  }[];
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
