/**
 * The `mcpServers` layout (Claude Desktop, Cursor, verl): `{ name: { command, args, env, cwd } }`,
 * plus Arbor's optional `tools` allow-list and `timeout_ms`. Kept apart from the client so the
 * experiment config (engine/config/experiment.ts) validates it without loading the MCP SDK.
 */
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
