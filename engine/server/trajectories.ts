/**
 * A run's stored trajectories: trajectories.steps (the steps that have them), trajectories.list
 * (search), trajectories.get (one, with its turns) and trajectories.group (a step's GRPO group).
 */
import type { EngineHost } from './host';
import type { TrajectoryDetail } from './protocol';

export function registerTrajectories(engine: EngineHost): void {
  const S = () => engine.store!;
  engine.on('trajectories.steps', (p) => S().trajectorySteps(p.runId));
  engine.on('trajectories.list', (p) => S().searchTrajectories(p));
  engine.on('trajectories.get', (p) => S().getTrajectory(p.id) as TrajectoryDetail);
  engine.on('trajectories.group', (p) => S().group(p.runId, p.step, p.group));
}
