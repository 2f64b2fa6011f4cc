/**
 * Tool-call formats: how a model's turn is parsed into actions and how results are written back.
 * A registry (./format-registry.ts), chosen per environment by `environment.format` (experiment
 * config), the launch form and the playground. A format is one file that registers itself
 * (registerFormat) with everything about it; the built-in ones are listed here, the first the
 * default; a config's `plugins:` file adds more (README "Write your own tool-call format").
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
import { searchR1Format } from './format-search-r1';
import { hermesFormat } from './format-hermes';
import { tagsFormat } from './format-tags';

export type { FormatOptions, ParsedTurn, ToolCallFormat, ToolInfo } from './format-common';
export { CALL_AND_ANSWER, DEFAULT_MAX_CALLS } from './format-common';
export { formatByName, formatDescriptions, formatEntry, formatToolProblem, FORMAT_NAMES, registerFormat, type FormatEntry } from './format-registry';
export { hermesFormat, searchR1Format, tagsFormat };
