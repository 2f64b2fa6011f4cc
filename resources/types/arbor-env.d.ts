/**
 * Arbor's environment API as seen by tools and rewards written in the editor (`import type {
 * Tool, RewardFn } from 'arbor/env'`). Kept identical in shape to engine/env (tool.ts,
 * rewards.ts, toolenv.ts) by tests/engine/env/api-types.check.ts (checked by `npx tsc -p tsconfig.json --noEmit`).
 */
declare module 'arbor/env' {
  /** What a tool returns: the observation text the model will read, and whether it worked. */
  export interface ToolResult {
    content: string;
    success: boolean;
    metadata?: Record<string, unknown>;
  }

  export interface ToolContext {
    /** Aborted when the call times out or the episode is cancelled. */
    signal: AbortSignal;
    /** Free-form episode state shared by the tools of one episode. */
    episode: Record<string, unknown>;
  }

  /**
   * A tool the model can call. `parameters` is the JSON schema of the arguments object; the
   * model's arguments are validated against it before `execute` runs (a bad call becomes an
   * error observation the model sees).
   */
  export interface Tool {
    name: string;
    description: string;
    parameters: Record<string, unknown>;
    execute(args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult> | ToolResult;
  }

  /** What a reward function sees at the end of an episode. */
  export interface EpisodeSummary {
    answer?: string;
    golds: string[];
    /** Model turns' texts in order. */
    turns: string[];
    /** Whether every model turn parsed (a call or an answer, tags closed). */
    formatOk: boolean;
    toolCalls: number;
    toolErrors: number;
    /** Passages the tools returned (for retrieval rewards). */
    retrieved: string[];
    supporting: string[];
  }

  /** An outcome reward: a number (or a weighted sum of named components, see ToolEnvOptions.rewardWeights). */
  export type RewardFn = (e: EpisodeSummary) => number;

  /** A question an environment poses, with its gold answers. */
  export interface EnvTask {
    id: string;
    question: string;
    answers: string[];
    /** Texts whose retrieval counts as finding a supporting fact (process reward). */
    supportingFacts?: string[];
    meta?: Record<string, unknown>;
  }

  /** What one model turn did in a ToolEnv: calls run, the observation appended, the step reward. */
  export interface StepRecord {
    done: boolean;
    observation?: { text: string; role: 'tool' };
    toolCalls: { name: string; args: unknown; result: string; error?: string; latencyMs: number }[];
    stepReward: number;
  }

  /** SQuAD normalisation: lower case, no punctuation or articles, single spaces. */
  export function normalizeAnswer(s: string): string;
  /** 1 if the normalised prediction equals a normalised gold answer, else 0. */
  export function exactMatch(pred: string, golds: string[]): number;
  /** 1 if a normalised gold answer occurs in the normalised prediction, else 0. */
  export function substringMatch(pred: string, golds: string[]): number;
  /** Best token F1 against the gold answers. */
  export function f1Score(pred: string, golds: string[]): number;
}
