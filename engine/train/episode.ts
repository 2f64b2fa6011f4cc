/**
 * What the training loop needs from one finished episode, flattened to one token sequence.
 * The rollout engine's trajectories are converted into this shape
 * by ./trajectories.ts (engine/rollout/types.ts flattenTrajectory); everything in
 * engine/train works on it.
 *
 * Token ids are the source of truth: `tokens` is prompt + every turn, exactly as sampled and
 * as the tool observations were tokenised; `lossMask` is 1 on tokens the model generated.
 */
import type { JudgeRecord } from '../env/judge';
import type { BranchPoint } from '../rollout/types';

export interface Episode {
  /** Index of the prompt (group) in the step's batch, and of the sample within the group. */
  group: number;
  sample: number;
  /** Identifier of the task/question (for GiGPO anchors and logs). */
  taskId: string;
  tokens: Int32Array;
  /** 1 on model-generated tokens (the only ones that carry loss, KL, entropy). */
  lossMask: Uint8Array;
  /** Log-probability of each token under the sampling policy (0 where lossMask = 0). */
  rolloutLogprobs: Float32Array;
  /** Entropy of the sampling distribution at each model token (0 elsewhere). */
  entropy: Float32Array;
  /** Outcome reward (after shaping) and its named components (before shaping). */
  reward: number;
  rewardComponents: Record<string, number>;
  exactMatch: boolean;
  formatOk: boolean;
  toolCalls: number;
  toolErrors: number;
  turns: number;
  /** Step (process) rewards: value placed on token index `at` (last token of a tool call). */
  stepRewards: { at: number; value: number }[];
  /** Ended because a length limit was hit rather than by an answer. */
  truncated: boolean;
  /** Number of prompt tokens at the start of `tokens` (default: the tokens before the first model token). */
  promptLength?: number;
  /** The final answer text, if any (for logs). */
  answer?: string;
  /** The task's metadata (gold answers, hops, question), kept with stored trajectories. */
  meta?: Record<string, unknown>;
  /** Tool calls of each model turn (name, arguments, result, error, latency), at the turn's last token index. */
  toolCallsAt?: { at: number; calls: unknown[] }[];
  /** The model turns, [start, end) in `tokens`, with the observation the model saw before each (GiGPO's anchor states). */
  steps?: { start: number; end: number; observation: string }[];
  /** The rollout's timings of this episode (total, model and environment ms, token counts). */
  timings?: Record<string, number>;
  /** Unknown-token (<unk>) ids in the prompt and observations: text the tokenizer could not represent. */
  oovTokens?: number;
  /** Branching rollouts: where this sample left its parent (sample index in the same group); its first `branch.tokens` tokens are the parent's. */
  branch?: BranchPoint;
  /** What a judge (environment.judge) said about it: score, rank, the requests (stored with the trajectory). */
  judge?: JudgeRecord;
  /** Why its reward is incomplete (a judge's named failure): stored, but left out of the update. */
  unscored?: string;
}

/** Model tokens the rollout generated for this episode: a branch's copy of its parent's prefix is not counted. */
export function generatedTokenCount(e: Episode): number {
  let n = 0;
  for (let i = e.branch?.tokens ?? 0; i < e.lossMask.length; i++) n += e.lossMask[i]!;
  return n;
}

/**
 * Branching rollouts' per-step metrics: branches per prompt (group), prefix tokens taken from a
 * forked KV cache instead of prefilled (summed over the step), and the mean normalised entropy
 * measured at the branch points.
 */
export function branchMetrics(episodes: Episode[]): Record<string, number> {
  const groups = new Set(episodes.map((e) => e.group)).size;
  const br = episodes.filter((e) => e.branch);
  return {
    'rollout/branches_per_prompt': groups ? br.length / groups : 0,
    'rollout/prefix_tokens_saved': episodes.reduce((a, e) => a + (e.timings?.forkedTokens ?? 0), 0),
    'rollout/branch_entropy_mean': br.length ? br.reduce((a, e) => a + e.branch!.entropy, 0) / br.length : 0,
    'rollout/branch_delta_h_mean': br.length ? br.reduce((a, e) => a + e.branch!.deltaH, 0) / br.length : 0,
  };
}

export function modelTokenCount(e: Episode): number {
  let n = 0;
  for (let i = 0; i < e.lossMask.length; i++) n += e.lossMask[i]!;
  return n;
}

