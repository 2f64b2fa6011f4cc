/**
 * Builds the TaskSession (policy model, reference, rollout engine, environment, rewards,
 * estimators) for a config's task.
 */
import type { ExperimentConfig } from './config';
import { multihopKit } from './multihop-kit';
import type { TaskSession } from './run';
import { buildTaskSession } from './session';

export async function openTaskSession(cfg: ExperimentConfig): Promise<TaskSession> {
  switch (cfg.task.kind) {
    case 'multihop':
      return buildTaskSession(cfg, multihopKit(cfg));
  }
}
