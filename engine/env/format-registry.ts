/**
 * The tool-call format registry, keyed by `environment.format` (experiment config), the launch
 * form and the playground. An entry (one format-<name>.ts module, or a config's `plugins:` file;
 * README "Write your own tool-call format") registers everything about itself: what the launch form
 * and the playground show, the `(options) => ToolCallFormat` factory, which tools it cannot call,
 * and what `arbor export verl` writes for it.
 */
import { NamedRegistry, type VerlRow } from '../base/registry';
import type { FormatOptions, ToolCallFormat } from './format-common';

/** A registered format: what the launch form and the playground show, the factory, and which tools it cannot call. */
export interface FormatEntry {
  /** The config's default environment.format (one entry: the built-in search-r1). */
  default?: boolean;
  describe: string;
  create: (o: FormatOptions) => ToolCallFormat;
  /** Why this format cannot call these tools (named in the error that refuses the environment), or undefined when it can. */
  toolProblem?: (tools: { name: string; parameters: Record<string, unknown> }[]) => string | undefined;
  /**
   * `arbor export verl`: the rows of a format verl's tool agent loop parses itself (environment.format),
   * or, for one it cannot, advice for the export's README (the export then says verl has no parser for it).
   */
  verl?: { rows?: VerlRow[]; advice?: string };
}

/** Every format: the built-in ones (listed in ./formats.ts) and those registered since. */
const registry = new NamedRegistry<FormatEntry>(['registerFormat', 'a tool-call format', 'environment.format', 'tool-call format'], /^[a-z][a-z0-9_-]*$/);

/**
 * The registered format names, the default first (for the config schema, the launch form, the
 * playground); registerFormat adds to it. Typed non-empty for z.enum: ./formats.ts registers the
 * built-in ones before anything reads it.
 */
export const FORMAT_NAMES = [] as string[] as [string, ...string[]];

/** Add a tool-call format under `name` (the config's `environment.format`). A name already taken is refused. */
export function registerFormat(name: string, entry: FormatEntry): void {
  registry.register(name, entry);
  FORMAT_NAMES.splice(0, FORMAT_NAMES.length, ...registry.names());
}

export function formatEntry(name: string): FormatEntry {
  return registry.get(name);
}

export function formatDescriptions(): { name: string; description: string }[] {
  return registry.entriesList().map(([name, f]) => ({ name, description: f.describe }));
}

export function formatByName(name: string, opts: FormatOptions = { tools: [] }): ToolCallFormat {
  return registry.get(name).create(opts);
}

/** Why a format cannot call these tools (its entry's `toolProblem`), or undefined when it can. */
export function formatToolProblem(format: string, tools: { name: string; parameters: Record<string, unknown> }[]): string | undefined {
  return registry.has(format) ? registry.get(format).toolProblem?.(tools) : undefined;
}
