/**
 * ToolEnv (public API): one episode of a model using tools on a task. Every path runs episodes
 * through it: training for every task kind, `arbor rollout`, `arbor eval`, the playground, the
 * run templates, the editor's try-it.
 *
 *  prompt()   → the prompt rendered by the model's chat template (the task's messages, or the
 *               format's instruction + the task's prompt; the tool schemas passed as `tools`), as
 *               token ids;
 *  step(turn) → parses the model's turn with the environment's tool-call format, runs the calls
 *               concurrently (schema validation, per-call timeout aborting ctx.signal, ctx.episode
 *               shared by the episode's calls, ctx.readFile over the workspace), and returns the
 *               observation to append (loss mask 0) as token ids, the tool-call records, a step
 *               reward, and whether the episode is done (an answer; at the turn budget no
 *               observation follows and the rollout's turn limit cuts the episode as truncated);
 *  outcome()  → the outcome reward with every component: the user's reward function (given the
 *               whole episode) or weighted built-in rewards; the user reward's per-call `steps`
 *               come back as per-turn step rewards.
 *
 * Observations. 'inline' formats (search-r1, tags) append their observation text right after the
 * turn. 'template' formats (hermes) render the results as tool messages with the model's own chat
 * template: the conversation [user, assistant(MARK), tool…] is rendered with the generation
 * prompt and everything after MARK (the end of the assistant turn, the tool messages, the next
 * assistant header) is the observation; when the sampled turn already ends with the model's
 * end-of-turn token, that token's text is not repeated. Only the observation is tokenised: the
 * ids of the prompt and of sampled turns are never re-encoded, so a template that rewrites
 * history (Qwen3 drops earlier <think> blocks) cannot change them.
 *
 * Observation length: the tool results of one turn are cut to `maxObservationTokens` tokens in all
 * (each result gets an equal share, cut with " …[truncated]"). Out-of-vocabulary: tokens equal to
 * the tokenizer's unknown id in the prompt and in observations are counted (`oovTokens` in the
 * outcome, `oov` on the env) so runs report them instead of silently training on <unk>.
 *
 * Its shape matches the rollout engine's EpisodeEnv port (engine/rollout/ports.ts).
 */
import type { ChatMessage, TextTokenizer, ToolSpec } from '../model/tokenizer';
import type { ToolCallFormat } from './formats';
import {
  normalizeRewardValue,
  supportingFactStepReward,
  weightedReward,
  type EpisodeSummary,
  type RewardComponentFn,
  type RewardValue,
  type TurnTrace,
} from './rewards';
import type { EnvTask } from './task';
import { DEFAULT_LIMITS, runCall, workspaceReader, type CallLimits, type CallOutcome, type Tool } from './tool';

/** What ToolEnv needs from a tokenizer (HfTokenizer has all of it). */
export type EnvTokenizer = Pick<TextTokenizer, 'encode'> & Partial<Pick<TextTokenizer, 'decode' | 'renderChat'>> & { readonly unkTokenId?: number };

export interface ToolEnvOptions {
  task: EnvTask;
  tools: Tool[];
  format: ToolCallFormat;
  tokenizer: EnvTokenizer;
  /** Outcome reward weights by reward-function name (default: exact_match 1). Ignored with `userReward`. */
  rewardWeights?: Record<string, number>;
  customRewards?: Record<string, RewardComponentFn>;
  /** A user's reward function (a reward file): receives the whole episode; its value is the training reward. */
  userReward?: (e: EpisodeSummary) => Promise<RewardValue> | RewardValue;
  /** Name of the user reward (its file), for error messages. */
  userRewardName?: string;
  /**
   * A user reward that throws: 'fail' (default) fails the episode's job with the file and line;
   * 'zero' scores the episode 0 with component `reward_error` 1 and reports the error through
   * `onRewardError` (default: a line on stderr).
   */
  rewardErrors?: 'fail' | 'zero';
  onRewardError?: (message: string) => void;
  /** Model turns before the episode is cut (default 4). */
  maxTurns?: number;
  limits?: CallLimits;
  /** Instruction placed before the prompt (default: the format's; '' for none). */
  instruction?: string;
  /** Context shown with the question (naive RAG); no tools are offered then. */
  context?: string;
  /** Step reward for newly retrieved supporting facts (default on). */
  processRewards?: boolean;
  /** Most tokens of tool results in one observation (default: no cap). */
  maxObservationTokens?: number;
  /** Folder tools may read through ctx.readFile (read-only). */
  workspace?: string;
  /** Aborts every running call of the episode (ctx.signal). */
  signal?: AbortSignal;
  /** The model's end-of-turn token ids (EOS, <|im_end|>): a turn ending with one does not get it again from the observation. */
  endTokenIds?: number[];
}

export interface ToolEnvStepResult {
  done: boolean;
  observation?: { text: string; ids?: number[]; role: 'tool' };
  toolCalls: { name: string; args: unknown; result: string; error?: string; latencyMs: number }[];
  stepReward: number;
}

