/**
 * What the rollout engine needs from a model, a tokenizer and an environment. The real
 * implementations (engine/model PolicyModel, engine/model/tokenizer, engine/env ToolEnv) are
 * adapted to these small interfaces in ./model-backend.ts (the model) and by the task kits and the
 * rollout sources of engine/tasks/ (tokenizer, environment), so the scheduler is testable and
 * independent of how each is built.
 */
import type { OutcomeReward, ToolCall, TurnRole } from './types';

/**
 * An incremental decoder with a per-slot KV cache. A slot holds one sequence's cache;
 * `extend` appends tokens to each listed slot's cache (a prompt / an observation: many
 * tokens; a decode step: one token) and returns the logits for the next token of each item,
 * in order. Items of one call may have different lengths; the backend batches them as it can.
 */
export interface DecodeBackend {
  readonly vocabSize: number;
  /** Number of slots (the largest batch). */
  readonly maxBatch: number;
  /** Maximum tokens a slot can hold (the model's context). */
  readonly maxLength: number;
  extend(items: { slot: number; tokens: number[] }[]): Promise<Float32Array[]>;
  /**
   * Optional fast path: the same as `extend`, but the backend samples each item's next token
   * itself (from softmax(logits · invTemp[i]) with the uniform u[i] by inverse CDF, or the
   * first argmax where greedy[i]; no top-k/top-p) and returns only token, logprob and entropy,
   * which must equal sampleToken's on the same logits and uniform.
   */
  extendSample?(items: { slot: number; tokens: number[] }[], sample: SampleRequest): Promise<{ id: number; logprob: number; entropy: number }[]>;
  /**
   * Optional: `steps` decode steps in one call. Step 1 is `extendSample(items, ...)`; at each
   * later step every item is fed the token it sampled at the step before and samples again.
   * `sample.u` holds steps × B uniforms, step-major (u[k·B + b] is item b's at step k + 1);
   * invTemp and greedy are per item ([B]). Returns each item's `steps` sampled tokens in order.
   * Each slot's cache then holds everything fed, up to the token sampled at step steps − 1; a
   * caller that keeps only the first j tokens cuts the cache back with `truncate`.
   */
  extendSampleSteps?(
    items: { slot: number; tokens: number[] }[],
    sample: SampleRequest,
    steps: number,
  ): Promise<{ id: number; logprob: number; entropy: number }[][]>;
  /** Optional: keep only the first `length` cached tokens of a slot (with extendSampleSteps). */
  truncate?(slot: number, length: number): void;
  /** Forget a slot's cache; the slot is then empty for the next sequence. */
  release(slot: number): void;
  /**
   * Optional: make slot `to` hold a copy of slot `from`'s cache (prefix sharing: a prompt
   * prefilled once, forked to the group's other samples; copy on divergence). `to` must be empty.
   * With `length`, only the first `length` cached tokens are copied (a branching rollout's branch
   * leaving its parent at an earlier point than the parent's cache has reached).
   */
  fork?(from: number, to: number, length?: number): void;
  /** Free resources (sessions, workers). */
  close?(): Promise<void>;
}

/** Per-item sampling inputs of DecodeBackend.extendSample. */
export interface SampleRequest {
  /** One uniform per item ([B]; extendSampleSteps: [steps × B], step-major). */
  u: Float32Array;
  invTemp: Float32Array;
  /** 1 = greedy (argmax, ties to the lowest id), else 0. */
  greedy: Float32Array;
}

export interface TokenizerPort {
  encode(text: string): number[];
  decode(ids: number[]): string;
}

/** What the environment returns after a model turn. */
export interface EnvStepResult {
  done: boolean;
  /** Observation appended with loss mask 0 before the model's next turn. `ids` win over `text`. */
  observation?: { ids?: number[]; text?: string; role?: Exclude<TurnRole, 'model'> };
  toolCalls?: ToolCall[];
  stepReward?: number;
}

/** One episode's environment (a fresh one per sample). */
export interface EpisodeEnv {
  /** The prompt (chat template applied, generation prompt included) as token ids. */
  prompt(): Promise<{ ids: number[]; text?: string }>;
  /** The model finished a turn (text is the decoded turn, ids exactly as sampled). */
  step(turn: { text: string; tokenIds: number[]; stopReason: string }): Promise<EnvStepResult>;
  /** Outcome reward after the episode ended (also called for truncated episodes). */
  outcome(): Promise<OutcomeReward>;
}

export interface RolloutTask {
  id: string;
  createEnv(): EpisodeEnv;
  meta?: Record<string, unknown>;
}

/**
 * A turn of a text policy with a flag: `mistake` marks a deliberate error of the scripted expert (a
 * wrong lookup, a wrong expression): kept in the demonstration as context the model learns to
 * recover from, but not imitated unless the rollout asks for it (RolloutTextOptions.imitateMistakes).
 */
export interface TextTurn {
  text: string;
  mistake?: boolean;
}

/** A policy that writes turns as text (the scripted expert, a human): no logits, no sampling. */
export interface TextPolicy {
  act(ctx: { task: RolloutTask; sample: number; promptText: string; history: { role: TurnRole; text: string }[]; seed: number }): Promise<string | TextTurn>;
}
