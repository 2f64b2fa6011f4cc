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
import { registerFormat } from './format-registry';

export function searchR1Format(opts: Partial<FormatOptions> & { tool?: string; maxQueries?: number } = {}): ToolCallFormat {
  const max = opts.maxQueries ?? opts.maxCalls ?? DEFAULT_MAX_CALLS;
  const tool = opts.tool ?? 'search';
  return {
    name: 'search-r1',
    stopStrings: ['</search>', '</answer>'],
    observationMode: 'inline',
    transcriptObservation: /<information>([\s\S]*?)<\/information>/g,
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

registerFormat('search-r1', {
  default: true,
  describe: '<search> q1, q2 </search> → <information> … </information> (calls the tool "search" with { query })',
  create: (o) => searchR1Format(o),
  // search-r1 calls only a tool named "search" taking { query }.
  toolProblem: (tools) => {
    for (const t of tools) {
      if (t.name !== 'search')
        return `tool "${t.name}" cannot be called by the search-r1 format (it calls only a tool named "search" taking { query }); use environment.format "hermes" or "tags" for other tools`;
      const props = (t.parameters as { properties?: Record<string, unknown> }).properties;
      if (!props || !('query' in props)) return 'the "search" tool must take a "query" argument (the search-r1 format calls it with { query })';
    }
    return undefined;
  },
  verl: {
    advice:
      "A model trained on Search-R1 tags (`<search>`) will not call tools through it until it learns the Hermes form: prefer an environment with `environment.format: hermes`, or use verl's Search-R1 agent loop.",
  },
});