export interface EnvOutcome {
  reward: number;
  components: Record<string, number>;
  exactMatch: boolean;
  formatOk: boolean;
  answer?: string;
  /** Step reward of each model turn from the reward function's per-call `steps` (process rewards). */
  stepRewards?: number[];
  /** Unknown-token ids in the prompt and observations. */
  oovTokens: number;
}

/** The search-r1 instruction (kept for callers that name it). */
export const DEFAULT_INSTRUCTION = 'answer the question . use <search> query </search> to search , then give <answer> answer </answer> .';

const MARK = 'ARBORMODELTURNMARK';
const TRUNC = ' …[truncated]';

export class ToolEnv {
  private tools: Map<string, Tool>;
  private turns: string[] = [];
  private history: TurnTrace[] = [];
  private answer: string | undefined;
  private formatOk = true;
  private toolCalls = 0;
  private toolErrors = 0;
  private retrieved: string[] = [];
  private seenFacts = new Set<string>();
  private state: Record<string, unknown> = {};
  private readFile: (p: string) => string;
  /** Unknown-token counts so far. */
  readonly oov = { prompt: 0, observation: 0 };
  constructor(readonly opts: ToolEnvOptions) {
    this.tools = new Map(opts.context === undefined ? opts.tools.map((t) => [t.name, t]) : []);
    this.readFile = workspaceReader(opts.workspace);
  }

