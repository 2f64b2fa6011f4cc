/**
 * The evaluation harness behind `arbor eval --k N`: k sampled episodes per question give pass@k
 * (the unbiased estimator of Chen et al. 2021, 1 − C(n−c, k)/C(n, k) with n = k samples and c
 * correct), mean@k (the mean correctness over the k samples; equal to the unbiased pass@1),
 * format rate, tool-error rates and truncation; one greedy episode per question (the config's
 * eval.temperature, as the training run's held-out evaluation) gives exact match and token F1
 * after SQuAD's answer normalisation. Everything is reported overall and per value of a meta field
 * (hops by default). A task without gold answers is scored by its reward: a sample is correct when
 * its reward reaches `passReward`, and EM/F1 are not reported.
 */
import { bestTokenF1 } from '../env/rewards';
import { toolCallTotals, type Trajectory } from '../rollout/types';

/** 1 − C(n−c, k)/C(n, k), as the numerically stable product 1 − Π_{i=n−c+1..n} (1 − k/i). */
export function passAtK(n: number, c: number, k: number): number {
  if (!(Number.isInteger(n) && Number.isInteger(c) && Number.isInteger(k)) || n < 1 || k < 1 || k > n || c < 0 || c > n)
    throw new Error(`pass@k: needs integers 1 ≤ k ≤ n and 0 ≤ c ≤ n (got n=${n}, c=${c}, k=${k})`);
  if (n - c < k) return 1;
  let p = 1;
  for (let i = n - c + 1; i <= n; i++) p *= 1 - k / i;
  return 1 - p;
}

/**
 * SQuAD v1.1's normalize_answer: lower case, remove punctuation (deleted, not replaced by a
 * space: "don't" → "dont"), remove the articles a/an/the, collapse whitespace. (The reward
 * functions in engine/env/rewards.ts replace punctuation by a space; this is the evaluation script's.)
 */
