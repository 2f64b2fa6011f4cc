/**
 * Rewards: answer matching after SQuAD normalisation (exact match, substring match, token F1),
 * a format reward, process (step) rewards, and weighted sums that keep every component.
 */
import type { EnvTask } from './task';
export function normalizeAnswer(s: string): string {
  return s
    .toLowerCase()
    .replace(/[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g, ' ')
    .replace(/\b(a|an|the)\b/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

export function exactMatch(pred: string, golds: string[]): number {
  const p = normalizeAnswer(pred);
  return golds.some((g) => normalizeAnswer(g) === p) ? 1 : 0;
}

export function substringMatch(pred: string, golds: string[]): number {
  const p = normalizeAnswer(pred);
  return golds.some((g) => {
    const n = normalizeAnswer(g);
    return n.length > 0 && p.includes(n);
  })
    ? 1
    : 0;
}

export function f1Score(pred: string, golds: string[]): number {
  return bestTokenF1(pred, golds, normalizeAnswer);
}

/**
 * Token F1 (bag of normalised tokens), the best over the gold answers, under the normalisation
 * `norm`: f1Score's, and the evaluation harness's SQuAD one (engine/recipes/eval-harness.ts
 * squadF1). Self-contained like the helpers above: the sandbox re-evaluates them from their
 * source (./sandbox-context.ts), this one with them.
 */
export function bestTokenF1(pred: string, golds: readonly string[], norm: (s: string) => string): number {
  const p = norm(pred).split(' ').filter(Boolean);
  let best = 0;
  for (const g of golds) {
    const t = norm(g).split(' ').filter(Boolean);
    const counts = new Map<string, number>();
    for (const w of t) counts.set(w, (counts.get(w) ?? 0) + 1);
    let common = 0;
    for (const w of p) {
      const c = counts.get(w) ?? 0;
      if (c > 0) {
        common++;
        counts.set(w, c - 1);
      }
    }
    if (common === 0) continue;
    const prec = common / p.length,
      rec = common / t.length;
    best = Math.max(best, (2 * prec * rec) / (prec + rec));
  }
  return best;
}

/** One tool call of a model turn, as the reward sees it. */
export interface ToolCallTrace {
  name: string;
  /** Arguments as parsed (the raw text when they could not be parsed). */
  args: unknown;
  /** What the model read back: the tool's content, or the error text. */
  result: string;
  success: boolean;
  error?: string;
}

/** One model turn, as the reward sees it. */
export interface TurnTrace {
  text: string;
  calls: ToolCallTrace[];
  /** Format errors of the turn (unclosed tags, invalid JSON, a call and an answer together, …). */
  errors: string[];
  /** The answer, when this turn gave it. */
  answer?: string;
}

/**
 * What a reward function receives at the end of an episode: the whole episode. `task` is the
 * task as the task file gave it (with `meta`); `history` has every model turn with its text,
 * tool calls (name, arguments, result, error) and format errors; `answer` the final answer.
 * The other fields are summaries of the same (kept for rewards written against them).
 */
export interface EpisodeSummary {
  task: EnvTask;
  history: TurnTrace[];
  answer?: string;
  /** The task's gold answers (task.answers; [] when it has none). */
  golds: string[];
  /** Model turns' texts in order. */
  turns: string[];
  /** Whether every model turn parsed (a call or an answer, tags closed) and an answer came. */
  formatOk: boolean;
  toolCalls: number;
  toolErrors: number;
  /** Results of the successful tool calls (for retrieval rewards). */
  retrieved: string[];
  /** The task's supporting facts (process rewards, retrieval). */
  supporting: string[];
  /** An external agent's episode (environment.agent, engine/openai/agent.ts): every call it made, its answer and how it ended. */
  agent?: AgentEpisodeTrace;
}

/** What an external agent did in an episode, as the reward file sees it. */
export interface AgentEpisodeTrace {
  /** Every call through the episode's base URL, in order: the request as sent and each choice's text and message. */
  calls: { id: string; kind: 'chat' | 'completion'; request: unknown; choices: { text: string; message?: unknown; finish: string }[] }[];
  /** The program's last non-empty stdout line. */
  answer?: string;
  exitCode: number | null;
  timedOut: boolean;
  /** The end of its stderr. */
  stderr: string;
}

/**
 * What a reward function returns: a number, or the reward with named components (stored and
 * charted) and `steps`, one step reward per tool call of the episode in order (history's calls,
 * turn after turn), used as process rewards when `algorithm.process_rewards` is on.
 */
export type RewardValue = number | { reward: number; components?: Record<string, number>; steps?: number[] };

/** A reward function (the reward file's `reward` or default export); it may be async. */
export type RewardFn = (e: EpisodeSummary) => RewardValue | Promise<RewardValue>;

/** A built-in reward component: a number from the episode. */
export type RewardComponentFn = (e: EpisodeSummary) => number;

export const rewardFunctions: Record<string, RewardComponentFn> = {
  exact_match: (e) => (e.answer === undefined ? 0 : exactMatch(e.answer, e.golds)),
  substring_match: (e) => (e.answer === undefined ? 0 : substringMatch(e.answer, e.golds)),
  f1: (e) => (e.answer === undefined ? 0 : f1Score(e.answer, e.golds)),
  format: (e) => (e.formatOk && e.answer !== undefined ? 1 : 0),
  /** Fraction of gold supporting passages that some tool call retrieved. */
  retrieval: (e) => (e.supporting.length === 0 ? 0 : e.supporting.filter((s) => e.retrieved.some((r) => r.includes(s))).length / e.supporting.length),
};

/** A reward function's return value checked and normalised; errors name `where` (the reward file). */
export function normalizeRewardValue(v: unknown, where: string, toolCalls?: number): { reward: number; components: Record<string, number>; steps?: number[] } {
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`${where}: the reward function returned ${v}; expected a finite number`);
    return { reward: v, components: {} };
  }
  const o = v as { reward?: unknown; components?: unknown; steps?: unknown } | null;
  if (!o || typeof o !== 'object' || typeof o.reward !== 'number' || !Number.isFinite(o.reward))
    throw new Error(`${where}: the reward function returned ${JSON.stringify(v)}; expected a finite number or { reward, components?, steps? }`);
  const components: Record<string, number> = {};
  if (o.components !== undefined) {
    if (!o.components || typeof o.components !== 'object') throw new Error(`${where}: components must be an object of numbers`);
    for (const [k, x] of Object.entries(o.components)) {
      if (typeof x !== 'number' || !Number.isFinite(x)) throw new Error(`${where}: components.${k} must be a finite number (got ${JSON.stringify(x)})`);
      components[k] = x;
    }
  }
  let steps: number[] | undefined;
  if (o.steps !== undefined) {
    if (!Array.isArray(o.steps) || o.steps.some((x) => typeof x !== 'number' || !Number.isFinite(x)))
      throw new Error(`${where}: steps must be an array of finite numbers, one per tool call`);
    if (toolCalls !== undefined && o.steps.length > toolCalls)
      throw new Error(`${where}: steps has ${o.steps.length} entries but the episode made ${toolCalls} tool calls (one step reward per call)`);
    steps = o.steps as number[];
  }
  return { reward: o.reward, components, ...(steps ? { steps } : {}) };
}

export interface WeightedReward {
  reward: number;
  components: Record<string, number>;
}

/** Weighted sum of named reward functions; every component is returned unweighted. */
export function weightedReward(weights: Record<string, number>, e: EpisodeSummary, custom: Record<string, RewardComponentFn> = {}): WeightedReward {
  const components: Record<string, number> = {};
  let reward = 0;
  for (const [name, w] of Object.entries(weights)) {
    const fn = custom[name] ?? rewardFunctions[name];
    if (!fn) throw new Error(`unknown reward "${name}" (available: ${[...Object.keys(rewardFunctions), ...Object.keys(custom)].join(', ')})`);
    const v = fn(e);
    components[name] = v;
    reward += w * v;
  }
  return { reward, components };
}

/** Step reward: 1 when this step's results contain a gold supporting passage not seen before. */
export function supportingFactStepReward(results: string[], supporting: string[], seen: Set<string>): number {
  let r = 0;
  for (const s of supporting) {
    if (!seen.has(s) && results.some((x) => x.includes(s))) {
      seen.add(s);
      r = 1;
    }
  }
  return r;
}
