/**
 * search-r1: `<search> q1, q2 </search>` (several comma-separated queries per search, RAG-R1
 * style, each a call to the tool `search` with `{ query }`, run in parallel) → the results in
 * `<information> … </information>`; `<answer> … </answer>` ends the episode.
 *
 * Errors: unclosed <search>/<answer>, a <search> nested in another, an empty query, more
 * queries than `maxCalls` (the first ones run), a search and an answer in one turn (see
 * format-common.ts for the precedence), a turn with neither.
 */
import { DEFAULT_MAX_CALLS, inlineObservation, parseTurn, resultMessages, type FormatOptions, type ToolCallFormat } from './format-common';

export function searchR1Format(opts: Partial<FormatOptions> & { tool?: string; maxQueries?: number } = {}): ToolCallFormat {
  const max = opts.maxQueries ?? opts.maxCalls ?? DEFAULT_MAX_CALLS;
  const tool = opts.tool ?? 'search';
  return {
    name: 'search-r1',
    stopStrings: ['</search>', '</answer>'],
    observationMode: 'inline',
    parse(text) {
      return parseTurn(text, {
        next: (pos) => {
          const i = text.indexOf('<search>', pos);
          return i < 0 ? null : { index: i };
        },
        call: ({ index: i }, calls, errors) => {
          const j = text.indexOf('</search>', i + 8);
          if (j < 0) {
            errors.push('missing closing tag </search>');
            return -1;
          }
          const body = text.slice(i + 8, j);
          if (body.includes('<search>')) {
            errors.push('nested <search> tags; close one search before opening the next');
            return j + 9;
          }
          const qs = body
            .split(',')
            .map((q) => q.trim())
            .filter(Boolean);
          if (qs.length === 0) errors.push('empty search query');
          calls.push(...qs.map((q) => ({ name: tool, args: { query: q } })));
          return j + 9;
        },
        max,
        what: 'queries',
        hint: 'use <search> query </search> or <answer> … </answer>',
      });
    },
    observation: (outcomes, errors) => inlineObservation('information', outcomes, errors),
    toolMessages: resultMessages,
    writeCalls(calls) {
      return `<search> ${calls.map((c) => String(c.args.query ?? '')).join(' , ')} </search>`;
    },
    writeAnswer: (a) => `<answer> ${a} </answer>`,
    instruction() {
      return 'answer the question . use <search> query </search> to search , then give <answer> answer </answer> .';
    },
  };
}
