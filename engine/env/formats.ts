/**
 * Tool-call formats: how a model's turn is parsed into actions and how results are written
 * back. Chosen per environment.
 *
 *  search-r1: `<search>q1, q2</search>` (up to `maxQueries` comma-separated queries, RAG-R1
 *             style, run in parallel) → `<information>…</information>`; `<answer>…</answer>` ends.
 *  hermes:    `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (several per turn) →
 *             `<tool_response>…</tool_response>`; `<answer>…</answer>` ends.
 *
 * Parser error paths (each becomes an observation; the episode goes on):
 *  - a turn with neither a call nor an answer         → "Error: no tool call or answer found …"
 *  - an opening tag without its closing tag           → "Error: missing closing tag </…>"
 *  - invalid JSON in <tool_call>                      → "Error: invalid JSON in tool call: …"
 *  - JSON without a string "name"                     → "Error: tool call needs a string \"name\" …"
 *  - an empty <search></search>                       → "Error: empty search query"
 * Text inside arguments is data: it is never interpreted as tags or instructions beyond the
 * parse above (e.g. a query containing "</information>" is searched for literally).
 */
import type { CallOutcome, ParsedCall } from './tool';

export interface ParsedTurn {
  calls: ParsedCall[];
  /** The final answer, when the turn gives one. */
  answer?: string;
  /** Problems with the turn's structure (no call and no answer, unclosed tags). */
  errors: string[];
}

export interface ToolCallFormat {
  name: 'search-r1' | 'hermes';
  /** Strings that end a model turn (the closing tags). */
  stopStrings: string[];
  parse(text: string): ParsedTurn;
  /** The observation text appended after a turn (loss mask 0). */
  observation(outcomes: CallOutcome[], errors: string[]): string;
  /** One line per tool for the system prompt. */
  describe(tools: { name: string; description: string; parameters: Record<string, unknown> }[]): string;
}

function lastTag(text: string, tag: string): { content?: string; unclosed: boolean } {
  const open = `<${tag}>`, close = `</${tag}>`;
  const i = text.lastIndexOf(open);
  if (i < 0) return { unclosed: false };
  const j = text.indexOf(close, i + open.length);
  if (j < 0) return { unclosed: true };
  return { content: text.slice(i + open.length, j).trim(), unclosed: false };
}

export function searchR1Format(opts: { maxQueries?: number; tool?: string } = {}): ToolCallFormat {
  const maxQueries = opts.maxQueries ?? 3;
  const tool = opts.tool ?? 'search';
  return {
    name: 'search-r1',
    stopStrings: ['</search>', '</answer>'],
    parse(text) {
      const errors: string[] = [];
      const ans = lastTag(text.replace(/<search>[\s\S]*?(<\/search>|$)/g, ' '), 'answer');
      if (ans.content !== undefined) return { calls: [], answer: ans.content, errors };
      if (ans.unclosed) errors.push('missing closing tag </answer>');
      const s = lastTag(text, 'search');
      if (s.unclosed) errors.push('missing closing tag </search>');
      const calls: ParsedCall[] = [];
      if (s.content !== undefined) {
        const queries = s.content.split(',').map((q) => q.trim()).filter(Boolean);
        if (queries.length === 0) errors.push('empty search query');
        for (const q of queries.slice(0, maxQueries)) calls.push({ name: tool, args: { query: q } });
        if (queries.length > maxQueries) errors.push(`only the first ${maxQueries} queries of one search are run`);
      }
      if (calls.length === 0 && errors.length === 0) errors.push('no tool call or answer found; use <search> query </search> or <answer> … </answer>');
      return { calls, errors };
    },
    observation(outcomes, errors) {
      const parts = [...errors.map((e) => `Error: ${e}`), ...outcomes.map((o) => o.result)];
      return ` <information> ${parts.join(' ')} </information> `;
    },
    describe(tools) {
      return tools.map((t) => `${t.name}: ${t.description}`).join(' ');
    },
  };
}

export function hermesFormat(): ToolCallFormat {
  const OPEN = '<tool_call>', CLOSE = '</tool_call>';
  return {
    name: 'hermes',
    stopStrings: [CLOSE, '</answer>'],
    parse(text) {
      const errors: string[] = [];
      const calls: ParsedCall[] = [];
      let outside = '';
      let pos = 0;
      for (;;) {
        const i = text.indexOf(OPEN, pos);
        if (i < 0) {
          outside += text.slice(pos);
          break;
        }
        outside += text.slice(pos, i);
        // The body ends at the first closing tag after which it is valid JSON, so a closing tag
        // inside an argument string does not cut the call short.
        const from = i + OPEN.length;
        let j = text.indexOf(CLOSE, from);
        if (j < 0) {
          errors.push(`missing closing tag ${CLOSE}`);
          break;
        }
        let end = j, obj: unknown, err: string | undefined;
        for (; j >= 0; j = text.indexOf(CLOSE, j + 1)) {
          try {
            obj = JSON.parse(text.slice(from, j));
            end = j;
            err = undefined;
            break;
          } catch (e) {
            err ??= (e as Error).message;
          }
        }
        const body = text.slice(from, end).trim();
        pos = end + CLOSE.length;
        if (err !== undefined) {
          calls.push({ name: '?', args: body, parseError: `invalid JSON in tool call: ${err}` });
          continue;
        }
        const o = obj as { name?: unknown; arguments?: unknown };
        if (!o || typeof o !== 'object' || typeof o.name !== 'string') {
          calls.push({ name: '?', args: body, parseError: 'tool call needs a string "name" and an "arguments" object' });
          continue;
        }
        const args = typeof o.arguments === 'string' ? safeJson(o.arguments) : o.arguments ?? {};
        calls.push({ name: o.name, args: args as Record<string, unknown> | string });
      }
      // An answer counts only outside tool calls: argument text is data.
      const ans = lastTag(outside, 'answer');
      if (ans.content !== undefined && calls.length === 0) return { calls: [], answer: ans.content, errors };
      if (ans.unclosed) errors.push('missing closing tag </answer>');
      if (calls.length === 0 && errors.length === 0) errors.push('no tool call or answer found; use <tool_call>{"name": …, "arguments": {…}}</tool_call> or <answer> … </answer>');
      return { calls, errors };
    },
    observation(outcomes, errors) {
      const parts = [...errors.map((e) => `<tool_response> Error: ${e} </tool_response>`), ...outcomes.map((o) => `<tool_response> ${o.result} </tool_response>`)];
      return ` ${parts.join(' ')} `;
    },
    describe(tools) {
      return tools.map((t) => JSON.stringify({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })).join('\n');
    },
  };
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

export function formatByName(name: string): ToolCallFormat {
  if (name === 'search-r1') return searchR1Format();
  if (name === 'hermes') return hermesFormat();
  throw new Error(`unknown tool-call format "${name}" (available: search-r1, hermes)`);
}
