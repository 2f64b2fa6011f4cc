/**
 * MCP servers as Arbor tools (the client side of engine/interop).
 *
 * `McpToolSet.open(servers)` starts each server of an `mcpServers` map (the layout Claude
 * Desktop, Cursor and verl use: `{ name: { command, args, env, cwd } }`, plus Arbor's optional
 * `tools` allow-list and `timeout_ms`) ONCE, lists its tools and exposes each as an ordinary
 * engine/env `Tool` (name, description, the server's JSON-schema `inputSchema` as parameters),
 * so the environment validates the model's arguments with ajv and applies its own call timeout
 * exactly as for built-in and sandboxed tools. `close()` ends every server (call it at the end
 * of the run).
 *
 * What becomes an error observation (never an exception that ends the episode):
 *  - a result with `isError: true` → `success: false` with the server's text;
 *  - a call that outlives `timeout_ms`, or whose `ctx.signal` aborts (the environment's own
 *    timeout, a stopped run) → the request is cancelled (the SDK sends notifications/cancelled)
 *    and the call fails with the reason;
 *  - a protocol error (unknown tool, the server refusing the arguments) → the call fails with it;
 *  - a server that exits: the calls in flight fail with its exit and the tail of its stderr,
 *    the server is started again ONCE (recorded in `restarts` and reported through `onEvent`, which
 *    a run writes to its log); if it dies again its tools answer "unavailable" for the rest of the run.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import type { Tool, ToolContext, ToolResult } from '../tool';
import { mcpServersSchema, type McpServerConfig, type McpServersInput } from './config';

export { mcpServerSchema, mcpServersSchema, type McpServerConfig, type McpServersConfig, type McpServersInput } from './config';

export interface McpEvent {
  kind: 'mcp_started' | 'mcp_exit' | 'mcp_restart' | 'mcp_down' | 'mcp_stderr';
  server: string;
  message: string;
}

export interface McpOpenOptions {
  /** Relative `cwd` values (and the default cwd) resolve against this folder (the config file's). */
  baseDir?: string;
  /** Server lifecycle events (start, exit, restart, given up); a run writes them to its log. */
  onEvent?: (e: McpEvent) => void;
  /** Time allowed for a server to start and list its tools (default 30 s). */
  startTimeoutMs?: number;
  /** Who starts them, for the consent question (engine/env/consent.ts). */
  origin?: string;
  /** false: the user typed these servers just now (the editor's try-it); nothing to approve. */
  consent?: boolean;
}

const STDERR_TAIL = 2000;

/** One running server: its client, its tools and its restart state. */
class ServerHandle {
  client?: Client;
  transport?: StdioClientTransport;
  /** Set while (re)starting; calls wait on it. */
  ready?: Promise<void>;
  /** Times the server was started again after exiting (at most once). */
  restarts = 0;
  down = false;
  closing = false;
  stderr = '';
  /** Why the server last exited (with its stderr tail), for the calls it cut short. */
  lastExit = '';
  specs: { name: string; description: string; inputSchema: Record<string, unknown> }[] = [];

  constructor(
    readonly name: string,
    readonly cfg: McpServerConfig,
    readonly opts: McpOpenOptions,
  ) {}

  private emit(kind: McpEvent['kind'], message: string): void {
    this.opts.onEvent?.({ kind, server: this.name, message });
  }

  private stderrTail(): string {
    const s = this.stderr.trim();
    return s ? ` (stderr: ${s.slice(-400)})` : '';
  }

  async start(): Promise<void> {
    const cwd = this.cfg.cwd
      ? isAbsolute(this.cfg.cwd)
        ? this.cfg.cwd
        : resolve(this.opts.baseDir ?? process.cwd(), this.cfg.cwd)
      : (this.opts.baseDir ?? process.cwd());
    if (!existsSync(cwd)) throw new Error(`mcp server "${this.name}": working directory ${cwd} does not exist (mcp_servers.${this.name}.cwd)`);
    const transport = new StdioClientTransport({
      command: this.cfg.command,
      args: this.cfg.args,
      cwd,
      stderr: 'pipe',
      env: { ...getDefaultEnvironment(), ...(this.cfg.env ?? {}) },
    });
    transport.stderr?.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-STDERR_TAIL);
    });
    const client = new Client({ name: 'arbor', version: '0.1.0' });
    this.transport = transport;
    this.client = client;
    const startMs = this.opts.startTimeoutMs ?? 30_000;
    try {
      await client.connect(transport, { timeout: startMs });
      const listed = await client.listTools(undefined, { timeout: startMs });
      this.specs = listed.tools.map((t) => ({
        name: t.name,
        description: t.description ?? t.title ?? '',
        inputSchema: cleanSchema(t.inputSchema as Record<string, unknown>),
      }));
    } catch (e) {
      this.closing = true;
      await client.close().catch(() => undefined);
      this.closing = false;
      const what = `${this.cfg.command} ${this.cfg.args.join(' ')}`.trim();
      throw new Error(`mcp server "${this.name}" (${what}) did not start: ${(e as Error).message}${this.stderrTail()}`);
    }
    // Installed after a successful start, so a failing start is reported once, by the throw above.
    client.onclose = () => this.onExit(client);
    this.emit('mcp_started', `pid ${transport.pid ?? '?'}, ${this.specs.length} tools listed${this.cfg.tools ? `, ${this.cfg.tools.length} allowed` : ''}`);
  }

  private onExit(client: Client): void {
    if (this.closing || this.client !== client) return;
    this.client = undefined;
    const why = `exited${this.stderrTail()}`;
    this.lastExit = this.stderrTail();
    if (this.restarts >= 1) {
      this.down = true;
      this.emit('mcp_down', `${why}; it was already restarted once, so its tools are unavailable for the rest of the run`);
      return;
    }
    this.restarts++;
    this.emit('mcp_exit', why);
    this.stderr = '';
    const p = this.start().then(
      () => this.emit('mcp_restart', 'started again after exiting'),
      (e: Error) => {
        this.down = true;
        this.emit('mcp_down', `could not be restarted: ${e.message}`);
      },
    );
    this.ready = p.finally(() => {
      if (this.ready === p) this.ready = undefined;
    });
  }

  async call(tool: string, args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult> {
    if (this.ready) await this.ready;
    const client = this.client;
    if (this.down || !client) throw new Error(`mcp server "${this.name}" is down (it exited again after a restart); tool "${tool}" is unavailable`);
    try {
      const r = (await client.callTool({ name: tool, arguments: args }, undefined, { signal: ctx.signal, timeout: this.cfg.timeout_ms })) as CallToolResult;
      const content = resultText(r);
      return { content, success: r.isError !== true, metadata: { server: this.name } };
    } catch (e) {
      const msg = (e as Error).message ?? String(e);
      if (this.client !== client || /Connection closed/i.test(msg))
        throw new Error(`mcp server "${this.name}" exited during the call to "${tool}"${this.lastExit}${this.down ? '' : '; it is being restarted'}`);
      if (ctx.signal.aborted) throw new Error(`call to "${tool}" on mcp server "${this.name}" was cancelled (${String(ctx.signal.reason ?? 'aborted')})`);
      throw new Error(`mcp server "${this.name}": ${msg}`);
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.ready) await this.ready.catch(() => undefined);
    const c = this.client;
    this.client = undefined;
    await c?.close().catch(() => undefined);
  }

  pid(): number | undefined {
    return this.transport?.pid ?? undefined;
  }
}

