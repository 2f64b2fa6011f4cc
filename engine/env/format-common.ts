/**
 * What every tool-call format shares (engine/env/formats.ts is the registry; one file per format:
 * format-search-r1.ts, format-hermes.ts, format-tags.ts).
 *
 * Precedence, the same in every format: a turn that both calls tools and gives an answer runs
 * its calls and IGNORES the answer, with an error in the observation ("a turn either calls tools
 * or answers …"), so the model answers in a turn of its own after reading the results. The turn
 * does not count as well formatted.
 *
 * Parsers never throw: every malformed input (unclosed or nested tags, invalid JSON, a call
 * without a name, too many calls in one turn, a call and an answer together) becomes an entry of
 * `errors` or a call carrying `parseError`, and ToolEnv turns both into error observations the
 * model reads. Unknown tools, schema violations and oversized arguments are caught by runCall
 * (engine/env/tool.ts) before `execute`.
 */
import type { CallOutcome, ParsedCall } from './tool';

export interface ToolInfo {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface ParsedTurn {
  calls: ParsedCall[];
  /** The final answer, when the turn gives one (and calls no tool). */
  answer?: string;
  /** Problems with the turn's structure; each becomes an error observation. */
  errors: string[];
}

export interface FormatOptions {
  /** The tools the model may call (names, descriptions, JSON-schema parameters). */
  tools: ToolInfo[];
  /** Most calls run from one turn (search-r1: queries of one search); the rest are refused with an error. Default 2. */
  maxCalls?: number;
}

export interface ToolCallFormat {
  name: string;
  /** Strings that end a model turn (besides the model's end-of-turn token). */
  stopStrings: string[];
  parse(text: string): ParsedTurn;
  /**
   * How results go back to the model: 'inline' appends `observation()` right after the turn
   * (Search-R1, ARPO); 'template' renders `toolMessages()` as tool messages through the model's
   * chat template (Hermes/Qwen).
   */
  observationMode: 'inline' | 'template';
  /**
   * How its observations read in a transcript (a verl rollout's decoded text), the observation the
   * first group, global; default: the chat template's <tool_response> blocks (interop/environment.ts).
   */
  transcriptObservation?: RegExp;
  /** The text appended after a turn (loss mask 0) in 'inline' mode. */
  observation(outcomes: CallOutcome[], errors: string[]): string;
  /** One tool message per call result or error ('template' mode). */
  toolMessages(outcomes: CallOutcome[], errors: string[]): string[];
  /** The instruction put before the task's prompt: how to call the tools and how to answer. */
  instruction(): string;
  /** Write calls in this format (scripted experts, demonstrations, tests). */
  writeCalls(calls: { name: string; args: Record<string, unknown> }[]): string;
  /** Write a final answer in this format. */
  writeAnswer(answer: string): string;
}

export const DEFAULT_MAX_CALLS = 2;

export const CALL_AND_ANSWER = 'a turn either calls tools or answers: the calls ran and the answer was ignored; give <answer> … </answer> in a turn of its own';

/** The body of the last <tag>…</tag> in text. */
export function lastTag(text: string, tag: string): { content?: string; unclosed: boolean } {
  const open = `<${tag}>`,
    close = `</${tag}>`;
  const i = text.lastIndexOf(open);
  if (i < 0) return { unclosed: false };
  const j = text.indexOf(close, i + open.length);
  if (j < 0) return { unclosed: true };
  return { content: text.slice(i + open.length, j).trim(), unclosed: false };
}

/** Keep the first `max` calls; note the refusal of the rest. */
export function capCalls(calls: ParsedCall[], max: number, errors: string[], what = 'tool calls'): ParsedCall[] {
  if (calls.length <= max) return calls;
  errors.push(`only ${max} ${what} run per turn; ${calls.length - max} more were ignored`);
  return calls.slice(0, max);
}

/** Apply the shared precedence: calls and an answer in one turn → the calls run, the answer is ignored with an error. */
export function settle(calls: ParsedCall[], answer: string | undefined, errors: string[], noActionHint: string): ParsedTurn {
  if (answer !== undefined && calls.length === 0) return { calls, answer, errors };
  if (answer !== undefined) errors.push(CALL_AND_ANSWER);
  if (calls.length === 0 && errors.length === 0) errors.push(`no tool call or answer found; ${noActionHint}`);
  return { calls, errors };
}

/**
 * The parse every format shares. The turn is walked from one call's opening tag to the next
 * (`next(pos)`: the next opening at or after `pos`, or null); `call` reads the call that starts
 * there, pushing to `calls` / `errors`, and returns where the walk goes on, or -1 when the rest of
 * the turn cannot be read. Then the answer, which counts only outside the calls (argument text is
 * data), the cap on calls per turn (`what` names them in its error), and the shared precedence.
 */
export function parseTurn<M extends { index: number }>(
  text: string,
  o: { next(pos: number): M | null; call(m: M, calls: ParsedCall[], errors: string[]): number; max: number; what?: string; hint: string },
): ParsedTurn {
  const errors: string[] = [];
  const calls: ParsedCall[] = [];
  let outside = '';
  let pos = 0;
  for (;;) {
    const m = o.next(pos);
    if (!m) {
      outside += text.slice(pos);
      break;
    }
    outside += text.slice(pos, m.index);
    const after = o.call(m, calls, errors);
    if (after < 0) break;
    pos = after;
  }
  const ans = lastTag(outside, 'answer');
  if (ans.unclosed) errors.push('missing closing tag </answer>');
  return settle(capCalls(calls, o.max, errors, o.what), ans.content, errors, o.hint);
}

/** One message per error (first) and per call result: what the model reads back after a turn. */
export function resultMessages(outcomes: CallOutcome[], errors: string[]): string[] {
  return [...errors.map((e) => `Error: ${e}`), ...outcomes.map((o) => o.result)];
}

/** An 'inline' format's observation: every message in one `<tag> … </tag>` block. */
export function inlineObservation(tag: string, outcomes: CallOutcome[], errors: string[]): string {
  return ` <${tag}> ${resultMessages(outcomes, errors).join(' ')} </${tag}> `;
}

export function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

/** Properties of a tool's argument schema. */
export function schemaProperties(t: ToolInfo): string[] {
  const p = (t.parameters as { properties?: Record<string, unknown> }).properties;
  return p ? Object.keys(p) : [];
}
