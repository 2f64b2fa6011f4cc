/**
 * The editor's "try it" for MCP servers (protocol `mcp.tryTool`): start the servers of an
 * `mcpServers` map, list their tools (with schemas) or run one call exactly as an episode would
 * (runCall: argument validation, the server's timeout, errors as observations), then stop them.
 * Returns the sandbox try-it's shape: `{ ok, value, error?, logs, ms }`; `value` holds the tools
 * and, for a call, its result.
 */
import { DEFAULT_LIMITS, runCall } from '../tool';
import { McpToolSet } from './client';
import { mcpServersSchema } from './config';

export interface McpTryResult {
  ok: boolean;
  value?: { tools: { name: string; description: string; parameters: Record<string, unknown> }[]; result?: string };
  error?: { message: string; path: string };
  logs: string[];
  ms: number;
}

/**
 * The servers are asked about like every other program (engine/env/consent.ts: the workbench's
 * dialog); a refusal is the try's error and nothing starts.
 */
export async function tryMcp(p: { servers: unknown; tool?: string; args?: unknown }, opts: { baseDir?: string } = {}): Promise<McpTryResult> {
  const t0 = performance.now();
  const logs: string[] = [];
  const done = (r: Omit<McpTryResult, 'logs' | 'ms'>): McpTryResult => ({ ...r, logs, ms: performance.now() - t0 });
  const parsed = mcpServersSchema.safeParse(p.servers);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    return done({ ok: false, error: { message: `${i.path.join('.') || 'servers'}: ${i.message}`, path: 'mcp_servers' } });
  }
  let set: McpToolSet;
  try {
    set = await McpToolSet.open(parsed.data, {
      baseDir: opts.baseDir,
      origin: "the editor's MCP try-it",
      onEvent: (e) => logs.push(`${e.server}: ${e.kind.replace('mcp_', '')}: ${e.message}`),
    });
  } catch (e) {
    return done({ ok: false, error: { message: (e as Error).message, path: 'mcp_servers' } });
  }
  try {
    const tools = set.tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));
    if (!p.tool) return done({ ok: true, value: { tools } });
    const timeout = Math.max(...Object.values(parsed.data).map((s) => s.timeout_ms));
    const out = await runCall(
      new Map(set.tools.map((t) => [t.name, t])),
      { name: p.tool, args: (p.args ?? {}) as Record<string, unknown> },
      { ...DEFAULT_LIMITS, timeoutMs: timeout, maxResultChars: 100_000 },
    );
    return done({
      ok: out.success,
      value: { tools, result: out.result },
      ...(out.success ? {} : { error: { message: out.error ?? out.result, path: `mcp:${p.tool}` } }),
    });
  } finally {
    await set.close();
  }
}
