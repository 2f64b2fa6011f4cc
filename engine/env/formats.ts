/**
 * Tool-call formats: how a model's turn is parsed into actions and how results are written back.
 * A registry, chosen per environment by `environment.format` (experiment config), the launch
 * form and the playground. A format is one file: a `(options) => ToolCallFormat` factory and its
 * entry here (built in), or a file that calls `registerFormat` (a config's `plugins:`; README
 * "Write your own tool-call format").
 *
 *  search-r1  format-search-r1.ts  `<search>q1, q2</search>` → `<information>…</information>`
 *  hermes     format-hermes.ts     `<tool_call>{"name", "arguments"}</tool_call>` → tool messages via the chat template
 *  tags       format-tags.ts       `<toolname>…</toolname>` → `<result>…</result>`
 *
 * Every format ends the episode on `<answer>…</answer>`. Precedence when a turn holds both a call
 * and an answer: the calls run, the answer is ignored, and the observation says so
 * (format-common.ts). Parsers never throw; every malformed input is an error observation.
 * Text inside arguments is data: it is never interpreted as tags beyond the parse above.
 */
import type { FormatOptions, ToolCallFormat } from './format-common';
import { hermesFormat } from './format-hermes';
import { searchR1Format } from './format-search-r1';
import { tagsFormat } from './format-tags';

export type { FormatOptions, ParsedTurn, ToolCallFormat, ToolInfo } from './format-common';
export { CALL_AND_ANSWER, DEFAULT_MAX_CALLS } from './format-common';
export { hermesFormat, searchR1Format, tagsFormat };

/** A registered format: what the launch form and the playground show, the factory, and which tools it cannot call. */
export interface FormatEntry {
  describe: string;
  create: (o: FormatOptions) => ToolCallFormat;
  /** Why this format cannot call these tools (named in the error that refuses the environment), or undefined when it can. */
  toolProblem?: (tools: { name: string; parameters: Record<string, unknown> }[]) => string | undefined;
}

const FORMATS: Record<string, FormatEntry> = {
  'search-r1': {
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
  },
  hermes: {
    describe: '<tool_call>{"name": …, "arguments": {…}}</tool_call>, several per turn; tools and results through the chat template',
    create: (o) => hermesFormat(o),
  },
  tags: { describe: '<toolname> … </toolname> per tool → <result> … </result>', create: (o) => tagsFormat(o) },
};

/** The registered format names (for the config schema, the launch form, the playground); registerFormat adds to it. */
export const FORMAT_NAMES = Object.keys(FORMATS) as [string, ...string[]];

/** Add a tool-call format under `name` (the config's `environment.format`). A name already taken is refused. */
export function registerFormat(name: string, entry: FormatEntry): void {
  if (!/^[a-z][a-z0-9_-]*$/.test(name)) throw new Error(`registerFormat: "${name}" is not a config name (lowercase letters, digits, _ and -)`);
  if (FORMATS[name]) throw new Error(`registerFormat: a tool-call format "${name}" is already registered`);
  FORMATS[name] = entry;
  FORMAT_NAMES.push(name);
}

export function formatDescriptions(): { name: string; description: string }[] {
  return Object.entries(FORMATS).map(([name, f]) => ({ name, description: f.describe }));
}

export function formatByName(name: string, opts: FormatOptions = { tools: [] }): ToolCallFormat {
  const f = FORMATS[name];
  if (!f) throw new Error(`unknown tool-call format "${name}" (available: ${FORMAT_NAMES.join(', ')})`);
  return f.create(opts);
}

/** Why a format cannot call these tools (its entry's `toolProblem`), or undefined when it can. */
export function formatToolProblem(format: string, tools: { name: string; parameters: Record<string, unknown> }[]): string | undefined {
  return FORMATS[format]?.toolProblem?.(tools);
}
