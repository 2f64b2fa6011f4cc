/**
 * A stored run opened again: its config (validated against its workspace), its task kit with the
 * environment's resources, and one of its tasks by id. Replay, forks, the playground and live
 * rollouts open runs through these.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { validateLoaded, type LoadedConfig } from '../config/experiment';
import type { ConfigAt } from '../tasks/open';
import type { Store } from '../store/store';
import type { RolloutTask } from '../rollout/ports';

/** The run's config, validated, with relative paths against its workspace (`dir`). */
export function runConfig(store: Store, runId: string, home: string): LoadedConfig {
  const run = store.getRun(runId);
  const raw = run.config as Record<string, unknown>;
  const env = raw.environment as { workspace?: string } | undefined;
  const baseDir = env?.workspace ?? (existsSync(join(home, 'workspace')) ? join(home, 'workspace') : home);
  try {
    return validateLoaded(raw, { baseDir, file: `run ${runId} config` });
  } catch (e) {
    throw new Error(`run ${runId}: its config does not open an environment to replay in (${(e as Error).message})`);
  }
}

/** The run's task kit with its user tools / reward (sandbox) and MCP servers; close when done. */
export async function openRunEnvironment(at: ConfigAt) {
  const { openEnvironmentKit } = await import('../tasks/open');
  const { env, kit } = await openEnvironmentKit(at);
  return { kit, close: () => env.close() };
}

/** The task a stored trajectory ran, among the kit's training, RL and held-out tasks. */
export function findTask(kit: { trainTasks: RolloutTask[]; rlTasks?: RolloutTask[]; evalTasks: RolloutTask[] }, id: string | undefined): RolloutTask {
  if (!id) throw new Error('the trajectory has no task id, so its environment cannot be opened again');
  const t = [...kit.trainTasks, ...(kit.rlTasks ?? []), ...kit.evalTasks].find((x) => x.id === id);
  if (!t) throw new Error(`task "${id}" is not among the run's tasks (its config no longer generates it)`);
  return t;
}
