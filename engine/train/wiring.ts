/**
 * Builds the TaskSession (policy model, reference, rollout engine, environment, rewards,
 * estimators) for a config's task.
 */
import type { ExperimentConfig } from './config';
import { multihopKit, multihopTokenizer } from './multihop-kit';
import { qaKit } from './qa-kit';
import type { TaskSession } from './run';
import { buildTaskSession } from './session';

export async function openTaskSession(cfg: ExperimentConfig): Promise<TaskSession> {
  if (cfg.environment) {
    // The user's tools and reward in one sandbox worker for the whole run (paths are absolute
    // after validateConfig); closed with the session.
    const { openUserEnvironment, userEnvKit } = await import('./user-kit');
    const host = await openUserEnvironment(cfg.environment, process.cwd());
    try {
      const session = await buildTaskSession(cfg, userEnvKit(cfg, host));
      return { ...session, close: async () => (await session.close(), await host.close()) };
    } catch (e) {
      await host.close();
      throw e;
    }
  }
  switch (cfg.task.kind) {
    case 'multihop':
      return buildTaskSession(cfg, multihopKit(cfg));
    case 'qa':
      return buildTaskSession(cfg, qaKit(cfg));
  }
}

/** Token ids → text for a config's task (for stored trajectories). */
export function decoderFor(cfg: ExperimentConfig): (ids: number[]) => string {
  const tok = cfg.task.kind === 'qa' ? qaKit(cfg).tokenizer : multihopTokenizer();
  return (ids) => tok.decode(ids);
}