/** The JSON Schema as the environment's validator takes it: `$schema` dropped (servers use draft-07 or 2020-12 URLs ajv's default build does not resolve). */
function cleanSchema(s: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _drop, ...rest } = s ?? {};
  return { type: 'object', ...rest };
}

/** A tool result's content as observation text: text parts verbatim, other parts named. */
export function resultText(r: CallToolResult): string {
  const parts: string[] = [];
  for (const c of r.content ?? []) {
    if (c.type === 'text') parts.push(c.text);
    else if (c.type === 'image' || c.type === 'audio') parts.push(`[${c.type} ${c.mimeType}]`);
    else if (c.type === 'resource') parts.push('text' in c.resource && typeof c.resource.text === 'string' ? c.resource.text : `[resource ${c.resource.uri}]`);
    else if (c.type === 'resource_link') parts.push(`[resource ${c.uri}]`);
  }
  if (parts.length === 0 && r.structuredContent !== undefined) parts.push(JSON.stringify(r.structuredContent));
  return parts.join('\n');
}

/** The tools of a set of MCP servers, started once; close() at the end of the run. */
export class McpToolSet {
  readonly tools: Tool[] = [];
  private constructor(private readonly servers: ServerHandle[]) {}

  /**
   * Start every server and list its tools. Throws (after stopping what did start) naming the
   * server when one does not start, when an allow-listed tool does not exist, or when two servers
   * offer a tool of the same name.
   */
  static async open(config: McpServersInput, opts: McpOpenOptions = {}): Promise<McpToolSet> {
    const parsed = mcpServersSchema.parse(config);
    if (opts.consent !== false) {
      const { ensureConsent, serverItem } = await import('../consent');
      await ensureConsent(
        opts.origin ?? 'MCP servers',
        Object.entries(parsed).map(([name, s]) => serverItem(name, s, opts.baseDir)),
      );
    }
    const handles = Object.entries(parsed).map(([name, cfg]) => new ServerHandle(name, cfg, opts));
    const set = new McpToolSet(handles);
    try {
      const started = await Promise.allSettled(handles.map((h) => h.start()));
      const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
      const owner = new Map<string, string>();
      for (const h of handles) {
        const offered = new Set(h.specs.map((s) => s.name));
        const missing = (h.cfg.tools ?? []).filter((t) => !offered.has(t));
        if (missing.length)
          throw new Error(
            `mcp_servers.${h.name}.tools: ${missing.map((m) => `"${m}"`).join(', ')} not offered by the server (it has: ${[...offered].join(', ')})`,
          );
        for (const spec of h.specs) {
          if (h.cfg.tools && !h.cfg.tools.includes(spec.name)) continue;
          const other = owner.get(spec.name);
          if (other) throw new Error(`mcp_servers: tool "${spec.name}" is offered by both "${other}" and "${h.name}"; keep one with a tools allow-list`);
          owner.set(spec.name, h.name);
          set.tools.push({
            name: spec.name,
            description: spec.description,
            parameters: spec.inputSchema,
            execute: (args, ctx) => h.call(spec.name, args, ctx),
          });
        }
      }
      return set;
    } catch (e) {
      await set.close();
      throw e;
    }
  }

  /** Restarts per server (a server is restarted at most once). */
  get restarts(): Record<string, number> {
    return Object.fromEntries(this.servers.map((s) => [s.name, s.restarts]));
  }

  /** Process ids of the running servers (for tests and `arbor doctor`-style reports). */
  pids(): Record<string, number | undefined> {
    return Object.fromEntries(this.servers.map((s) => [s.name, s.pid()]));
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.close()));
  }
}
