/**
 * The figures an RL step logs about its own work (engine/train/loop.ts writes them with the step): the
 * advantage distribution and how much of the batch carries a policy gradient (./diagnostics.ts reads
 * them: "Why didn't it learn?"), the update's means over its optimizer steps, and the step's timing
 * and throughput.
 */
import { ADVANTAGE_QUANTILES, quantiles } from './diagnostics';
import { generatedTokenCount, type Episode } from './episode';

/**
 * The advantage over model tokens (mean, mean of |a|, std, quantiles), the share of model tokens and of
 * episodes that carry a policy gradient, and the share of groups with no reward variance.
 */
export function advantageMetrics(episodes: Episode[], advantages: Map<Episode, Float32Array>): Record<string, number> {
  const m: Record<string, number> = {};
  let aSum = 0;
  let aAbs = 0;
  let aN = 0;
  const advTokens: number[] = [];
  let live = 0;
  let liveEpisodes = 0;
  for (const e of episodes) {
    const a = advantages.get(e)!;
    let any = false;
    for (let i = 0; i < e.lossMask.length; i++)
      if (e.lossMask[i]) {
        aSum += a[i]!;
        aAbs += Math.abs(a[i]!);
        aN++;
        advTokens.push(a[i]!);
        if (Math.abs(a[i]!) > 1e-8) {
          live++;
          any = true;
        }
      }
    if (any) liveEpisodes++;
  }
  m['advantage/mean'] = aN ? aSum / aN : 0;
  m['advantage/abs_mean'] = aN ? aAbs / aN : 0;
  const aMean = aN ? aSum / aN : 0;
  m['advantage/std'] = aN ? Math.sqrt(advTokens.reduce((acc, x) => acc + (x - aMean) ** 2, 0) / aN) : 0;
  quantiles(
    advTokens,
    ADVANTAGE_QUANTILES.map(([, q]) => q),
  ).forEach((v, i) => (m[`advantage/${ADVANTAGE_QUANTILES[i]![0]}`] = v));
  m['learn/gradient_share'] = aN ? live / aN : 0;
  m['learn/episode_share'] = episodes.length ? liveEpisodes / episodes.length : 0;
  const rewardsByGroup = new Map<number, number[]>();
  for (const e of episodes) rewardsByGroup.set(e.group, [...(rewardsByGroup.get(e.group) ?? []), e.reward]);
  m['learn/zero_variance_groups'] = rewardsByGroup.size
    ? [...rewardsByGroup.values()].filter((g) => g.every((x) => x === g[0])).length / rewardsByGroup.size
    : 0;
  return m;
}

/** The sums of a step's optimizer steps (one per mini-batch and epoch): `n` of them, `tokens` that carried loss. */
export interface UpdateTotals {
  loss: number;
  gradNorm: number;
  clipFraction: number;
  kl: number;
  entropy: number;
  valueLoss: number;
  n: number;
  tokens: number;
  /** The policy loss's own metrics (e.g. GSPO's seq_clip_fraction), summed. */
  lossMetrics: Record<string, number>;
}

/** The update's means over its optimizer steps: actor/* (the policy loss's own metrics too), critic/value_loss with a critic. */
export function updateMetrics(t: UpdateTotals, critic: boolean): Record<string, number> {
  const k = Math.max(1, t.n);
  const m: Record<string, number> = {
    'actor/loss': t.loss / k,
    'actor/grad_norm': t.gradNorm / k,
    'actor/clip_fraction': t.clipFraction / k,
    'actor/kl': t.kl / k,
    'actor/entropy': t.entropy / k,
  };
  for (const [key, v] of Object.entries(t.lossMetrics)) m[`actor/${key}`] = v / k;
  if (critic) m['critic/value_loss'] = t.valueLoss / k;
  return m;
}

/** Milliseconds a step spent in each phase. */
export interface StepTimes {
  rolloutMs: number;
  scoreMs: number;
  updateMs: number;
}

/**
 * Seconds per phase, the tokens the rollouts generated (a branch's copy of its parent's prefix was not
 * generated again) and tokens per second: of the rollouts, of the update (`updateTokens`: those that carried
 * loss) and of the whole step.
 */
export function throughputMetrics(times: StepTimes, sampled: Episode[], updateTokens: number): Record<string, number> {
  const { rolloutMs, scoreMs, updateMs } = times;
  const stepTokens = sampled.reduce((a, e) => a + generatedTokenCount(e), 0);
  return {
    'time/rollout_s': rolloutMs / 1000,
    'time/score_s': scoreMs / 1000,
    'time/update_s': updateMs / 1000,
    'rollout/model_tokens': stepTokens,
    'perf/rollout_tokens_per_s': stepTokens / Math.max(1e-9, rolloutMs / 1000),
    'perf/update_tokens_per_s': updateTokens / Math.max(1e-9, updateMs / 1000),
    'perf/tokens_per_s': (stepTokens + updateTokens) / Math.max(1e-9, (rolloutMs + scoreMs + updateMs) / 1000),
  };
}