export function squadNormalize(s: string): string {
  return s
    .toLowerCase()
    .replace(/[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g, '')
    .replace(/\b(a|an|the)\b/g, ' ')
    .split(/\s+/)
    .filter(Boolean)
    .join(' ');
}

export function squadExactMatch(pred: string, golds: readonly string[]): number {
  const p = squadNormalize(pred);
  return golds.some((g) => squadNormalize(g) === p) ? 1 : 0;
}

/** SQuAD's token F1 (bag of normalised tokens), the best over the gold answers: the reward helpers' F1 under SQuAD's normalisation. */
export function squadF1(pred: string, golds: readonly string[]): number {
  return bestTokenF1(pred, golds, squadNormalize);
}

export interface HarnessMetrics {
  questions: number;
  samples: number;
  /** pass@1, pass@2, pass@4, … and pass@k. */
  [key: string]: number;
}

export interface HarnessResult {
  k: number;
  /** "exact match" (gold answers) or "reward ≥ passReward" (a task scored by its reward file). */
  scoredBy: string;
  overall: HarnessMetrics;
  by?: { field: string; groups: Record<string, HarnessMetrics> };
}

const golds = (t: Trajectory): string[] => {
  const g = (t.outcome as { golds?: unknown }).golds;
  return Array.isArray(g) ? g.map(String) : [];
};

function metricsOf(sampled: Trajectory[], greedy: Trajectory[], k: number, passReward: number, withGold: boolean): HarnessMetrics {
  const byTask = new Map<string, Trajectory[]>();
  for (const t of sampled) {
    const a = byTask.get(t.taskId);
    if (a) a.push(t);
    else byTask.set(t.taskId, [t]);
  }
  const correct = (t: Trajectory) =>
    withGold ? squadExactMatch(t.outcome.answer ?? '', golds(t)) === 1 && t.outcome.answer !== undefined : t.outcome.reward >= passReward;
  const ks = [...new Set([...[1, 2, 4, 8, 16, 32, 64, 128].filter((x) => x < k), k])];
  const pass = new Map(ks.map((x) => [x, 0]));
  let meanK = 0;
  for (const samples of byTask.values()) {
    const n = samples.length;
    const c = samples.filter(correct).length;
    for (const x of ks) if (x <= n) pass.set(x, pass.get(x)! + passAtK(n, c, x));
    meanK += c / n;
  }
  const q = Math.max(1, byTask.size);
  const { calls, errors, withError } = toolCallTotals(sampled);
  const s = Math.max(1, sampled.length);
  const m: HarnessMetrics = { questions: byTask.size, samples: sampled.length };
  for (const x of ks) m[`pass@${x}`] = pass.get(x)! / q;
  m[`mean@${k}`] = meanK / q;
  if (withGold && greedy.length) {
    m.exact_match = greedy.reduce((a, t) => a + (t.outcome.answer === undefined ? 0 : squadExactMatch(t.outcome.answer, golds(t))), 0) / greedy.length;
    m.f1 = greedy.reduce((a, t) => a + (t.outcome.answer === undefined ? 0 : squadF1(t.outcome.answer, golds(t))), 0) / greedy.length;
  }
  m.reward_mean = sampled.reduce((a, t) => a + t.outcome.reward, 0) / s;
  m.format_rate = sampled.filter((t) => t.outcome.formatOk ?? (t.outcome.components.format ?? 0) > 0).length / s;
  m.tool_calls_per_episode = calls / s;
  m.tool_errors_per_episode = errors / s;
  /** Failed calls among all calls; episodes with at least one failed call. */
  m.tool_error_rate = calls ? errors / calls : 0;
  m.episodes_with_tool_error = withError / s;
  m.truncated_rate = sampled.filter((t) => t.truncated).length / s;
  return m;
}

/**
 * Score k samples per question (`sampled`) and one greedy episode per question (`greedy`, may be
 * empty), overall and per value of `meta[by]` (default: hops, when the tasks have it).
 */
export function scoreHarness(sampled: Trajectory[], greedy: Trajectory[], opts: { k: number; by?: string; passReward?: number }): HarnessResult {
  const passReward = opts.passReward ?? 1;
  const withGold = [...sampled, ...greedy].some((t) => golds(t).length > 0);
  const field = opts.by ?? (sampled.some((t) => t.meta?.hops !== undefined) ? 'hops' : undefined);
  const res: HarnessResult = {
    k: opts.k,
    scoredBy: withGold ? 'exact match (SQuAD normalisation) against the gold answers' : `reward ≥ ${passReward} (the task has no gold answers)`,
    overall: metricsOf(sampled, greedy, opts.k, passReward, withGold),
  };
  if (field) {
    const value = (t: Trajectory) => {
      const v = t.meta?.[field];
      return v === undefined || v === null ? '(none)' : typeof v === 'object' ? JSON.stringify(v) : String(v);
    };
    const values = [...new Set(sampled.map(value))].sort((a, b) => (Number.isFinite(+a) && Number.isFinite(+b) ? +a - +b : a.localeCompare(b)));
    if (opts.by && values.length === 1 && values[0] === '(none)') throw new Error(`--by ${field}: no task has meta.${field}`);
    res.by = {
      field,
      groups: Object.fromEntries(
        values.map((v) => [
          v,
          metricsOf(
            sampled.filter((t) => value(t) === v),
            greedy.filter((t) => value(t) === v),
            opts.k,
            passReward,
            withGold,
          ),
        ]),
      ),
    };
  }
  return res;
}

/** The result as flat metric keys for the store: harness/<metric> and harness/<field>=<value>/<metric>. */
export function harnessMetricKeys(r: HarnessResult): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(r.overall)) out[`harness/${k}`] = v;
  if (r.by) for (const [g, m] of Object.entries(r.by.groups)) for (const [k, v] of Object.entries(m)) out[`harness/${r.by.field}=${g}/${k}`] = v;
  return out;
}
