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
    /** Free-form episode state shared by the tools of one episode (a fresh object for the next episode). */
    episode: Record<string, unknown>;
    /**
     * Read a file under the workspace (read-only; a path relative to the workspace folder, e.g.
     * `data/corpus.jsonl`), so a tool can load its corpus. Paths outside the workspace are refused.
     */
    readFile(path: string): string;
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

  /** A task, as a line of the task file: `{ id, prompt | messages, answers?, meta? }` (or the QA form `{ question, answers, context? }`). */
  export interface EnvTask {
    id: string;
    /** The user message: a question, an instruction, … (or give `messages`). */
    prompt?: string;
    /** QA form: the question (the prompt when `prompt` is not given). */
    question?: string;
    /** A whole conversation instead of `prompt` (system / user / assistant messages). */
    messages?: { role: string; content: string }[];
    /** Gold answers, for answer rewards (exact match, F1); none for open tasks. */
    answers?: string[];
    /** Texts whose retrieval counts as finding a supporting fact (process reward). */
    supportingFacts?: string[];
    meta?: Record<string, unknown>;
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
   * The other fields are summaries of the same.
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
  }

  /**
   * What a reward function returns: a number, or the reward with named components (stored and
   * charted) and `steps`, one step reward per tool call of the episode in order (history's calls,
   * turn after turn), used as process rewards when `algorithm.process_rewards` is on.
   */
  export type RewardValue = number | { reward: number; components?: Record<string, number>; steps?: number[] };

  /** A reward function (the reward file's `reward` or default export); it may be async. */
  export type RewardFn = (e: EpisodeSummary) => RewardValue | Promise<RewardValue>;

  /** What one model turn did in a ToolEnv: calls run, the observation appended, the step reward. */
  export interface ToolEnvStepResult {
    done: boolean;
    observation?: { text: string; ids?: number[]; role: 'tool' };
    toolCalls: { name: string; args: unknown; result: string; error?: string; latencyMs: number }[];
    stepReward: number;
  }
  /** @deprecated The former name of ToolEnvStepResult. */
  export type StepRecord = ToolEnvStepResult;

  /** SQuAD normalisation: lower case, no punctuation or articles, single spaces. */
  export function normalizeAnswer(s: string): string;
  /** 1 if the normalised prediction equals a normalised gold answer, else 0. */
  export function exactMatch(pred: string, golds: string[]): number;
  /** 1 if a normalised gold answer occurs in the normalised prediction, else 0. */
  export function substringMatch(pred: string, golds: string[]): number;
  /** Best token F1 against the gold answers. */
  export function f1Score(pred: string, golds: string[]): number;
}
