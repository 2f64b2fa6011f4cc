/**
 * "Why didn't it learn?": per-step figures of how much of a batch could teach the policy anything,
 * the rules that flag a step where little or nothing was learned, and the run-level warnings (groups
 * flat for FLAT_STREAK steps, the policy no longer calling tools). Pure (no Node imports): the
 * training loop, `arbor show` and the Run view share it.
 *
 * Metrics written by the loop (engine/train/loop.ts):
 *   learn/zero_variance_groups  groups of the trained batch whose samples all got the same reward
 *   learn/gradient_share        model tokens with a non-zero advantage (the rest carry no policy gradient)
 *   learn/episode_share         episodes with any such token
 *   advantage/std, advantage/p05 … p95   the advantage distribution over model tokens
 *   actor/clip_low_fraction, actor/clip_high_fraction   tokens clipped below 1 − ε_low / above 1 + ε_high (PPO loss)
 * and, already there: truncated_rate, format_rate, tool_calls_per_episode, actor/grad_norm.
 */

export const FLAT_STREAK = 10;
export const TOOL_STOP_STREAK = 5;

/** The q-quantiles (0..1) of values (sorted in place). */
export function quantiles(values: Float64Array | number[], qs: readonly number[]): number[] {
  const v = Float64Array.from(values).sort();
  if (!v.length) return qs.map(() => 0);
  return qs.map((q) => {
    const pos = (v.length - 1) * q;
    const i = Math.floor(pos);
    const f = pos - i;
    return i + 1 < v.length ? v[i]! * (1 - f) + v[i + 1]! * f : v[i]!;
  });
}

export const ADVANTAGE_QUANTILES = [
  ['p05', 0.05],
  ['p25', 0.25],
  ['p50', 0.5],
  ['p75', 0.75],
  ['p95', 0.95],
] as const;

/** Why a step taught the policy little or nothing (empty: nothing to flag). */
export function stepFlags(m: Record<string, number | null | undefined>): string[] {
  const out: string[] = [];
  const v = (k: string) => {
    const x = m[k];
    return x == null || !Number.isFinite(x) ? undefined : x;
  };
  const zv = v('learn/zero_variance_groups');
  if (zv !== undefined && zv >= 0.999) out.push('every group had one reward for all its samples (no signal)');
  else if (zv !== undefined && zv >= 0.75) out.push(`${Math.round(zv * 100)}% of groups had no reward variance`);
  const share = v('learn/gradient_share');
  if (share !== undefined && share < 0.1 && !(zv !== undefined && zv >= 0.999))
    out.push(`only ${(share * 100).toFixed(1)}% of model tokens carried a gradient`);
  const gn = v('actor/grad_norm');
  if (gn !== undefined && gn === 0) out.push('gradient norm 0');
  const tr = v('truncated_rate');
  if (tr !== undefined && tr >= 0.5) out.push(`${Math.round(tr * 100)}% of episodes truncated`);
  const fr = v('format_rate');
  if (fr !== undefined && fr <= 0.5) out.push(`${Math.round((1 - fr) * 100)}% of episodes with format errors`);
  const clip = (v('actor/clip_low_fraction') ?? 0) + (v('actor/clip_high_fraction') ?? 0);
  if (clip >= 0.3) out.push(`${Math.round(clip * 100)}% of tokens clipped`);
  return out;
}

/** Follows a run step by step and says (once per episode of trouble) when learning has stalled. */
export class LearningWatch {
  private flatSince: number | undefined;
  private flatWarned = false;
  private calledTools = false;
  private noToolsSince: number | undefined;
  private toolsWarned = false;

  observe(step: number, m: Record<string, number | null | undefined>): string[] {
    const out: string[] = [];
    const zv = m['learn/zero_variance_groups'];
    if (zv != null && zv >= 0.999) {
      this.flatSince ??= step;
      if (!this.flatWarned && step - this.flatSince + 1 >= FLAT_STREAK) {
        this.flatWarned = true;
        out.push(
          `groups have been flat for ${step - this.flatSince + 1} steps (steps ${this.flatSince}–${step}): every sample of every prompt got the same reward, so GRPO-style advantages are 0 and nothing is learned. Check the reward (does any sample succeed?), raise rollout.n, or enable algorithm.dynamic_sampling`,
        );
      }
    } else {
      this.flatSince = undefined;
      this.flatWarned = false;
    }
    const calls = m['tool_calls_per_episode'];
    if (calls != null && Number.isFinite(calls)) {
      if (calls > 0) {
        this.calledTools = true;
        this.noToolsSince = undefined;
        this.toolsWarned = false;
      } else if (this.calledTools) {
        this.noToolsSince ??= step;
        if (!this.toolsWarned && step - this.noToolsSince + 1 >= TOOL_STOP_STREAK) {
          this.toolsWarned = true;
          out.push(
            `the policy stopped calling tools: no tool call in ${step - this.noToolsSince + 1} steps (since step ${this.noToolsSince}); it may have collapsed to answering directly. Look at the last trajectories; a lower optim.lr, a KL term (algorithm.kl_coef) or a smaller step-reward penalty often helps`,
          );
        }
      }
    }
    return out;
  }
}