function meanStd(xs: number[]): { mean: number; std: number } {
  if (xs.length === 0) return { mean: 0, std: 0 };
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const v = xs.reduce((a, b) => a + (b - mean) * (b - mean), 0) / xs.length;
  return { mean, std: Math.sqrt(v) };
}

/**
 * Episode-level metrics of a batch: reward mean/std and each component, exact match, format
 * rate, tool calls and errors per episode, response and turn lengths, entropy of model tokens,
 * and the share of groups whose rewards are all equal (no learning signal under GRPO).
 */
export function episodeMetrics(episodes: Episode[], prefix = ''): Record<string, number> {
  const m: Record<string, number> = {};
  const n = episodes.length;
  if (n === 0) return m;
  const r = meanStd(episodes.map((e) => e.reward));
  m[`${prefix}reward/mean`] = r.mean;
  m[`${prefix}reward/std`] = r.std;
  const comps = new Set<string>();
  for (const e of episodes) for (const k of Object.keys(e.rewardComponents)) comps.add(k);
  for (const k of comps) m[`${prefix}reward/${k}`] = episodes.reduce((a, e) => a + (e.rewardComponents[k] ?? 0), 0) / n;
  m[`${prefix}exact_match`] = episodes.filter((e) => e.exactMatch).length / n;
  m[`${prefix}format_rate`] = episodes.filter((e) => e.formatOk).length / n;
  m[`${prefix}tool_calls_per_episode`] = episodes.reduce((a, e) => a + e.toolCalls, 0) / n;
  m[`${prefix}tool_errors_per_episode`] = episodes.reduce((a, e) => a + e.toolErrors, 0) / n;
  m[`${prefix}turns/mean`] = episodes.reduce((a, e) => a + e.turns, 0) / n;
  const lens = episodes.map(modelTokenCount);
  const l = meanStd(lens);
  m[`${prefix}response_length/mean`] = l.mean;
  m[`${prefix}response_length/max`] = Math.max(...lens);
  m[`${prefix}total_length/mean`] = episodes.reduce((a, e) => a + e.tokens.length, 0) / n;
  m[`${prefix}truncated_rate`] = episodes.filter((e) => e.truncated).length / n;
  m[`${prefix}repeat_ngram_rate`] = episodes.filter((e) => repeatsNgram(e)).length / n;
  m[`${prefix}oov_tokens_per_episode`] = episodes.reduce((a, e) => a + (e.oovTokens ?? 0), 0) / n;
  let hSum = 0;
  let hCount = 0;
  for (const e of episodes)
    for (let i = 0; i < e.lossMask.length; i++)
      if (e.lossMask[i]) {
        hSum += e.entropy[i]!;
        hCount++;
      }
  m[`${prefix}entropy`] = hCount ? hSum / hCount : 0;
  const groups = new Map<number, Episode[]>();
  for (const e of episodes) {
    const g = groups.get(e.group) ?? [];
    g.push(e);
    groups.set(e.group, g);
  }
  // Flat groups (one reward for every sample: no GRPO signal), split by the environment's verdict:
  // all right (the policy has saturated on the prompt), all wrong (it fails it), other (same reward, mixed verdicts).
  // Over every episode sampled, so with dynamic sampling these count the groups BEFORE it drops the flat ones.
  let flat = 0;
  let allRight = 0;
  let allWrong = 0;
  for (const g of groups.values()) {
    if (!g.every((e) => e.reward === g[0]!.reward)) continue;
    flat++;
    if (g.every((e) => e.exactMatch)) allRight++;
    else if (g.every((e) => !e.exactMatch)) allWrong++;
  }
  const ng = groups.size;
  m[`${prefix}groups/flat_fraction`] = ng ? flat / ng : 0;
  m[`${prefix}groups/flat_all_right`] = ng ? allRight / ng : 0;
  m[`${prefix}groups/flat_all_wrong`] = ng ? allWrong / ng : 0;
  m[`${prefix}groups/flat_other`] = ng ? (flat - allRight - allWrong) / ng : 0;
  return m;
}

/** N-gram size and count that make a model turn degenerate (`<answer><answer><answer>…`, a phrase looping). */
export const REPEAT_NGRAM = 3;
export const REPEAT_TIMES = 4;

