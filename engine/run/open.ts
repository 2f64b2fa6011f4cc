/**
 * Builds the TaskSession (policy model, reference, rollout engine, environment, rewards,
 * estimators) for a config's task, through the task registry (engine/tasks/registry.ts). The
 * environment's resources (user tool and reward files in one sandbox worker, the MCP servers of
 * environment.mcp_servers) are opened by engine/tasks/open.ts and closed with the session; their
 * lifecycle lines (a server restarted after exiting, or given up) go to the run log through
 * takeLogs() and to stderr.
 */
import type { ExperimentConfig } from '../config/experiment';
import type { TaskSession } from './run-dir';
import { buildTaskSession } from './compose';
import type { TokenizerPort } from '../rollout/ports';
import { openTaskKit, taskTokenizerFor } from '../tasks/registry';
import { withEnvironment } from '../tasks/open';

export async function openTaskSession(cfg: ExperimentConfig): Promise<TaskSession> {
  const { env, value: session } = await withEnvironment(cfg, (e) => buildTaskSession(cfg, openTaskKit(cfg, e.extras)));
  if (!env.host && env.mcpServers.length === 0) return session;
  return {
    ...session,
    takeLogs: () => [...env.takeLogs(), ...(session.takeLogs?.() ?? [])],
    close: async () => {
      await session.close();
      await env.close();
    },
  };
}

/** Token ids → text for a config's task (for stored trajectories). */
export function decoderFor(cfg: ExperimentConfig): (ids: number[]) => string {
  // Resolved on first use: by then the run's session has opened its kit (with the user's tools).
  let tok: TokenizerPort | undefined;
  return (ids) => (tok ??= taskTokenizerFor(cfg)).decode(ids);
}
