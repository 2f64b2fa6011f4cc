/**
 * Builds the TaskSession (policy model, reference, rollout engine, environment, rewards,
 * estimators) for a config's task, through the task registry (engine/tasks/registry.ts). The
 * environment's resources (user tool and reward files in one sandbox worker, the MCP servers of
 * environment.mcp_servers) are opened by engine/tasks/open.ts and closed with the session; their
 * lifecycle lines (a server restarted after exiting, or given up) go to the run log through
 * takeLogs() and to stderr.
 */
import type { ExperimentConfig, LoadedConfig } from '../config/experiment';
import type { TaskSession } from './run-dir';
import { buildTaskSession } from './compose';
import type { TokenizerPort } from '../rollout/ports';
import { openTaskKit, taskTokenizer } from '../tasks/registry';
import { withEnvironment } from '../tasks/open';

/** The session of a loaded config: consent asked against its folder, limits it left out sized from the task. */
export async function openTaskSession(loaded: LoadedConfig): Promise<TaskSession> {
  const { cfg } = loaded;
  const { env, value: session } = await withEnvironment(loaded, (e) => buildTaskSession(loaded, openTaskKit(cfg, e.extras)));
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

/**
 * Token ids → text for a config's task (for stored trajectories): the open session's tokenizer
 * (its kit, with the user's tools), else the task kind's own. Resolved on first use: by then the
 * run's session is open.
 */
export function decoderFor(cfg: ExperimentConfig, session: () => Pick<TaskSession, 'tokenizer'> | undefined): (ids: number[]) => string {
  let tok: TokenizerPort | undefined;
  return (ids) => (tok ??= session()?.tokenizer ?? taskTokenizer(cfg)).decode(ids);
}
