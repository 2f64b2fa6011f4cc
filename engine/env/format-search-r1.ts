/**
 * search-r1: `<search> q1, q2 </search>` (several comma-separated queries per search, RAG-R1
 * style, each a call to the tool `search` with `{ query }`, run in parallel) → the results in
 * `<information> … </information>`; `<answer> … </answer>` ends the episode.
 *
 * Errors: unclosed <search>/<answer>, a <search> nested in another, an empty query, more
 * queries than `maxCalls` (the first ones run), a search and an answer in one turn (see
 * format-common.ts for the precedence), a turn with neither.
 */
import { capCalls, DEFAULT_MAX_CALLS, lastTag, settle, type FormatOptions, type ToolCallFormat } from './format-common';
import type { ParsedCall } from './tool';

export function searchR1Format(opts: Partial<FormatOptions> & { tool?: string; maxQueries?: number } = {}): ToolCallFormat {
  const max = opts.maxQueries ?? opts.maxCalls ?? DEFAULT_MAX_CALLS;
  const tool = opts.tool ?? 'search';
  return {
    name: 'search-r1',
    stopStrings: ['</search>', '</answer>'],
    observationMode: 'inline',
    parse(text) {
      const errors: string[] = [];
      const queries: string[] = [];
      let outside = '';
      let pos = 0;
      for (;;) {
        const i = text.indexOf('<search>', pos);
        if (i < 0) {
          outside += text.slice(pos);
          break;
        }
        outside += text.slice(pos, i);
        const j = text.indexOf('</search>', i + 8);
        if (j < 0) {
          errors.push('missing closing tag </search>');
          break;
        }
        const body = text.slice(i + 8, j);
        pos = j + 9;
        if (body.includes('<search>')) {
          errors.push('nested <search> tags; close one search before opening the next');
          continue;
        }
        const qs = body
          .split(',')
          .map((q) => q.trim())
          .filter(Boolean);
        if (qs.length === 0) errors.push('empty search query');
        queries.push(...qs);
      }
      const ans = lastTag(outside, 'answer');
      if (ans.unclosed) errors.push('missing closing tag </answer>');
      const calls: ParsedCall[] = capCalls(
        queries.map((q) => ({ name: tool, args: { query: q } })),
        max,
        errors,
        'queries',
      );
      return settle(calls, ans.content, errors, 'use <search> query </search> or <answer> … </answer>');
    },
    observation(outcomes, errors) {
      const parts = [...errors.map((e) => `Error: ${e}`), ...outcomes.map((o) => o.result)];
      return ` <information> ${parts.join(' ')} </information> `;
    },
    toolMessages(outcomes, errors) {
      return [...errors.map((e) => `Error: ${e}`), ...outcomes.map((o) => o.result)];
    },
    writeCalls(calls) {
      return `<search> ${calls.map((c) => String(c.args.query ?? '')).join(' , ')} </search>`;
    },
    writeAnswer: (a) => `<answer> ${a} </answer>`,
    instruction() {
      return 'answer the question . use <search> query </search> to search , then give <answer> answer </answer> .';
    },
  };
}
