/**
 * Arbor's tools as an MCP server (the server side of engine/interop): any set of engine/env
 * `Tool`s (a workspace environment's sandboxed TypeScript tools, or an experiment's environment)
 * listed with their JSON schemas and called through the same `runCall` as in training, so the
 * arguments are validated (ajv), the call is timed out, and a failing tool becomes an
 * `isError: true` result with the error text, never a protocol error.
 *
 * Transports:
 *  - stdio (`serveMcpStdio`): for clients that start the server (Claude Desktop, verl `type: mcp`);
 *  - streamable HTTP on 127.0.0.1 (`serveMcpHttp`), stateless, JSON responses, every request must
 *    carry `Authorization: Bearer <token>` (a random token per launch unless one is given, or
 *    ARBOR_MCP_TOKEN from the environment: never on a command line); a request without it gets
 *    401 and never reaches a tool, one with a foreign Host or Origin 403.
 *
 * Per-episode state: a call's `_meta["arbor/episode"]` object (e.g. verl's per-sample
 * `create_kwargs`, which the exported tool class sends) becomes the tool's `ctx.episode`, so a
 * tool can tell which task it serves (the multi-hop task's search picks the question's world).
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULT_LIMITS, runCall, type CallLimits, type Tool } from '../env/tool';
import { BAD_REQUEST, HEADERS_TOO_LARGE, refusal, safeDecode, safeEqual } from '../base/http-guard';

export const EPISODE_META_KEY = 'arbor/episode';

export interface McpServeOptions {
  /** Server name shown to clients. */
  name?: string;
  limits?: CallLimits;
  /** Called after each call (CLI logging). */
  onCall?: (c: { name: string; success: boolean; latencyMs: number }) => void;
}

/** An MCP `Server` (low-level SDK class) serving the tools; connect it to a transport. */
export function createMcpServer(tools: Tool[], opts: McpServeOptions = {}): Server {
  const byName = new Map(tools.map((t) => [t.name, t]));
  const server = new Server({ name: opts.name ?? 'arbor', version: '0.1.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map((t) => ({ name: t.name, description: t.description, inputSchema: { type: 'object' as const, ...t.parameters } })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req): Promise<CallToolResult> => {
    const meta = req.params._meta as Record<string, unknown> | undefined;
    const ep = meta?.[EPISODE_META_KEY];
    const episode = ep && typeof ep === 'object' && !Array.isArray(ep) ? { ...(ep as Record<string, unknown>) } : {};
    const out = await runCall(byName, { name: req.params.name, args: req.params.arguments ?? {} }, opts.limits ?? DEFAULT_LIMITS, { episode });
    opts.onCall?.({ name: out.name, success: out.success, latencyMs: out.latencyMs });
    // The text is the observation training shows the model (a framework failure reads "Error: …",
    // a tool's own failure its content), so an exported verl run sees what Arbor's episodes see.
    return { content: [{ type: 'text', text: out.result }], ...(out.success ? {} : { isError: true }) };
  });
  return server;
}

/** Serve over this process's stdin/stdout until the client disconnects. */
export async function serveMcpStdio(tools: Tool[], opts: McpServeOptions = {}): Promise<{ closed: Promise<void> }> {
  const server = createMcpServer(tools, opts);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
    process.stdin.once('end', () => resolve());
  });
  await server.connect(transport);
  return { closed };
}

export interface McpHttpHandle {
  /** The endpoint, e.g. http://127.0.0.1:53124/mcp */
  url: string;
  token: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Streamable HTTP on 127.0.0.1 (`/mcp`), stateless (each POST is a complete exchange, so many
 * rollout workers can call at once), bearer-token protected (compared in constant time; the
 * token is accepted in the Authorization header only, never in the URL). Before anything else a
 * request must name a loopback Host and, when it has an Origin, this server's own (http-guard.ts;
 * the SDK's DNS-rebinding protection is switched on with the same lists as a second check), so a
 * web page cannot reach the tools by DNS rebinding. A malformed URL answers 400.
 */
export async function serveMcpHttp(tools: Tool[], opts: McpServeOptions & { port?: number; token?: string } = {}): Promise<McpHttpHandle> {
  const token = opts.token ?? randomBytes(24).toString('hex');
  let port = 0;
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    const deny = (code: number, message: string) => {
      res.writeHead(code, { 'content-type': 'application/json', ...(code === 401 ? { 'www-authenticate': 'Bearer' } : {}) });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message }, id: null }));
    };
    const why = refusal(req, port);
    if (why) return deny(403, `forbidden: ${why}`);
    let path: string | undefined;
    try {
      path = safeDecode(new URL(req.url ?? '/', 'http://127.0.0.1').pathname);
    } catch {
      path = undefined;
    }
    if (path === undefined) return deny(400, 'bad request: the path is not a valid URL path');
    if (path !== '/mcp') return deny(404, `not found: ${JSON.stringify(path.slice(0, 200))} (the MCP endpoint is /mcp)`);
    const auth = req.headers.authorization ?? '';
    const given = auth.startsWith('Bearer ') ? auth.slice(7).trim() : '';
    if (!given || !safeEqual(given, token))
      return deny(401, 'missing or wrong token (send Authorization: Bearer <token>, printed by `arbor mcp serve --http`)');
    if (req.method !== 'POST') return deny(405, 'stateless server: POST JSON-RPC requests to /mcp');
    const server = createMcpServer(tools, opts);
    const own = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`];
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      enableDnsRebindingProtection: true,
      allowedHosts: own,
      allowedOrigins: own.map((h) => `http://${h}`),
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    server
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch((e: Error) => {
        if (!res.headersSent) deny(500, e.message);
      });
  });
  http.on('clientError', (e: NodeJS.ErrnoException, socket) => {
    // what the HTTP parser refuses (a null byte, a huge header, not HTTP at all): 431 or 400, never a crash
    if (socket.writable) socket.end(e.code === 'HPE_HEADER_OVERFLOW' ? HEADERS_TOO_LARGE : BAD_REQUEST);
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  port = (http.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    token,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
