/**
 * Builds the TaskSession (policy model, reference, rollout engine, environment, rewards,
 * estimators) for a config's task from engine/model, engine/rl, engine/rollout and engine/env.
 */
import type { ExperimentConfig } from './config';
import type { TaskSession } from './run';

/** Thrown when a module the task needs is not in this build (names the module). */
export class MissingEngineModuleError extends Error {
  constructor(readonly module: string, readonly need: string) {
    super(`cannot build the ${need}: ${module} is not available in this build of the engine`);
    this.name = 'MissingEngineModuleError';
  }
}

export async function openTaskSession(cfg: ExperimentConfig): Promise<TaskSession> {
  throw new MissingEngineModuleError('engine/model/runtime.ts (PolicyModel)', `policy for task "${cfg.task.kind}"`);
}