  toolSpecs(): ToolSpec[] {
    return [...this.tools.values()].map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } }));
  }

  /** The conversation the prompt renders. */
  promptMessages(): { role: string; content: string }[] {
    const o = this.opts;
    if (o.context !== undefined)
      return [
        { role: 'user', content: `answer the question with <answer> answer </answer> . <information> ${o.context} </information> ${taskPrompt(o.task)}` },
      ];
    const instruction = o.instruction ?? o.format.instruction();
    if (o.task.messages?.length) {
      if (!instruction) return o.task.messages;
      // The instruction goes before the first user message.
      let done = false;
      return o.task.messages.map((m) => (!done && m.role === 'user' && (done = true) ? { role: 'user', content: `${instruction} ${m.content}` } : m));
    }
    return [{ role: 'user', content: instruction ? `${instruction} ${taskPrompt(o.task)}` : taskPrompt(o.task) }];
  }

  promptText(): string {
    const tok = this.opts.tokenizer;
    const messages = this.promptMessages();
    if (!tok.renderChat) return messages.map((m) => m.content).join('\n');
    return tok.renderChat(messages as ChatMessage[], { tools: this.tools.size ? this.toolSpecs() : undefined, addGenerationPrompt: true });
  }

  async prompt(): Promise<{ ids: number[]; text: string }> {
    const text = this.promptText();
    const ids = this.opts.tokenizer.encode(text);
    this.oov.prompt += this.countUnk(ids);
    return { ids, text };
  }

  async step(turn: { text: string; tokenIds?: number[]; stopReason?: string }): Promise<ToolEnvStepResult> {
    this.turns.push(turn.text);
    const parsed = this.opts.format.parse(turn.text);
    const trace: TurnTrace = { text: turn.text, calls: [], errors: parsed.errors };
    this.history.push(trace);
    if (parsed.errors.length) this.formatOk = false;
    if (parsed.answer !== undefined) {
      this.answer = parsed.answer;
      trace.answer = parsed.answer;
      return { done: true, toolCalls: [], stepReward: 0 };
    }
    const limits = this.opts.limits ?? DEFAULT_LIMITS;
    const outcomes: CallOutcome[] = await Promise.all(
      parsed.calls.map((c) => runCall(this.tools, c, limits, { episode: this.state, readFile: this.readFile, signal: this.opts.signal })),
    );
    this.fitResults(outcomes);
    this.toolCalls += outcomes.length;
    this.toolErrors += outcomes.filter((o) => !o.success).length;
    const results = outcomes.filter((o) => o.success).map((o) => o.result);
    this.retrieved.push(...results);
    trace.calls = outcomes.map((o) => ({
      name: o.name,
      args: o.args,
      result: o.result,
      success: o.success,
      ...(o.error !== undefined ? { error: o.error } : {}),
    }));
    const stepReward = this.opts.processRewards === false ? 0 : supportingFactStepReward(results, this.opts.task.supportingFacts ?? [], this.seenFacts);
    // At the turn budget no observation follows: the episode is cut there (the rollout's turn limit,
    // the same number, ends it as truncated: the model never answered).
    const last = this.turns.length >= (this.opts.maxTurns ?? 4);
    return {
      done: false,
      observation: last ? undefined : this.observation(outcomes, parsed.errors, turn),
      toolCalls: outcomes.map((o) => ({ name: o.name, args: o.args, result: o.result, error: o.error, latencyMs: o.latencyMs })),
      stepReward,
    };
  }

  /** The observation after a turn, as text and token ids (see the header). */
  private observation(
    outcomes: CallOutcome[],
    errors: string[],
    turn: { tokenIds?: number[]; stopReason?: string },
  ): { text: string; ids: number[]; role: 'tool' } {
    const { format, tokenizer: tok } = this.opts;
    let text: string;
    if (format.observationMode === 'template' && tok.renderChat) {
      const messages: ChatMessage[] = [
        { role: 'user', content: 'ARBORUSERMARK' },
        { role: 'assistant', content: MARK },
        ...format.toolMessages(outcomes, errors).map((content) => ({ role: 'tool', content })),
      ];
      const full = tok.renderChat(messages, { tools: this.tools.size ? this.toolSpecs() : undefined, addGenerationPrompt: true });
      const at = full.lastIndexOf(MARK);
      text = at < 0 ? format.observation(outcomes, errors) : full.slice(at + MARK.length);
      // The sampled turn already ends with the end-of-turn token: do not repeat it.
      const last = turn.tokenIds?.[turn.tokenIds.length - 1];
      if (at >= 0 && last !== undefined && (turn.stopReason === 'stop_token' || this.opts.endTokenIds?.includes(last)) && tok.decode) {
        const endText = tok.decode([last]);
        const trimmed = text.trimStart();
        if (endText && trimmed.startsWith(endText)) text = trimmed.slice(endText.length);
      }
    } else text = format.observation(outcomes, errors);
    const ids = tok.encode(text);
    this.oov.observation += this.countUnk(ids);
    return { text, ids, role: 'tool' };
  }

  /** Cut the turn's tool results to the observation token budget (equal shares). */
  private fitResults(outcomes: CallOutcome[]): void {
    const budget = this.opts.maxObservationTokens;
    if (!budget || outcomes.length === 0) return;
    const enc = (s: string) => this.opts.tokenizer.encode(s).length;
    const lens = outcomes.map((o) => enc(o.result));
    if (lens.reduce((a, b) => a + b, 0) <= budget) return;
    const share = Math.max(1, Math.floor(budget / outcomes.length));
    outcomes.forEach((o, k) => {
      if (lens[k]! <= share) return;
      let lo = 0,
        hi = o.result.length;
      while (lo < hi) {
        const mid = Math.ceil((lo + hi) / 2);
        if (enc(o.result.slice(0, mid) + TRUNC) <= share) lo = mid;
        else hi = mid - 1;
      }
      o.result = o.result.slice(0, lo) + TRUNC;
    });
  }

  private countUnk(ids: number[]): number {
    const unk = this.opts.tokenizer.unkTokenId;
    if (unk === undefined) return 0;
    let n = 0;
    for (const id of ids) if (id === unk) n++;
    return n;
  }

  summary(): EpisodeSummary {
    const t = this.opts.task;
    return {
      task: t,
      history: this.history,
      answer: this.answer,
      golds: t.answers ?? [],
      turns: this.turns,
      formatOk: this.formatOk && this.answer !== undefined,
      toolCalls: this.toolCalls,
      toolErrors: this.toolErrors,
      retrieved: this.retrieved,
      supporting: t.supportingFacts ?? [],
    };
  }

  async outcome(): Promise<EnvOutcome> {
    const s = this.summary();
    const em = (s.golds.length ? weightedReward({ exact_match: 1 }, s).components.exact_match : 0) ?? 0;
    // The gold answers travel with the outcome so an evaluation can score F1 / pass@k (engine/recipes/eval-harness.ts).
    const base = { exactMatch: em === 1, formatOk: s.formatOk, answer: s.answer, golds: s.golds, oovTokens: this.oov.prompt + this.oov.observation };
    const counts = { tool_calls: s.toolCalls, tool_errors: s.toolErrors };
    if (this.opts.userReward) {
      let value: RewardValue;
      try {
        value = await this.opts.userReward(s);
      } catch (e) {
        if (this.opts.rewardErrors !== 'zero') throw e;
        const message = `${e instanceof Error ? e.message : String(e)} (task ${s.task.id}: scored 0, environment.reward_errors: zero)`;
        (this.opts.onRewardError ?? ((m: string) => process.stderr.write(`warning: reward: ${m}\n`)))(message);
        const builtin: Record<string, number> = s.golds.length ? { exact_match: em } : {};
        return { ...base, reward: 0, components: { ...builtin, user_reward: 0, reward_error: 1, ...counts } };
      }
      const u = normalizeRewardValue(value, this.opts.userRewardName ?? 'reward', s.toolCalls);
      const builtin: Record<string, number> = s.golds.length ? { exact_match: em } : {};
      return {
        ...base,
        reward: u.reward,
        components: { ...builtin, ...u.components, user_reward: u.reward, ...(this.opts.rewardErrors === 'zero' ? { reward_error: 0 } : {}), ...counts },
        ...(u.steps ? { stepRewards: this.stepsPerTurn(u.steps) } : {}),
      };
    }
    const w = weightedReward(this.opts.rewardWeights ?? { exact_match: 1 }, s, this.opts.customRewards);
    return { ...base, reward: w.reward, components: { ...w.components, ...counts } };
  }

  /** Per-call step rewards → the sum per model turn. */
  private stepsPerTurn(steps: number[]): number[] {
    let k = 0;
    return this.history.map((h) => h.calls.reduce((a) => a + (steps[k++] ?? 0), 0));
  }
}

/** The task's user message: its prompt, else its question. */
export function taskPrompt(t: EnvTask): string {
  return t.prompt ?? t.question ?? '';
}
