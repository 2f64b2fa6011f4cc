/**
 * Builds the TaskSession (policy model, reference, rollout engine, environment, rewards,
 * estimators) for a config's task, through the task registry (./tasks.ts). User tool and reward
 * files (environment.tools / environment.reward) are loaded into one sandbox worker for the run;
 * the MCP servers of environment.mcp_servers are started once for the run (their tools join the
 * environment) and closed with the session; their lifecycle (a server restarted after exiting,
 * or given up) goes to the run log through takeLogs() and to stderr.
 */
import { hasUserFiles, type ExperimentConfig } from '../config/experiment';
import type { TaskSession } from './run-dir';
import { buildTaskSession } from './compose';
import type { TokenizerPort } from '../rollout/ports';
import { openTaskKit, taskTokenizerFor } from '../tasks/registry';
import type { SandboxHost } from '../env/sandbox-host';
import type { McpServersInput } from '../env/mcp/config';

/** The config's MCP servers, started (undefined when it names none). */
export async function openMcpServers(cfg: ExperimentConfig, log: (line: string) => void) {
  // Everything the config would run (servers, tool and reward files, an outside workspace) is
  // put to the user once, before anything starts (engine/env/consent.ts).
  const { configDirOf, configItems, ensureConsent } = await import('../env/consent');
  await ensureConsent(`experiment "${cfg.name}"`, configItems(cfg.environment, configDirOf(cfg)));
  const servers = cfg.environment.mcp_servers;
  if (!servers || typeof servers === 'string' || Object.keys(servers).length === 0) return undefined;
  const { McpToolSet } = await import('../env/mcp/client');
  // validateConfig checked every entry against the mcpServers schema.
  return McpToolSet.open(servers as McpServersInput, {
    baseDir: cfg.environment.workspace,
    onEvent: (e) => log(`mcp: server "${e.server}" ${e.kind.replace('mcp_', '')}: ${e.message}`),
    origin: `experiment "${cfg.name}"`,
  });
}

export async function openTaskSession(cfg: ExperimentConfig): Promise<TaskSession> {
  const lines: string[] = [];
  const mcp = await openMcpServers(cfg, (line) => {
    lines.push(line);
    process.stderr.write(`${line}\n`);
  });
  let host: SandboxHost | undefined;
  try {
    if (hasUserFiles(cfg)) {
      // The user's tools and reward in one sandbox worker for the whole run (paths are absolute
      // after validateConfig); closed with the session.
      const { openUserEnvironment } = await import('../tasks/user-kit');
      host = await openUserEnvironment(cfg.environment, cfg.environment.workspace ?? process.cwd());
    }
    const session = await buildTaskSession(cfg, openTaskKit(cfg, { host, mcpTools: mcp?.tools }));
    if (!host && !mcp) return session;
    const h = host;
    return {
      ...session,
      takeLogs: () => [...(h?.takeLogs().map((l) => `sandbox: ${l}`) ?? []), ...lines.splice(0), ...(session.takeLogs?.() ?? [])],
      close: async () => {
        await session.close();
        await h?.close();
        if (mcp) {
          const restarts = Object.entries(mcp.restarts).filter(([, n]) => n > 0);
          if (restarts.length) process.stderr.write(`mcp: servers restarted during the run: ${restarts.map(([s, n]) => `${s} ×${n}`).join(', ')}\n`);
          await mcp.close();
        }
      },
    };
  } catch (e) {
    await host?.close();
    await mcp?.close();
    throw e;
  }
}

/** Token ids → text for a config's task (for stored trajectories). */
export function decoderFor(cfg: ExperimentConfig): (ids: number[]) => string {
  // Resolved on first use: by then the run's session has opened its kit (with the user's tools).
  let tok: TokenizerPort | undefined;
  return (ids) => (tok ??= taskTokenizerFor(cfg)).decode(ids);
}
