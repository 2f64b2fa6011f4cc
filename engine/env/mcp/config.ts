/**
 * The `mcpServers` layout (Claude Desktop, Cursor, verl): `{ name: { command, args, env, cwd } }`,
 * plus Arbor's optional `tools` allow-list and `timeout_ms`. Kept apart from the client so the
 * experiment config (engine/config/experiment.ts) validates it without loading the MCP SDK.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';

/** One server in the `mcpServers` layout (stdio only: Arbor starts the process). */
export const mcpServerSchema = z.strictObject({
  /** `stdio` is the only transport Arbor starts; other values are refused with a message. */
  type: z.literal('stdio').optional(),
  command: z.string().min(1).describe('executable to start (e.g. node, npx, uvx, python3)'),
  args: z.array(z.string()).default([]),
  /** Added to the SDK's safe default environment (HOME, PATH, USER, …); nothing else is inherited. */
  env: z.record(z.string(), z.string()).optional(),
  /** Working directory (relative to the config file; default: the config file's folder). */
  cwd: z.string().min(1).optional(),
  /** Allow-list: only these tools of the server are offered to the model (default: all). */
  tools: z.array(z.string().min(1)).min(1).optional(),
  /** Per-call limit in ms; the request is cancelled when it passes (default 30 s). */
  timeout_ms: z.number().int().positive().default(30_000),
});
export const mcpServersSchema = z.record(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'server names use letters, digits, _ . -'), mcpServerSchema);

export type McpServerConfig = z.infer<typeof mcpServerSchema>;
export type McpServersConfig = z.infer<typeof mcpServersSchema>;
export type McpServersInput = z.input<typeof mcpServersSchema>;

/**
 * environment.mcp_servers as a config gives it: the servers inline, or the path of a JSON file
 * holding { mcpServers } (or the servers themselves), read here (`abs` resolves the path against
 * the config's folder); `field` is where a schema error in them points. A file that does not read
 * or parse throws "cannot read <file> (…)". Shared by the config loader and the playground.
 */
export function mcpServersSource(value: unknown, abs: (p: string) => string): { servers: unknown; field: string } {
  if (typeof value !== 'string') return { servers: value, field: 'environment.mcp_servers' };
  const file = abs(value);
  try {
    const j = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    return { servers: j.mcpServers ?? j, field: `${file}: mcpServers` };
  } catch (e) {
    throw new Error(`cannot read ${file} (${(e as Error).message})`);
  }
}

/** Each server's cwd resolved by `abs` (against the config's folder; that folder by default). */
export function withServerCwds(servers: McpServersConfig, abs: (p: string) => string): McpServersConfig {
  return Object.fromEntries(Object.entries(servers).map(([n, s]) => [n, { ...s, cwd: abs(s.cwd ?? '.') }]));
}