/** Replays a run's series through LearningWatch: the warnings it would have given, with their step. */
type SeriesMap = Record<string, { step: number[]; value: (number | null)[] }>;

/** The series of `keys` as one row of values per step. */
function rowsByStep(series: SeriesMap, keys: readonly string[]): Map<number, Record<string, number | null>> {
  const at = new Map<number, Record<string, number | null>>();
  for (const key of keys) {
    const s = series[key];
    if (!s) continue;
    s.step.forEach((st, i) => {
      const row = at.get(st) ?? {};
      row[key] = s.value[i] ?? null;
      at.set(st, row);
    });
  }
  return at;
}

export function seriesWarnings(series: SeriesMap): { step: number; message: string }[] {
  const at = rowsByStep(series, ['learn/zero_variance_groups', 'tool_calls_per_episode']);
  const w = new LearningWatch();
  const out: { step: number; message: string }[] = [];
  for (const step of [...at.keys()].sort((a, b) => a - b)) for (const message of w.observe(step, at.get(step)!)) out.push({ step, message });
  return out;
}

/** Metric keys stepFlags reads (what a caller must load to flag steps). */
export const FLAG_KEYS = [
  'learn/zero_variance_groups',
  'learn/gradient_share',
  'actor/grad_norm',
  'truncated_rate',
  'format_rate',
  'actor/clip_low_fraction',
  'actor/clip_high_fraction',
  'tool_calls_per_episode',
] as const;

/** Flagged steps of a run from its series: step → reasons. */
export function flaggedSteps(series: SeriesMap): { step: number; reasons: string[] }[] {
  const at = rowsByStep(series, FLAG_KEYS);
  return [...at.keys()]
    .sort((a, b) => a - b)
    .map((step) => ({ step, reasons: stepFlags(at.get(step)!) }))
    .filter((f) => f.reasons.length > 0);
}

/** A format rate at or under this after SFT: the warm start did not teach the environment's format. */
export const SFT_FORMAT_FLOOR = 0.05;

interface SftFormatConfig {
  model: { init?: string; path?: string };
  environment: { format: string };
  sft: { epochs: number; demos: number; lr: number; eval_every: number; keep_best: boolean; stop_at?: number; demos_path?: string };
  eval: { validation: number };
}

/**
 * The check between SFT and RL: when the SFT model writes the environment's format in (nearly) no
 * episode of `where` (its validation split, or the held-out questions) and gets (nearly) nothing
 * right, RL cannot start from it (no sample earns a reward, every group is flat), so the run says
 * so before RL and names the keys that lengthen or steady the warm start. (A format rate of 0 with
 * answers right is an environment that reports no format: nothing to say.)
 */
export function sftFormatWarning(cfg: SftFormatConfig, m: Record<string, number | undefined>, where: string, steps: number): string | undefined {
  const fr = m.format_rate;
  const em = m.exact_match ?? 0;
  if (fr === undefined || !Number.isFinite(fr) || fr > SFT_FORMAT_FLOOR || em > SFT_FORMAT_FLOOR) return undefined;
  const s = cfg.sft;
  const keys = [`sft.epochs (now ${s.epochs})`, s.demos_path ? `sft.demos_path (more demonstrations)` : `sft.demos (now ${s.demos})`, `sft.lr (now ${s.lr})`];
  if (!(cfg.eval.validation > 0 && s.eval_every > 0))
    keys.push('eval.validation with sft.eval_every, sft.keep_best and sft.stop_at (a cold start that trains until the validation split is right)');
  else if (s.stop_at === undefined) keys.push('sft.stop_at (train until the validation split reaches it)');
  const tiny = !cfg.model.path;
  return (
    `SFT ended without the format: after ${steps} SFT steps the model wrote environment.format "${cfg.environment.format}" in ` +
    `${(fr * 100).toFixed(1)}% of ${where} episodes (exact match ${(em * 100).toFixed(1)}%), so RL will find no reward to learn from. ` +
    `Lengthen the warm start: ${keys.join(', ')}` +
    (tiny
      ? '; a model built from scratch (model.init: tiny) needs hundreds of SFT steps before it copies names and numbers (docs/areas/train.md, "Cold start")'
      : '') +
    ', or start from a model that already writes the format (model.path)'
  );
}
