/**
 * Builds the TaskSession (policy model, reference, rollout engine, environment, rewards,
 * estimators) for a config's task, through the task registry (./tasks.ts). User tool and reward
 * files (environment.tools / environment.reward) are loaded into one sandbox worker for the run.
 */
import { hasUserFiles, type ExperimentConfig } from './config';
import type { TaskSession } from './run';
import { buildTaskSession } from './session';
import type { TokenizerPort } from '../rollout/ports';
import { openTaskKit, taskTokenizerFor } from './tasks';

export async function openTaskSession(cfg: ExperimentConfig): Promise<TaskSession> {
  if (hasUserFiles(cfg)) {
    // The user's tools and reward in one sandbox worker for the whole run (paths are absolute
    // after validateConfig); closed with the session.
    const { openUserEnvironment } = await import('./user-kit');
    const host = await openUserEnvironment(cfg.environment, cfg.environment.workspace ?? process.cwd());
    try {
      const session = await buildTaskSession(cfg, openTaskKit(cfg, { host }));
      return { ...session, takeLogs: () => host.takeLogs(), close: async () => (await session.close(), await host.close()) };
    } catch (e) {
      await host.close();
      throw e;
    }
  }
  return buildTaskSession(cfg, openTaskKit(cfg));
}

/** Token ids → text for a config's task (for stored trajectories). */
export function decoderFor(cfg: ExperimentConfig): (ids: number[]) => string {
  // Resolved on first use: by then the run's session has opened its kit (with the user's tools).
  let tok: TokenizerPort | undefined;
  return (ids) => (tok ??= taskTokenizerFor(cfg)).decode(ids);
}
