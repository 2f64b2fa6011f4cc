/**
 * Adapters between the rollout engine's trajectories (engine/rollout/types.ts) and the loop's
 * flat Episode / SFT Demo records.
 */
import { flattenTrajectory, toolCallCount, type Trajectory } from '../rollout/types';
import type { Episode } from './episode';
import type { Demo } from './sft';

export function trajectoryToEpisode(t: Trajectory): Episode {
  const f = flattenTrajectory(t);
  const tc = toolCallCount(t);
  const toolCallsAt: { at: number; calls: unknown[] }[] = [];
  // Steps: each model turn and what the model saw just before it (the prompt, then the tool/env output since the previous turn).
  const steps: NonNullable<Episode['steps']> = [];
  let observation = t.promptText;
  // Step rewards the reward function gave per tool call (outcome.stepRewards, one per model turn) join the env's.
  const outcome = t.outcome as typeof t.outcome & { stepRewards?: number[]; oovTokens?: number };
  const stepRewards = f.stepRewards.slice();
  let p = t.promptIds.length;
  let k = 0;
  for (const u of t.turns) {
    if (u.role === 'model') {
      if (u.tokenIds.length) steps.push({ start: p, end: p + u.tokenIds.length, observation });
      observation = '';
    } else observation += u.text;
    p += u.tokenIds.length;
    if (u.role !== 'model') continue;
    if (u.toolCalls?.length) toolCallsAt.push({ at: p - 1, calls: u.toolCalls });
    const extra = outcome.stepRewards?.[k++];
    if (extra && u.tokenIds.length > 0) stepRewards.push({ at: p - 1, value: extra });
  }
  return {
    group: t.group,
    sample: t.sample,
    taskId: t.taskId,
    tokens: f.tokens,
    lossMask: f.lossMask,
    rolloutLogprobs: f.logprobs,
    entropy: f.entropy,
    reward: t.outcome.reward,
    rewardComponents: { ...t.outcome.components },
    exactMatch: t.outcome.exactMatch ?? (t.outcome.components.exact_match ?? 0) > 0,
    formatOk: t.outcome.formatOk ?? (t.outcome.components.format ?? 0) > 0,
    toolCalls: tc.calls,
    toolErrors: tc.errors,
    turns: t.turns.filter((u) => u.role === 'model').length,
    stepRewards,
    truncated: t.truncated,
    promptLength: f.promptLength,
    answer: t.outcome.answer,
    ...(t.meta ? { meta: t.meta } : {}),
    ...(toolCallsAt.length ? { toolCallsAt } : {}),
    steps,
    ...(t.timings ? { timings: { ...t.timings } } : {}),
    ...(outcome.oovTokens ? { oovTokens: outcome.oovTokens } : {}),
    ...(t.branch ? { branch: { ...t.branch } } : {}),
  };
}

/** A demonstration trajectory (scripted expert) as an SFT example: loss on its model turns only. */
export function trajectoryToDemo(t: Trajectory): Demo {
  const f = flattenTrajectory(t);
  return { tokens: f.tokens, lossMask: f.lossMask };
}
