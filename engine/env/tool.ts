/**
 * The Tool API (public: users write their own tools against it).
 *
 * A tool has a name, a description, JSON-schema parameters and `execute(args, ctx)`. Arguments
 * come from the model and are untrusted: they are validated against the schema (ajv) before
 * `execute` runs, and every failure (unknown tool, invalid JSON, schema violation, oversized
 * arguments, timeout, a throwing tool) becomes an error observation the model reads, never an
 * exception that ends the episode.
 */
import { Ajv, type Options, type ValidateFunction } from 'ajv';
import { RE2JS } from 're2js';
import { workspaceReader } from './workspace-read';

export interface ToolResult {
  content: string;
  success: boolean;
  metadata?: Record<string, unknown>;
}

export interface ToolContext {
  /** Aborted when the call times out or the episode is cancelled. */
  signal: AbortSignal;
  /** Free-form episode state shared by the tools of one episode (a fresh object for the next episode). */
  episode: Record<string, unknown>;
  /**
   * Read a file under the workspace (read-only; a path relative to the workspace folder, e.g.
   * `data/corpus.jsonl`), so a tool can load its corpus. Paths outside the workspace are refused.
   */
  readFile(path: string): string;
}

export interface Tool {
  name: string;
  description: string;
  /** JSON schema of the arguments object. */
  parameters: Record<string, unknown>;
  execute(args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult> | ToolResult;
}

/** A call as parsed from the model's text, before it runs. */
export interface ParsedCall {
  name: string;
  /** Parsed arguments, or the raw text when it could not be parsed. */
  args: Record<string, unknown> | string;
  /** Set when parsing already failed (e.g. invalid JSON); the call is not executed. */
  parseError?: string;
}

/** What happened when a call ran. */
export interface CallOutcome {
  name: string;
  args: unknown;
  /** Observation content shown to the model (the tool's content, or the error text). */
  result: string;
  success: boolean;
  error?: string;
  latencyMs: number;
  metadata?: Record<string, unknown>;
  /** What the tool threw, when it threw (for the sandbox to point at the line). */
  thrown?: unknown;
}

export interface CallLimits {
  timeoutMs: number;
  /** Largest accepted argument payload (JSON characters). */
  maxArgChars: number;
  /** Longest observation kept from one call (characters); the rest is cut with a marker. */
  maxResultChars: number;
}

export const DEFAULT_LIMITS: CallLimits = { timeoutMs: 5000, maxArgChars: 2000, maxResultChars: 4000 };

/**
 * A schema's `pattern` and `patternProperties` run on RE2 (re2js: linear time), not V8's
 * backtracking engine: a schema comes from a tool file someone shared, and a nested quantifier
 * (`^(a+)+$`) over 40 characters of arguments held the engine for hours. RE2 refuses
 * backreferences and lookarounds: such a schema is an invalid one, named with its tool.
 */
const re2: NonNullable<NonNullable<Options['code']>['regExp']> = Object.assign(
  (pattern: string, flags: string) => {
    const re = RE2JS.compile(pattern, flags.includes('i') ? RE2JS.CASE_INSENSITIVE : 0);
    // (ajv keeps compiled patterns by their toString: a RegExp's, distinct per pattern and flags)
    return { test: (s: string) => re.matcher(s).find(), toString: () => `/${pattern}/${flags}` };
  },
  { code: 're2js' },
);
const ajv = new Ajv({ allErrors: true, strict: false, code: { regExp: re2 } });
const validators = new WeakMap<Tool, ValidateFunction>();

function validatorFor(tool: Tool): ValidateFunction {
  let v = validators.get(tool);
  if (!v) {
    try {
      v = ajv.compile(tool.parameters);
    } catch (e) {
      throw new Error(`tool "${tool.name}": invalid parameters schema (${(e as Error).message})`);
    }
    validators.set(tool, v);
  }
  return v;
}

/** Why a tool's `parameters` is not a JSON Schema the arguments can be checked against (null: it is). */
export function toolSchemaProblem(tool: Tool): string | null {
  try {
    validatorFor(tool);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

export { MAX_READ_BYTES, workspaceReader } from './workspace-read';

/** What an episode lends its calls: the shared state, the workspace reader, the episode's cancellation. */
export interface CallEnv {
  episode?: Record<string, unknown>;
  readFile?: (path: string) => string;
  /** Aborts every call of the episode (the per-call timeout aborts only its own call). */
  signal?: AbortSignal;
}

/** Run one parsed call against a tool set; never throws. */
export async function runCall(tools: Map<string, Tool>, call: ParsedCall, limits: CallLimits = DEFAULT_LIMITS, env: CallEnv = {}): Promise<CallOutcome> {
  const t0 = performance.now();
  const fail = (error: string): CallOutcome => ({
    name: call.name,
    args: call.args,
    result: `Error: ${error}`,
    success: false,
    error,
    latencyMs: performance.now() - t0,
  });
  if (call.parseError) return fail(call.parseError);
  const tool = tools.get(call.name);
  if (!tool) return fail(`unknown tool "${call.name}"; available tools: ${[...tools.keys()].join(', ')}`);
  if (typeof call.args === 'string') return fail(`arguments for "${call.name}" must be a JSON object`);
  const size = JSON.stringify(call.args).length;
  if (size > limits.maxArgChars) return fail(`arguments for "${call.name}" are too large (${size} characters, limit ${limits.maxArgChars})`);
  const validate = validatorFor(tool);
  if (!validate(call.args)) {
    const msg = (validate.errors ?? []).map((e) => `${e.instancePath || 'arguments'} ${e.message}`).join('; ');
    return fail(`invalid arguments for "${call.name}": ${msg}`);
  }
  const ac = new AbortController();
  const onEpisodeAbort = () => ac.abort(env.signal?.reason);
  env.signal?.addEventListener('abort', onEpisodeAbort, { once: true });
  if (env.signal?.aborted) ac.abort(env.signal.reason);
  const ctx: ToolContext = { signal: ac.signal, episode: env.episode ?? {}, readFile: env.readFile ?? workspaceReader(undefined) };
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        ac.abort(new Error(`tool "${call.name}" timed out after ${limits.timeoutMs} ms`));
        reject(new Error(`tool "${call.name}" timed out after ${limits.timeoutMs} ms`));
      }, limits.timeoutMs);
    });
    const r = await Promise.race([Promise.resolve().then(() => tool.execute(call.args as Record<string, unknown>, ctx)), timeout]);
    let content = String(r.content ?? '');
    if (content.length > limits.maxResultChars) content = `${content.slice(0, limits.maxResultChars)} …[truncated]`;
    return {
      name: call.name,
      args: call.args,
      result: content,
      success: r.success !== false,
      error: r.success === false ? content : undefined,
      latencyMs: performance.now() - t0,
      metadata: r.metadata,
    };
  } catch (e) {
    const msg = e && typeof e === 'object' && 'message' in e ? String((e as Error).message) : String(e);
    return { ...fail(msg.startsWith('tool "') ? msg : `tool "${call.name}" failed: ${msg}`), thrown: e };
  } finally {
    clearTimeout(timer);
    env.signal?.removeEventListener('abort', onEpisodeAbort);
  }
}
