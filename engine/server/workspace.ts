/**
 * The engine's methods over the open workspace, one `register<Feature>` per feature: runs
 * (run-methods.ts), their export and import (run-files.ts), how they learned (learning.ts), run
 * groups (groups.ts), stored trajectories (trajectories.ts) and the environment's files
 * (workspace-files.ts). Every EngineServer registers these (server.ts); the features that need
 * more than the workspace (training jobs, sandbox, playground, replay, models) are added by
 * createEngine (engine.ts) or by the CLI's in-process engine.
 */
import type { EngineHost } from './host';
import { registerRunGroups } from './groups';
import { registerLearning } from './learning';
import { registerRunFiles } from './run-files';
import { registerRuns } from './run-methods';
import { registerTrajectories } from './trajectories';
import { registerEnvFiles } from './workspace-files';

export function registerWorkspace(engine: EngineHost): void {
  registerRuns(engine);
  registerRunFiles(engine);
  registerLearning(engine);
  registerRunGroups(engine);
  registerTrajectories(engine);
  registerEnvFiles(engine);
}
