/**
 * Trajectory records produced by the rollout engine (ARCHITECTURE.md §6).
 *
 * Token ids are the source of truth: model turns hold the ids exactly as sampled, observation
 * turns the ids the environment's observation was tokenised to. `text` is for display and for
 * the environment's parser only; nothing is ever re-encoded from it.
 */

export type TurnRole = 'model' | 'tool' | 'env';

/** One tool call parsed from a model turn, with what happened when it ran. */
export interface ToolCall {
  name: string;
  /** Arguments as parsed (or the raw string when they could not be parsed). */
  args: unknown;
  /** Observation content returned by the tool (or the error observation shown to the model). */
  result: string;
  /** Error message when the call failed (parse error, unknown tool, schema, timeout, throw). */
  error?: string;
  latencyMs: number;
}

export interface Turn {
  role: TurnRole;
  /** Token ids of this turn (model: as sampled; tool/env: the tokenised observation). */
  tokenIds: number[];
  /** Decoded text of the turn (display / env parsing only). */
  text: string;
  /** Per token: log-probability of the token under the sampling distribution (0 for non-model turns). */
  logprobs: number[];
  /** Per token: entropy of the sampling distribution at that position (0 for non-model turns). */
  entropy: number[];
  /** Per token: 1 for tokens the model generated, 0 for observations and templates. */
  lossMask: number[];
  /** Tool calls made by this model turn (on the model turn that issued them). */
  toolCalls?: ToolCall[];
  /** Step (process) reward assigned to this model turn by the environment. */
  stepReward?: number;
  /** Why a model turn ended: a stop string, a stop token (EOS), or a limit. */
  stop?: { reason: 'stop_string' | 'stop_token' | 'max_new_tokens' | 'max_total_length' | 'policy'; value?: string | number };
}

export interface OutcomeReward {
  /** Weighted total. */
  reward: number;
  /** Every named component before weighting (exact_match, f1, format, ...). */
  components: Record<string, number>;
  exactMatch?: boolean;
  formatOk?: boolean;
  /** The final answer the env extracted, if any. */
  answer?: string;
  /** The task's gold answers (ToolEnv; absent or empty for tasks scored by a reward file alone). */
  golds?: string[];
}

export interface Timings {
  /** Wall-clock ms from admission to the end of the episode. */
  totalMs: number;
  /** Ms spent in model calls (prefill + decode) attributed to this episode's batches. */
  modelMs: number;
  /** Ms spent waiting on the environment (tool calls, observation formatting). */
  envMs: number;
  prefillTokens: number;
  generatedTokens: number;
  /** Branching rollouts: prefix tokens this branch took from its parent's forked KV cache instead of prefilling them. */
  forkedTokens?: number;
}

/**
 * Where a branched sample (ARPO/AEPO branching rollouts) left its parent. The branch shares the
 * parent's prompt and its first `turn` turns token for token (the KV cache was forked, not
 * recomputed); its own turns start at index `turn`. Branches of branches name their parent branch.
 */
export interface BranchPoint {
  /** Sample index (in the same group) of the trajectory this one branched from. */
  parent: number;
  /**
   * Number of leading turns (of `turns`, the prompt not counted) shared with the parent; the branch
   * point follows turn `turn - 1`, a tool observation. Stored trajectories count stored turns instead
   * (the prompt is stored turn 0; engine/run/store-sink.ts converts), which is what the protocol returns.
   */
  turn: number;
  /** Length of the shared prefix in flattened tokens (prompt included). */
  tokens: number;
  /** Entropy measured at the branch point: mean over the first k tokens generated after the tool response, divided by log |V| (0–1). */
  entropy: number;
  /** That entropy minus the sample's first-turn entropy (ARPO's ΔH). */
  deltaH: number;
  /** The branching probability used (α + β·ΔH, clipped to [0, 1]). */
  probability: number;
}

export interface Trajectory {
  /** Task / question identifier. */
  taskId: string;
  /** Group (prompt) index within this rollout call; samples of the same prompt share it. */
  group: number;
  /** Sample index within the group (0..n-1). */
  sample: number;
  /** The prompt token ids (rendered by the env's chat template); loss mask 0. */
  promptIds: number[];
  promptText: string;
  turns: Turn[];
  outcome: OutcomeReward;
  /** Ended by a limit (turns, length) rather than by the environment. */
  truncated: boolean;
  /** Seed of this sequence's sampling stream. */
  seed: number;
  timings: Timings;
  /** Free-form task metadata from the env (hops, gold answers, ...). */
  meta?: Record<string, unknown>;
  /** Set on samples created by branching from another sample of the group (absent for root samples). */
  branch?: BranchPoint;
}

/**
 * What a stored outcome keeps of a task's metadata (engine/run/store-sink.ts for training
 * steps, engine/playground/live.ts for a live rollout): the gold answers, hops and question a reward
 * tried in the editor needs to score the trajectory again, and the metadata itself (episode.task.meta).
 */
export function outcomeTaskFields(meta: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!meta) return {};
  return {
    ...(Array.isArray(meta.answers) ? { golds: meta.answers } : {}),
    ...(meta.hops !== undefined ? { hops: meta.hops } : {}),
    ...(typeof meta.question === 'string' ? { question: meta.question } : {}),
    meta,
  };
}

/** Prompt + every turn as one sequence, with per-token arrays aligned to it. */
export function flattenTrajectory(t: Trajectory): {
  tokens: Int32Array;
  lossMask: Uint8Array;
  logprobs: Float32Array;
  entropy: Float32Array;
  /** Index in `tokens` of the last token of each model turn with a step reward. */
  stepRewards: { at: number; value: number }[];
  promptLength: number;
} {
  const total = t.promptIds.length + t.turns.reduce((a, u) => a + u.tokenIds.length, 0);
  const tokens = new Int32Array(total);
  const lossMask = new Uint8Array(total);
  const logprobs = new Float32Array(total);
  const entropy = new Float32Array(total);
  const stepRewards: { at: number; value: number }[] = [];
  tokens.set(t.promptIds, 0);
  let p = t.promptIds.length;
  for (const u of t.turns) {
    tokens.set(u.tokenIds, p);
    lossMask.set(u.lossMask, p);
    logprobs.set(u.logprobs, p);
    entropy.set(u.entropy, p);
    p += u.tokenIds.length;
    if (u.role === 'model' && u.stepReward !== undefined && u.tokenIds.length > 0) stepRewards.push({ at: p - 1, value: u.stepReward });
  }
  return { tokens, lossMask, logprobs, entropy, stepRewards, promptLength: t.promptIds.length };
}

export function toolCallCount(t: Trajectory): { calls: number; errors: number } {
  let calls = 0;
  let errors = 0;
  for (const u of t.turns)
    for (const c of u.toolCalls ?? []) {
      calls++;
      if (c.error) errors++;
    }
  return { calls, errors };
}

/** toolCallCount summed over trajectories, with how many of them had at least one failed call. */
export function toolCallTotals(ts: readonly Trajectory[]): { calls: number; errors: number; withError: number } {
  const sum = { calls: 0, errors: 0, withError: 0 };
  for (const t of ts) {
    const c = toolCallCount(t);
    sum.calls += c.calls;
    sum.errors += c.errors;
    if (c.errors > 0) sum.withError++;
  }
  return sum;
}
