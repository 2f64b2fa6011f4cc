/**
 * One sequence of a rollout (a task × sample episode) and the rules its turns follow: where a
 * model turn ends (stop token, stop string, per-turn and total limits), and what follows the
 * environment's step on it (the episode ends, or goes on with the observation). The scheduler
 * (./scheduler.ts) decides when a sequence decodes; the text policy (rolloutTextPolicy in
 * ./engine.ts) shares afterEnvStep.
 */
import { Rng, mixSeed } from '../base/rng';
import type { SampledToken } from './sampling';
import type { EnvStepResult, EpisodeEnv, RolloutTask, TokenizerPort } from './ports';
import type { BranchPoint, OutcomeReward, Trajectory, Turn } from './types';
import type { TurnLengths } from './decode-steps';

export interface RolloutLimits {
  /** Max tokens the model generates in one turn. */
  maxNewTokens: number;
  /** Max model turns per episode. */
  maxTurns: number;
  /** Max tokens of prompt + all turns. */
  maxTotalLength: number;
}

export interface StopConfig {
  /** A model turn ends as soon as its decoded text contains one of these (e.g. '</search>', '</answer>'). */
  strings: string[];
  /** A model turn ends when one of these ids is sampled (EOS, <|im_end|>); the id is kept in the turn. */
  tokenIds: number[];
}

/** Why a model turn ended. */
export type TurnEnd = NonNullable<Turn['stop']>;

export interface Seq {
  task: RolloutTask;
  group: number;
  sample: number;
  seed: number;
  rng: Rng;
  env: EpisodeEnv;
  slot: number;
  promptIds: number[];
  promptText: string;
  turns: Turn[];
  /** Tokens appended to the sequence but not yet in the slot's KV cache. */
  unfed: number[];
  /** Tokens in the sequence (prompt + turns). */
  length: number;
  /** The model turn being generated (null while the environment steps). */
  cur: Turn | null;
  /** Where in the current turn's text the stop-string scan starts again. */
  scanFrom: number;
  modelTurns: number;
  truncated: boolean;
  t0: number;
  modelMs: number;
  envMs: number;
  prefillTokens: number;
  generatedTokens: number;
}

/** A fresh sequence of `task` (its environment created now), sampling from its own stream seeded by (seed, group, sample). */
export function newSeq(task: RolloutTask, group: number, sample: number, rolloutSeed: number): Seq {
  const seed = mixSeed(rolloutSeed, group, sample);
  return {
    task,
    group,
    sample,
    seed,
    rng: new Rng(seed),
    env: task.createEnv(),
    slot: -1,
    promptIds: [],
    promptText: '',
    turns: [],
    unfed: [],
    length: 0,
    cur: null,
    scanFrom: 0,
    modelTurns: 0,
    truncated: false,
    t0: 0,
    modelMs: 0,
    envMs: 0,
    prefillTokens: 0,
    generatedTokens: 0,
  };
}

export function cloneTurn(u: Turn): Turn {
  return {
    ...u,
    tokenIds: u.tokenIds.slice(),
    logprobs: u.logprobs.slice(),
    entropy: u.entropy.slice(),
    lossMask: u.lossMask.slice(),
    ...(u.toolCalls ? { toolCalls: u.toolCalls.map((c) => ({ ...c })) } : {}),
    ...(u.stop ? { stop: { ...u.stop } } : {}),
  };
}

/** Open a new (empty) model turn. */
export function beginTurn(s: Seq): void {
  s.cur = { role: 'model', tokenIds: [], text: '', logprobs: [], entropy: [], lossMask: [] };
  s.scanFrom = 0;
}

function obsTurn(ids: number[], text: string, role: 'tool' | 'env'): Turn {
  const z = new Array<number>(ids.length).fill(0);
  return { role, tokenIds: ids, text, logprobs: z, entropy: z.slice(), lossMask: z.slice() };
}

/** What follows a model turn once the environment stepped on it. */
export type AfterStep = { end: true; truncated: boolean } | { end: false; observation: Turn | null };

/**
 * The rules after an environment step, the same for sampled and scripted turns: the step's tool
 * calls and reward go on the turn; the episode ends when the environment is done, when the turn
 * was cut by the total length or was the last allowed one, or when the observation would leave no
 * room for a generated token (truncated, except when the environment ended it within the limits);
 * otherwise it goes on with the observation (null when the environment gave none), loss mask 0.
 * `at`: the sequence's length with the turn, and its model turns so far.
 */
export function afterEnvStep(
  turn: Turn,
  reason: TurnEnd,
  r: EnvStepResult,
  at: { length: number; modelTurns: number },
  limits: RolloutLimits,
  tokenizer: TokenizerPort,
): AfterStep {
  if (r.toolCalls?.length) turn.toolCalls = r.toolCalls;
  if (r.stepReward !== undefined) turn.stepReward = r.stepReward;
  // A turn cut by the total length truncates the episode even if the env ends it here.
  if (r.done) return { end: true, truncated: reason.reason === 'max_total_length' };
  if (reason.reason === 'max_total_length' || at.modelTurns >= limits.maxTurns) return { end: true, truncated: true };
  const o = r.observation;
  const ids = o ? (o.ids ? o.ids.slice() : tokenizer.encode(o.text ?? '')) : [];
  // The observation must leave room for at least one generated token.
  if (at.length + ids.length >= limits.maxTotalLength) return { end: true, truncated: true };
  return { end: false, observation: ids.length ? obsTurn(ids, o!.text ?? tokenizer.decode(ids), o!.role ?? 'tool') : null };
}

