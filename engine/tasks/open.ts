/**
 * A config's environment resources, opened once and the same way for training and eval
 * (engine/run/open.ts), `arbor rollout` (./rollout-source.ts), `arbor mcp serve` and the
 * verl export (engine/interop/environment.ts): the MCP servers of environment.mcp_servers
 * (their tools join the environment), the user's tool and reward files in one sandbox worker
 * (environment.tools / environment.reward), then the task kit over both. Whatever was opened
 * is closed again when a later step throws.
 */
import { hasUserFiles, type ExperimentConfig } from '../config/experiment';
import type { McpServersInput } from '../env/mcp/config';
import type { SandboxHost } from '../env/sandbox-host';
import type { KitExtras, TaskKit } from './kit';
import { openTaskKit } from './registry';

/**
 * A validated config and the folder it was read from (a LoadedConfig is one): a workspace inside
 * that folder is the config's own, not asked about. `dir` undefined: not known (it is asked about).
 */
export interface ConfigAt {
  cfg: ExperimentConfig;
  dir: string | undefined;
}

/** How consent prompts and MCP lines name the experiment: its `name`, else the folder of its config (`name` is optional). */
export function experimentOrigin({ cfg, dir }: ConfigAt): string {
  return cfg.name !== undefined ? `experiment "${cfg.name}"` : `the experiment in ${dir ?? process.cwd()}`;
}

/**
 * Everything the config would run (servers, tool and reward files, an outside workspace) put to
 * the user once, before anything starts (engine/env/consent.ts); approvals are remembered, so a
 * group's runs (`arbor train --seeds`, `arbor sweep`) are asked about once, by the group.
 */
export async function askConfigConsent({ cfg, dir }: ConfigAt, origin = experimentOrigin({ cfg, dir })): Promise<void> {
  const { configItems, ensureConsent } = await import('../env/consent');
  await ensureConsent(origin, configItems(cfg.environment, dir));
}

/** The config's MCP servers, started (undefined when it names none). */
export async function openMcpServers(at: ConfigAt, log: (line: string) => void) {
  await askConfigConsent(at);
  const { cfg } = at;
  const servers = cfg.environment.mcp_servers;
  if (!servers || typeof servers === 'string' || Object.keys(servers).length === 0) return undefined;
  const { McpToolSet } = await import('../env/mcp/client');
  // validateConfig checked every entry against the mcpServers schema.
  return McpToolSet.open(servers as McpServersInput, {
    baseDir: cfg.environment.workspace,
    onEvent: (e) => log(`mcp: server "${e.server}" ${e.kind.replace('mcp_', '')}: ${e.message}`),
    origin: experimentOrigin(at),
  });
}

export interface OpenedEnvironment {
  /** The sandboxed user files (when the config has tools or a reward file). */
  host?: SandboxHost;
  /** For openTaskKit: the sandbox and the MCP servers' tools. */
  extras: KitExtras;
  /** The MCP server names, for descriptions. */
  mcpServers: string[];
  /** Sandbox log lines (prefixed `sandbox:`) and MCP lifecycle lines since the last call. */
  takeLogs(): string[];
  /** Closes the sandbox and the MCP servers (reporting MCP restarts on stderr). */
  close(): Promise<void>;
}

/** Opens the MCP servers and the sandbox of a validated config (absolute paths). */
export async function openEnvironment(at: ConfigAt, opts: { log?: (line: string) => void } = {}): Promise<OpenedEnvironment> {
  const { cfg } = at;
  const lines: string[] = [];
  const log =
    opts.log ??
    ((line: string) => {
      lines.push(line);
      process.stderr.write(`${line}\n`);
    });
  const mcp = await openMcpServers(at, log);
  let host: SandboxHost | undefined;
  try {
    if (hasUserFiles(cfg)) {
      const { openUserEnvironment } = await import('./user-kit');
      host = await openUserEnvironment(cfg.environment, cfg.environment.workspace ?? process.cwd());
    }
  } catch (e) {
    await mcp?.close();
    throw e;
  }
  const h = host;
  return {
    host,
    extras: { host, mcpTools: mcp?.tools },
    mcpServers: mcp ? Object.keys(cfg.environment.mcp_servers ?? {}) : [],
    takeLogs: () => [...(h?.takeLogs().map((l) => `sandbox: ${l}`) ?? []), ...lines.splice(0)],
    close: async () => {
      await h?.close();
      if (mcp) {
        const restarts = Object.entries(mcp.restarts).filter(([, n]) => n > 0);
        if (restarts.length) process.stderr.write(`mcp: servers restarted during the run: ${restarts.map(([s, n]) => `${s} ×${n}`).join(', ')}\n`);
        await mcp.close();
      }
    },
  };
}

/**
 * The environment's resources and, inside them, `use(env)` (e.g. open the task kit and build
 * on it). When `use` throws, the resources are closed and the error rethrown; otherwise they
 * stay open for the caller, who closes them with the result.
 */
export async function withEnvironment<T>(
  at: ConfigAt,
  use: (env: OpenedEnvironment) => Promise<T> | T,
  opts: { log?: (line: string) => void } = {},
): Promise<{ env: OpenedEnvironment; value: T }> {
  const env = await openEnvironment(at, opts);
  try {
    return { env, value: await use(env) };
  } catch (e) {
    await env.close().catch(() => undefined);
    throw e;
  }
}

/** The config's task kit over its opened environment. */
export async function openEnvironmentKit(at: ConfigAt, opts: { log?: (line: string) => void } = {}): Promise<{ env: OpenedEnvironment; kit: TaskKit }> {
  const { env, value } = await withEnvironment(at, (e) => openTaskKit(at.cfg, e.extras), opts);
  return { env, kit: value };
}
