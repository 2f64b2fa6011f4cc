/** Batch summary of trajectories (CLI, benchmarks, evaluation) and JSONL serialisation. */
import { toolCallTotals, type Trajectory } from './types';
import type { RolloutStats } from './engine';

export interface RolloutSummary {
  trajectories: number;
  groups: number;
  meanReward: number;
  exactMatch: number;
  formatRate: number;
  toolCallsPerEpisode: number;
  toolErrorsPerEpisode: number;
  modelTurnsPerEpisode: number;
  truncatedRate: number;
  generatedTokens: number;
  tokensPerSecond: number;
  wallSeconds: number;
  /** Mean of every outcome reward component. */
  components: Record<string, number>;
}

export function summarize(ts: Trajectory[], stats: RolloutStats): RolloutSummary {
  const n = Math.max(1, ts.length);
  const comps: Record<string, number> = {};
  for (const t of ts) for (const [k, v] of Object.entries(t.outcome.components)) comps[k] = (comps[k] ?? 0) + v / n;
  const { calls, errors } = toolCallTotals(ts);
  return {
    trajectories: ts.length,
    groups: new Set(ts.map((t) => t.group)).size,
    meanReward: ts.reduce((a, t) => a + t.outcome.reward, 0) / n,
    exactMatch: ts.filter((t) => t.outcome.exactMatch ?? (t.outcome.components.exact_match ?? 0) > 0).length / n,
    formatRate: ts.filter((t) => t.outcome.formatOk ?? false).length / n,
    toolCallsPerEpisode: calls / n,
    toolErrorsPerEpisode: errors / n,
    modelTurnsPerEpisode: ts.reduce((a, t) => a + t.turns.filter((u) => u.role === 'model').length, 0) / n,
    truncatedRate: ts.filter((t) => t.truncated).length / n,
    generatedTokens: stats.generatedTokens,
    tokensPerSecond: stats.tokensPerSecond,
    wallSeconds: stats.wallMs / 1000,
    components: comps,
  };
}

/** One JSON line per trajectory (per-token arrays as plain arrays; logprobs rounded to float32). */
export function trajectoryToJsonLine(t: Trajectory): string {
  const f32 = (xs: number[]) => Array.from(Float32Array.from(xs));
  return JSON.stringify({ ...t, turns: t.turns.map((u) => ({ ...u, logprobs: f32(u.logprobs), entropy: f32(u.entropy) })) });
}