/** How a sampled sequence's turns start, grow token by token, and end (stop detection and limits). */
export class TurnRules {
  private readonly stopTokens: Set<number>;
  private readonly maxStopLen: number;
  constructor(
    private readonly stop: StopConfig,
    private readonly limits: RolloutLimits,
    private readonly tokenizer: TokenizerPort,
    /** Where every ended turn's length is recorded (the choice of decode steps per call). */
    private readonly lengths: TurnLengths,
  ) {
    this.stopTokens = new Set(stop.tokenIds);
    this.maxStopLen = stop.strings.reduce((m, x) => Math.max(m, x.length), 0);
  }

  /** The environment's prompt becomes the sequence's unfed tokens, and its first model turn opens. */
  start(s: Seq, p: { ids: number[]; text?: string }): void {
    const { limits } = this;
    if (p.ids.length === 0) throw new Error(`task ${s.task.id}: the environment gave an empty prompt`);
    if (p.ids.length >= limits.maxTotalLength)
      throw new Error(`task ${s.task.id}: prompt has ${p.ids.length} tokens, not below limits.maxTotalLength (${limits.maxTotalLength})`);
    s.promptIds = p.ids.slice();
    s.promptText = p.text ?? this.tokenizer.decode(p.ids);
    s.unfed = s.promptIds.slice();
    s.length = s.promptIds.length;
    beginTurn(s);
  }

  /** Tokens the current turn may still generate (max_new_tokens, max_total_length). */
  room(s: Seq): number {
    return Math.min(this.limits.maxNewTokens - s.cur!.tokenIds.length, this.limits.maxTotalLength - s.length);
  }

  /** Append a sampled token to the current model turn; returns why the turn ended, if it did. */
  accept(s: Seq, tok: SampledToken): TurnEnd | null {
    const { limits, tokenizer } = this;
    const turn = s.cur!;
    turn.tokenIds.push(tok.id);
    turn.logprobs.push(tok.logprob);
    turn.entropy.push(tok.entropy);
    turn.lossMask.push(1);
    s.length++;
    s.generatedTokens++;
    s.unfed = [tok.id];
    if (this.stopTokens.has(tok.id)) {
      turn.text = tokenizer.decode(turn.tokenIds);
      return { reason: 'stop_token', value: tok.id };
    }
    if (this.maxStopLen > 0) {
      turn.text = tokenizer.decode(turn.tokenIds);
      const from = Math.max(0, s.scanFrom - this.maxStopLen);
      for (const str of this.stop.strings) if (turn.text.indexOf(str, from) >= 0) return { reason: 'stop_string', value: str };
      s.scanFrom = turn.text.length;
    }
    const limit: TurnEnd | null =
      s.length >= limits.maxTotalLength ? { reason: 'max_total_length' } : turn.tokenIds.length >= limits.maxNewTokens ? { reason: 'max_new_tokens' } : null;
    if (limit && this.maxStopLen === 0) turn.text = tokenizer.decode(turn.tokenIds);
    return limit;
  }

  /** The model's turn ended: it joins the sequence's turns (the environment steps on it next). */
  close(s: Seq, reason: TurnEnd): Turn {
    const turn = s.cur!;
    s.cur = null;
    this.lengths.record(turn.tokenIds.length, reason.reason === 'stop_token' || reason.reason === 'stop_string');
    turn.stop = reason;
    s.turns.push(turn);
    s.modelTurns++;
    return turn;
  }

  /**
   * After the environment's step on the closed turn: null when the episode ended; else the
   * observation (if any) is appended unfed and the next model turn opens, and the number of
   * observation tokens is returned.
   */
  afterStep(s: Seq, turn: Turn, reason: TurnEnd, r: EnvStepResult): number | null {
    const next = afterEnvStep(turn, reason, r, s, this.limits, this.tokenizer);
    if (next.end) {
      if (next.truncated) s.truncated = true;
      return null;
    }
    const ids = next.observation?.tokenIds ?? [];
    if (next.observation) s.turns.push(next.observation);
    s.unfed.push(...ids);
    s.length += ids.length;
    beginTurn(s);
    return ids.length;
  }
}

/** A finished sequence's record; `branch`: where a branching rollout's sample came from. */
export function trajectoryOf(s: Seq, outcome: OutcomeReward, branch?: { forked?: number; point?: BranchPoint }): Trajectory {
  return {
    taskId: s.task.id,
    group: s.group,
    sample: s.sample,
    promptIds: s.promptIds,
    promptText: s.promptText,
    turns: s.turns,
    outcome,
    truncated: s.truncated,
    seed: s.seed,
    timings: {
      totalMs: performance.now() - s.t0,
      modelMs: s.modelMs,
      envMs: s.envMs,
      prefillTokens: s.prefillTokens,
      generatedTokens: s.generatedTokens,
      ...(branch?.forked ? { forkedTokens: branch.forked } : {}),
    },
    ...(s.task.meta ? { meta: s.task.meta } : {}),
    ...(branch?.point ? { branch: branch.point } : {}),
  };
}
