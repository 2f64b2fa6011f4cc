/**
 * ToolEnv (public API): one episode of a model using tools on a task.
 *
 *  prompt()  → the chat-templated prompt (system text + tool list + question) as token ids;
 *  step(turn) → parses the model's turn with the environment's tool-call format, runs the
 *              calls concurrently (with timeouts), returns the observation to append (loss
 *              mask 0), the tool-call records and a step (process) reward, and whether the
 *              episode is done (an answer, or the turn budget);
 *  outcome() → the weighted outcome reward with every component.
 *
 * Its shape matches the rollout engine's EpisodeEnv port (engine/rollout/ports.ts).
 */
import type { TextTokenizer, ToolSpec } from '../model/tokenizer';
import type { ToolCallFormat } from './formats';
import { supportingFactStepReward, weightedReward, type EpisodeSummary, type RewardFn } from './rewards';
import { DEFAULT_LIMITS, runCall, type CallLimits, type CallOutcome, type Tool } from './tool';

export interface EnvTask {
  id: string;
  question: string;
  answers: string[];
  /** Texts whose retrieval counts as finding a supporting fact (process reward). */
  supportingFacts?: string[];
  meta?: Record<string, unknown>;
}

export interface ToolEnvOptions {
  task: EnvTask;
  tools: Tool[];
  format: ToolCallFormat;
  tokenizer: Pick<TextTokenizer, 'encode' | 'renderChat'>;
  /** Outcome reward weights by reward-function name (default: exact_match 1). */
  rewardWeights?: Record<string, number>;
  customRewards?: Record<string, RewardFn>;
  /** Model turns before the episode is cut (default 4). */
  maxTurns?: number;
  limits?: CallLimits;
  /** Instruction placed before the question. */
  instruction?: string;
  /** Context shown with the question (naive RAG); no tools are offered then. */
  context?: string;
  /** Step reward for newly retrieved supporting facts (default on). */
  processRewards?: boolean;
}

export interface StepRecord {
  done: boolean;
  observation?: { text: string; role: 'tool' };
  toolCalls: { name: string; args: unknown; result: string; error?: string; latencyMs: number }[];
  stepReward: number;
}

export const DEFAULT_INSTRUCTION = 'answer the question . use <search> query </search> to search , then give <answer> answer </answer> .';

export class ToolEnv {
  private tools: Map<string, Tool>;
  private turns: string[] = [];
  private answer: string | undefined;
  private formatOk = true;
  private toolCalls = 0;
  private toolErrors = 0;
  private retrieved: string[] = [];
  private seenFacts = new Set<string>();
  private state: Record<string, unknown> = {};
  constructor(readonly opts: ToolEnvOptions) {
    this.tools = new Map(opts.context === undefined ? opts.tools.map((t) => [t.name, t]) : []);
  }

  toolSpecs(): ToolSpec[] {
    return [...this.tools.values()].map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } }));
  }

  promptText(): string {
    const o = this.opts;
    const user = o.context === undefined
      ? `${o.instruction ?? DEFAULT_INSTRUCTION} ${o.task.question}`
      : `answer the question with <answer> answer </answer> . <information> ${o.context} </information> ${o.task.question}`;
    return o.tokenizer.renderChat([{ role: 'user', content: user }], { tools: this.tools.size ? this.toolSpecs() : undefined, addGenerationPrompt: true });
  }

  async prompt(): Promise<{ ids: number[]; text: string }> {
    const text = this.promptText();
    return { ids: this.opts.tokenizer.encode(text), text };
  }

  async step(turn: { text: string }): Promise<StepRecord> {
    this.turns.push(turn.text);
    const parsed = this.opts.format.parse(turn.text);
    if (parsed.errors.length) this.formatOk = false;
    if (parsed.answer !== undefined) {
      this.answer = parsed.answer;
      return { done: true, toolCalls: [], stepReward: 0 };
    }
    const outcomes: CallOutcome[] = await Promise.all(parsed.calls.map((c) => runCall(this.tools, c, this.opts.limits ?? DEFAULT_LIMITS, this.state)));
    this.toolCalls += outcomes.length;
    this.toolErrors += outcomes.filter((o) => !o.success).length;
    const results = outcomes.filter((o) => o.success).map((o) => o.result);
    this.retrieved.push(...results);
    const stepReward = this.opts.processRewards === false ? 0 : supportingFactStepReward(results, this.opts.task.supportingFacts ?? [], this.seenFacts);
    const done = this.turns.length >= (this.opts.maxTurns ?? 4);
    return {
      done,
      observation: done ? undefined : { text: this.opts.format.observation(outcomes, parsed.errors), role: 'tool' },
      toolCalls: outcomes.map((o) => ({ name: o.name, args: o.args, result: o.result, error: o.error, latencyMs: o.latencyMs })),
      stepReward,
    };
  }

  summary(): EpisodeSummary {
    return {
      answer: this.answer, golds: this.opts.task.answers, turns: this.turns, formatOk: this.formatOk && this.answer !== undefined,
      toolCalls: this.toolCalls, toolErrors: this.toolErrors, retrieved: this.retrieved, supporting: this.opts.task.supportingFacts ?? [],
    };
  }

  async outcome(): Promise<{ reward: number; components: Record<string, number>; exactMatch: boolean; formatOk: boolean; answer?: string }> {
    const s = this.summary();
    const w = weightedReward(this.opts.rewardWeights ?? { exact_match: 1 }, s, this.opts.customRewards);
    const em = weightedReward({ exact_match: 1 }, s).components.exact_match;
    return { reward: w.reward, components: { ...w.components, tool_calls: s.toolCalls, tool_errors: s.toolErrors }, exactMatch: em === 1, formatOk: s.formatOk, answer: s.answer };
  }
}