/** Whether some model turn (a run of loss-masked tokens) repeats one REPEAT_NGRAM-gram of token ids REPEAT_TIMES times or more. */
export function repeatsNgram(e: Pick<Episode, 'tokens' | 'lossMask'>, ngram = REPEAT_NGRAM, times = REPEAT_TIMES): boolean {
  let i = 0;
  const len = e.tokens.length;
  while (i < len) {
    while (i < len && !e.lossMask[i]) i++;
    const start = i;
    while (i < len && e.lossMask[i]) i++;
    const counts = new Map<string, number>();
    for (let k = start; k + ngram <= i; k++) {
      const key = Array.from(e.tokens.subarray(k, k + ngram)).join(',');
      const c = (counts.get(key) ?? 0) + 1;
      if (c >= times) return true;
      counts.set(key, c);
    }
  }
  return false;
}

/** Mean |old − rollout| logprob over model tokens: how far the recomputed old policy drifts from the sampler. */
export function logprobMismatch(episodes: Episode[], oldLogprobs: Float32Array[]): { meanAbs: number; max: number } {
  let s = 0;
  let c = 0;
  let mx = 0;
  episodes.forEach((e, k) => {
    const old = oldLogprobs[k]!;
    for (let i = 0; i < e.lossMask.length; i++)
      if (e.lossMask[i]) {
        const d = Math.abs(old[i]! - e.rolloutLogprobs[i]!);
        s += d;
        c++;
        if (d > mx) mx = d;
      }
  });
  return { meanAbs: c ? s / c : 0, max: mx };
}

/**
 * DAPO dynamic sampling: keep only groups whose rewards are not all equal (they carry a GRPO
 * signal). Returns the kept episodes and how many groups were dropped.
 */
export function dropFlatGroups(episodes: Episode[]): { kept: Episode[]; dropped: number; droppedGroups: Episode[][] } {
  const groups = new Map<number, Episode[]>();
  for (const e of episodes) {
    const g = groups.get(e.group) ?? [];
    g.push(e);
    groups.set(e.group, g);
  }
  const kept: Episode[] = [];
  const droppedGroups: Episode[][] = [];
  for (const g of groups.values()) {
    if (g.length > 1 && g.every((e) => e.reward === g[0]!.reward)) droppedGroups.push(g);
    else kept.push(...g);
  }
  return { kept, dropped: droppedGroups.length, droppedGroups };
}

/**
 * DAPO overlong shaping: R += min(−(|y| − (L_max − L_buf)) / L_buf, 0) over the response length |y|
 * (model tokens) and the response budget L_max (see `responseBudget`), and a fixed penalty for
 * episodes truncated at the limit. A buffer larger than the budget is cut to the budget.
 */
export function overlongPenalty(responseTokens: number, maxLength: number, buffer: number, truncated: boolean, truncPenalty: number): number {
  const buf = Math.min(buffer, maxLength);
  const soft = buf > 0 ? Math.min(-(responseTokens - (maxLength - buf)) / buf, 0) : 0;
  return soft - (truncated ? truncPenalty : 0);
}

/** Tokens of the prompt: `promptLength` when the episode carries it, else those before the first model token. */
export function promptTokenCount(e: Episode): number {
  if (e.promptLength !== undefined) return e.promptLength;
  const i = e.lossMask.indexOf(1);
  return i < 0 ? e.tokens.length : i;
}

/**
 * The most model tokens an episode could have generated (DAPO's L_max for the overlong penalty):
 * max_turns × max_new_tokens, and no more than what max_total_length leaves after the prompt.
 * (max_total_length alone counts the prompt, so a penalty against it would never fire.)
 */
export function responseBudget(e: Episode, rollout: { max_turns: number; max_new_tokens: number; max_total_length: number }): number {
  return Math.max(0, Math.min(rollout.max_turns * rollout.max_new_tokens, rollout.max_total_length - promptTokenCount(e)));
}

/** A per-step seed derived from the run seed (splitmix-style mixing), so resuming needs no RNG state. */
export function stepSeed(seed: number, step: number, stream = 0): number {
  let z = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(step + 1, 0x85ebca6b) ^ Math.imul(stream + 7, 0xc2b2ae35)) >>> 0;
  z = Math.imul(z ^ (z >>> 16), 0x7feb352d) >>> 0;
  z = Math.imul(z ^ (z >>> 15), 0x846ca68b) >>> 0;
  return (z ^ (z >>> 16)) >>> 0;
}

/** Split into `k` nearly equal consecutive chunks (no empty chunk when k ≤ length). */
export function chunks<T>(xs: T[], k: number): T[][] {
  const n = Math.min(k, xs.length);
  const out: T[][] = [];
  let start = 0;
  for (let i = 0; i < n; i++) {
    const size = Math.floor(xs.length / n) + (i < xs.length % n ? 1 : 0);
    out.push(xs.slice(start, start + size));
    start += size;
  }
  return out;
}
