/**
 * The loop's RolloutPort on top of engine/rollout: picks the step's prompts from the task pool
 * with the step seed, rolls out n samples each on the decode backend, and converts trajectories
 * to episodes. The same port serves the real model and the tabular test policy.
 */
import type { BranchingMode, BranchingOptions } from '../rollout/branching';
import { rollout } from '../rollout/engine';
import type { DecodeBackend, RolloutTask, TokenizerPort } from '../rollout/ports';
import type { Trajectory } from '../rollout/types';
import { mulberry32 } from '../base/rng';
import type { RolloutPort } from './loop';
import { trajectoryToEpisode } from './trajectories';

export interface EngineRolloutOptions {
  backend: DecodeBackend;
  tokenizer: TokenizerPort;
  /** Training task pool; each step draws `prompts` of them (without replacement when possible). */
  tasks: RolloutTask[];
  stop: { strings: string[]; tokenIds: number[] };
  maxBatch?: number;
  /** Every trajectory of every step (for the store's trajectory viewer). */
  onTrajectories?: (step: number, t: Trajectory[]) => void;
}

export function pickTasks<T>(pool: T[], k: number, seed: number): T[] {
  const r = mulberry32(seed);
  const idx = pool.map((_, i) => i);
  const out: T[] = [];
  for (let i = 0; i < k; i++) {
    if (i % pool.length === 0) {
      for (let j = idx.length - 1; j > 0; j--) {
        const s = Math.floor(r() * (j + 1));
        [idx[j], idx[s]] = [idx[s]!, idx[j]!];
      }
    }
    out.push(pool[idx[i % pool.length]!]!);
  }
  return out;
}

/** The config's `rollout.branching` block, as the engine's branching options read it. */
export interface BranchingSettings {
  mode: BranchingMode;
  initial_samples?: number;
  beam_size: number;
  alpha: number;
  beta: number;
  entropy_window: number;
  aepo: { budget_beta: number; branch_penalty: number };
}

/** What the training rollouts read of the experiment config. */
export interface RolloutSettings {
  task: { kind: string };
  rollout: {
    n: number;
    temperature: number;
    top_p: number;
    max_new_tokens: number;
    max_turns: number;
    max_total_length: number;
    branching: BranchingSettings;
  };
}

/** The engine's branching options from `rollout.branching` (mode arpo | aepo). */
export function branchingOptions(cfg: { rollout: Pick<RolloutSettings['rollout'], 'n' | 'branching'> }): BranchingOptions {
  const b = cfg.rollout.branching;
  if (b.mode === 'none') throw new Error('rollout.branching.mode is "none"');
  return {
    mode: b.mode,
    initialSamples: b.initial_samples ?? Math.ceil(cfg.rollout.n / 2),
    beamSize: b.beam_size,
    alpha: b.alpha,
    beta: b.beta,
    entropyWindow: b.entropy_window,
    budgetBeta: b.aepo.budget_beta,
    branchPenalty: b.aepo.branch_penalty,
  };
}

export function engineRolloutPort(cfg: RolloutSettings, o: EngineRolloutOptions): RolloutPort {
  if (o.tasks.length === 0) throw new Error(`task "${cfg.task.kind}": the training task pool is empty`);
  return {
    async sample({ step, seed, prompts, n }) {
      const tasks = pickTasks(o.tasks, prompts, seed);
      const { trajectories } = await rollout(o.backend, {
        tasks,
        n,
        seed,
        sampling: { temperature: cfg.rollout.temperature, topP: cfg.rollout.top_p },
        limits: { maxNewTokens: cfg.rollout.max_new_tokens, maxTurns: cfg.rollout.max_turns, maxTotalLength: cfg.rollout.max_total_length },
        stop: o.stop,
        tokenizer: o.tokenizer,
        maxBatch: o.maxBatch,
        ...(cfg.rollout.branching.mode !== 'none' ? { branching: branchingOptions(cfg) } : {}),
      });
      o.onTrajectories?.(step, trajectories);
      return trajectories.map(trajectoryToEpisode);
    },
  };
}
