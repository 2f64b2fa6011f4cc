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
