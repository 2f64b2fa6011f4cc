/**
 * The RL training loop: rollout → rewards → advantages → update, with evaluation, checkpoints
 * and resume. It is written against small ports (below) so the same loop serves the CLI, the run
 * manager's job and the tests; engine/run/compose.ts builds the ports from engine/model,
 * engine/rl, engine/rollout, engine/env and engine/store.
 *
 * Resume: the last complete checkpoint (step S) is loaded, every metric/trajectory row with a
 * step > S is deleted from the store, and training restarts at S + 1. Each step derives its seeds
 * from (run seed, step), so a resumed step samples exactly what the original would have.
 */
import { mulberry32, shuffled } from '../base/rng';
import type { ExperimentConfig } from '../config/experiment';
import type { TokenSignal } from '../rl/token-signals';
import { treeBytes } from '../hub/cache';
import { latestCheckpoint, markBest, readBest, retentionOf, saveCheckpoint, type BestMark, type CheckpointInfo } from './checkpoints';
import { ADVANTAGE_QUANTILES, LearningWatch, quantiles } from './diagnostics';
import {
  chunks,
  dropFlatGroups,
  episodeMetrics,
  branchMetrics,
  generatedTokenCount,
  logprobMismatch,
  modelTokenCount,
  overlongPenalty,
  responseBudget,
  stepSeed,
  type Episode,
} from './episode';

/** Flat groups dynamic sampling drops that a step stores (flagged `dropped`), so a researcher can open them. */
export const DROPPED_GROUPS_STORED = 4;

/** Samples one step's episodes (prompts chosen from the step seed). */
export interface RolloutPort {
  sample(args: { step: number; seed: number; prompts: number; n: number; round: number }): Promise<Episode[]>;
  /** Metrics of the samples since the last call (a judge's judge/*), logged with the step. */
  takeMetrics?(): Record<string, number>;
}

/** Token-level scores of episodes under some weights (old policy or reference). */
export interface ScorePort {
  score(episodes: Episode[]): Promise<{ logprobs: Float32Array[]; entropy?: Float32Array[] }>;
}

export interface UpdateStats {
  loss: number;
  gradNorm: number;
  clipFraction: number;
  kl: number;
  entropy: number;
  approxKl?: number;
  valueLoss?: number;
  /** Number of model tokens that carried loss. */
  tokens: number;
  /** The policy loss's other metrics (e.g. GSPO's seq_clip_fraction), logged as actor/<name>. */
  metrics?: Record<string, number>;
  /** Per episode, what the update applied to each token: ratio, clip side, loss weight (engine/rl/token-signals.ts). */
  signals?: Map<Episode, TokenSignal>;
}

/** One optimizer step over a mini-batch, accumulating gradients over its micro-batches. */
export interface PolicyPort extends ScorePort {
  update(args: {
    microBatches: Episode[][];
    advantages: Map<Episode, Float32Array>;
    returns?: Map<Episode, Float32Array>;
    oldLogprobs: Map<Episode, Float32Array>;
    refLogprobs?: Map<Episode, Float32Array>;
    oldValues?: Map<Episode, Float32Array>;
    lr: number;
    /**
     * The policy's weights are the ones that scored oldLogprobs (the first mini-batch of the first epoch): the ratio is 1 without a
     * forward; false: the train step's own forward gives the ratio (its token_logprobs output); absent: no per-token signals.
     */
    fresh?: boolean;
  }): Promise<UpdateStats>;
  save(dir: string): Promise<void>;
  load(dir: string): Promise<void>;
}

/** Token advantages for a batch (the estimator named by algorithm.adv_estimator). */
export interface AdvantagePort {
  compute(args: {
    episodes: Episode[];
    refLogprobs?: Map<Episode, Float32Array>;
    oldLogprobs: Map<Episode, Float32Array>;
    values?: Map<Episode, Float32Array>;
    /** algorithm.distill: the teacher's logprobs of the sampled tokens. */
    teacherLogprobs?: Map<Episode, Float32Array>;
  }): { advantages: Map<Episode, Float32Array>; returns?: Map<Episode, Float32Array>; metrics?: Record<string, number>; parts?: AdvantageParts };
  /** Critic values (PPO + GAE only). */
  values?(episodes: Episode[]): Promise<Float32Array[]>;
}

export interface EvalPort {
  evaluate(args: { step: number; n: number }): Promise<Record<string, number>>;
}

/** The advantage split into the outcome's part and the process rewards' part, and each episode's group statistics (what normalised it). */
export interface AdvantageParts {
  outcome: Map<Episode, Float32Array>;
  process: Map<Episode, Float32Array>;
  group: Map<Episode, { mean: number; std: number; n: number }>;
}

/** Per-episode arrays a step computed besides advantages, aligned with the episode's tokens. */
export interface TrajectoryExtras {
  refLogprobs?: Map<Episode, Float32Array>;
  values?: Map<Episode, Float32Array>;
  /** What the update applied per token (the last epoch that saw the episode). */
  signals?: Map<Episode, TokenSignal>;
  /** The advantage's parts: the outcome's (the estimator alone) and the process rewards' (the rest), and the group's reward statistics. */
  advantageParts?: AdvantageParts;
  /** Flat groups dynamic sampling dropped (a sample of them, stored so they can be opened; never trained on). */
  dropped?: Set<Episode>;
  /** algorithm.distill: the teacher's logprob of each token (the heat map's teacher channel). */
  teacherLogprobs?: Map<Episode, Float32Array>;
}

/** Where metrics and trajectories go (the store in the app; anything in tests). */
export interface SinkPort {
  metrics(step: number, values: Record<string, number>): void | Promise<void>;
  /** `extra`: per-token reference logprobs (when a reference scored them) and critic values (PPO). */
  trajectories?(step: number, episodes: Episode[], advantages: Map<Episode, Float32Array>, extra?: TrajectoryExtras): void | Promise<void>;
  /** Drop rows of steps > `step` (called on resume so no step is duplicated). */
  truncateAfter(step: number): void | Promise<void>;
  event?(kind: string, payload: Record<string, unknown>): void;
}

export interface LoopPorts {
  rollout: RolloutPort;
  policy: PolicyPort;
  reference?: ScorePort;
  /** algorithm.distill: the teacher's per-token logprobs of the sampled tokens (engine/train/distill.ts). */
  teacher?: ScorePort;
  advantage: AdvantagePort;
  eval?: EvalPort;
  sink: SinkPort;
}

export interface LoopOptions {
  runDir: string;
  /** Resume from the last checkpoint in runDir if there is one. */
  resume?: boolean;
  signal?: AbortSignal;
  /** Awaited before every step (the workbench's Pause: resolves when the run is resumed or stopped). */
  beforeStep?: () => Promise<void>;
  /** Called after every step with the step's metrics (progress bars, events). */
  onStep?: (step: number, metrics: Record<string, number>) => void;
  /** Extra state saved with each checkpoint (e.g. the optimizer). */
  saveExtra?: (dir: string) => Promise<void>;
  loadExtra?: (dir: string) => Promise<void>;
}

export interface LoopResult {
  firstStep: number;
  lastStep: number;
  stopped: boolean;
  lastCheckpoint?: CheckpointInfo;
  lastEval?: Record<string, number>;
}

/** Learning rate at a step: linear warm-up, then constant or cosine decay to min_lr_ratio·lr. */
export function learningRate(cfg: ExperimentConfig['optim'], step: number, totalSteps: number): number {
  if (cfg.warmup_steps > 0 && step <= cfg.warmup_steps) return (cfg.lr * step) / cfg.warmup_steps;
  if (cfg.schedule === 'constant') return cfg.lr;
  const span = Math.max(1, totalSteps - cfg.warmup_steps);
  const progress = Math.min(1, (step - cfg.warmup_steps) / span);
  const floor = cfg.lr * cfg.min_lr_ratio;
  return floor + 0.5 * (cfg.lr - floor) * (1 + Math.cos(Math.PI * progress));
}

export async function runTrainingLoop(cfg: ExperimentConfig, ports: LoopPorts, opts: LoopOptions): Promise<LoopResult> {
  const { rollout, policy, reference, advantage, sink } = ports;
  let start = 1;
  let lastCheckpoint: CheckpointInfo | undefined;
  if (opts.resume) {
    const ck = latestCheckpoint(opts.runDir);
    if (ck && ck.state.phase === 'rl') {
      await policy.load(ck.dir);
      await opts.loadExtra?.(ck.dir);
      start = ck.step + 1;
      lastCheckpoint = ck;
      sink.event?.('resumed', { fromStep: ck.step, checkpoint: ck.dir });
    }
    await sink.truncateAfter(start - 1);
  }
  const retention = retentionOf(cfg);
  const save = async (step: number) => {
    lastCheckpoint = await saveCheckpoint(
      opts.runDir,
      { step, phase: 'rl', seed: cfg.seed },
      async (dir) => {
        await policy.save(dir);
        await opts.saveExtra?.(dir);
      },
      retention,
    );
    sink.event?.('checkpoint', { step, dir: lastCheckpoint.dir, bytes: treeBytes(lastCheckpoint.dir) });
  };

  const alg = cfg.algorithm;
  const watch = new LearningWatch();
  // The best checkpoint by held-out score (checkpoint.keep_best): kept beside the last ones, never pruned.
  let best: BestMark | undefined = opts.resume ? readBest(opts.runDir) : undefined;
  const bestImproved = (ev: Record<string, number>): boolean => {
    if (!cfg.checkpoint.keep_best) return false;
    const v = ev[cfg.checkpoint.best_metric];
    if (v === undefined)
      throw new Error(
        `checkpoint.best_metric: "${cfg.checkpoint.best_metric}" is not a held-out metric of this task (it reports ${Object.keys(ev).join(', ')})`,
      );
    return Number.isFinite(v) && (best === undefined || v > best.value);
  };
  const keepBest = (step: number, ev: Record<string, number>) => {
    best = { step, metric: cfg.checkpoint.best_metric, value: ev[cfg.checkpoint.best_metric]! };
    markBest(opts.runDir, best, retention);
    sink.event?.('best_checkpoint', { ...best });
  };
  let lastEval: Record<string, number> | undefined;
  let step = start;
  let stopped = false;
  for (; step <= cfg.steps; step++) {
    await opts.beforeStep?.();
    if (opts.signal?.aborted) {
      stopped = true;
      break;
    }
    const seed = stepSeed(cfg.seed, step);
    const m: Record<string, number> = {};

    // ---- rollout (with dynamic sampling refill) -------------------------------------------
    const t0 = performance.now();
    // Prompts per rollout round: with dynamic sampling, gen_prompts may oversample so that one round usually fills the batch.
    const roundPrompts = alg.dynamic_sampling.enabled ? (alg.dynamic_sampling.gen_prompts ?? cfg.rollout.prompts_per_step) : cfg.rollout.prompts_per_step;
    const all = await rollout.sample({ step, seed, prompts: roundPrompts, n: cfg.rollout.n, round: 0 });
    // Episodes whose reward is incomplete (a judge's named failure, engine/train/judge-rollout.ts): stored, never trained on.
    const scored = (eps: Episode[]) => eps.filter((e) => e.unscored === undefined);
    let episodes = scored(all);
    // The flat groups dynamic sampling drops; a sample of them is stored flagged (the learning panel opens them).
    const droppedGroups: Episode[][] = [];
    const keepDropped = (groups: Episode[][]) => void droppedGroups.push(...groups);
    if (alg.dynamic_sampling.enabled) {
      const first = dropFlatGroups(episodes);
      keepDropped(first.droppedGroups);
      let kept = first.kept;
      let droppedTotal = first.dropped;
      const want = cfg.rollout.prompts_per_step * cfg.rollout.n;
      for (let round = 1; kept.length < want && round <= alg.dynamic_sampling.max_rounds; round++) {
        const more = await rollout.sample({ step, seed: stepSeed(cfg.seed, step, round), prompts: roundPrompts, n: cfg.rollout.n, round });
        // Past every group sampled so far (kept, dropped or unscored): a refill's groups never share a number with an earlier round's.
        const offset = Math.max(-1, ...all.map((e) => e.group)) + 1;
        all.push(...more);
        for (const e of more) e.group += offset;
        const r = dropFlatGroups(scored(more));
        keepDropped(r.droppedGroups);
        droppedTotal += r.dropped;
        kept = kept.concat(r.kept);
      }
      // Keep whole groups up to the target batch; never an empty batch: when every round's groups were
      // flat, the first prompts_per_step of them are the batch (trained on with the advantages their
      // estimator gives a flat group) and are neither counted nor stored as dropped.
      const batchOf = (eps: Episode[]) => {
        const keepGroups = new Set([...new Set(eps.map((e) => e.group))].slice(0, cfg.rollout.prompts_per_step));
        return eps.filter((e) => keepGroups.has(e.group));
      };
      if (kept.length > 0) episodes = batchOf(kept);
      else if (episodes.length > 0) {
        episodes = batchOf(scored(all));
        const trained = new Set(episodes);
        droppedTotal -= new Set(episodes.map((e) => e.group)).size;
        droppedGroups.splice(0, droppedGroups.length, ...droppedGroups.filter((g) => !trained.has(g[0]!)));
      }
      m['dynamic_sampling/dropped_groups'] = droppedTotal;
    }
    const droppedSample = droppedGroups.slice(0, DROPPED_GROUPS_STORED).flat();
    const rolloutMs = performance.now() - t0;
    const unscored = all.filter((e) => e.unscored !== undefined);
    Object.assign(m, episodeMetrics(all));
    Object.assign(m, rollout.takeMetrics?.());
    if (episodes.length === 0) {
      // Nothing left to train on (every group's judgement failed): the step is logged and stored, the weights stay.
      m['learn/unscored_step'] = 1;
      m['time/rollout_s'] = rolloutMs / 1000;
      await sink.trajectories?.(step, unscored, new Map());
      await sink.metrics(step, m);
      opts.onStep?.(step, m);
      if (step % cfg.checkpoint.every === 0 || step === cfg.steps || opts.signal?.aborted) await save(step);
      continue;
    }
    if (cfg.rollout.branching.mode !== 'none') Object.assign(m, branchMetrics(all));
    if (alg.overlong.enabled) {
      let penalty = 0;
      for (const e of episodes) {
        const p = overlongPenalty(modelTokenCount(e), responseBudget(e, cfg.rollout), alg.overlong.buffer, e.truncated, alg.overlong.penalty);
        e.reward += p;
        penalty += p;
      }
      m['reward/overlong_penalty_mean'] = penalty / episodes.length;
      m['reward/shaped_mean'] = episodes.reduce((a, e) => a + e.reward, 0) / episodes.length;
    }

    // ---- scoring: old policy (recomputed), reference, critic ------------------------------
    const t1 = performance.now();
    let oldLogprobs: Map<Episode, Float32Array>;
    if (alg.old_logprobs === 'rollout') {
      // The rollout's own logprobs: the policy has not changed since it sampled them.
      oldLogprobs = new Map(episodes.map((e) => [e, e.rolloutLogprobs] as const));
    } else {
      const old = await policy.score(episodes);
      oldLogprobs = new Map(episodes.map((e, i) => [e, old.logprobs[i]!] as const));
      const mis = logprobMismatch(episodes, old.logprobs);
      m['rollout/logprob_mismatch'] = mis.meanAbs;
      m['rollout/logprob_mismatch_max'] = mis.max;
    }
    let refLogprobs: Map<Episode, Float32Array> | undefined;
    if (reference && alg.kl_coef > 0) {
      const ref = await reference.score(episodes);
      refLogprobs = new Map(episodes.map((e, i) => [e, ref.logprobs[i]!] as const));
    }
    let teacherLogprobs: Map<Episode, Float32Array> | undefined;
    if (ports.teacher) {
      const t = await ports.teacher.score(episodes);
      teacherLogprobs = new Map(episodes.map((e, i) => [e, t.logprobs[i]!] as const));
    }
    let values: Map<Episode, Float32Array> | undefined;
    if (advantage.values) {
      const v = await advantage.values(episodes);
      values = new Map(episodes.map((e, i) => [e, v[i]!] as const));
    }
    const scoreMs = performance.now() - t1;

    // ---- advantages -------------------------------------------------------------------------
    const { advantages, returns, metrics: estimatorMetrics, parts } = advantage.compute({ episodes, refLogprobs, oldLogprobs, values, teacherLogprobs });
    Object.assign(m, estimatorMetrics);
    let aSum = 0;
    let aAbs = 0;
    let aN = 0;
    // "Why didn't it learn?" (./diagnostics.ts): the advantage distribution over model tokens, the
    // share of tokens / episodes that carry a policy gradient, and the groups with no reward variance.
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

    // ---- update: PPO epochs × mini-batches, each accumulating over micro-batches ------------
    const t2 = performance.now();
    const lr = learningRate(cfg.optim, step, cfg.steps);
    const rand = mulberry32(stepSeed(cfg.seed, step, 1000));
    const agg = { loss: 0, gradNorm: 0, clipFraction: 0, kl: 0, entropy: 0, valueLoss: 0, n: 0, tokens: 0 };
    const lossMetrics: Record<string, number> = {};
    const signals = new Map<Episode, TokenSignal>();
    let fresh = alg.old_logprobs !== 'rollout';
    for (let epoch = 0; epoch < alg.ppo_epochs; epoch++) {
      for (const mb of chunks(shuffled(episodes, rand), alg.mini_batches)) {
        const s = await policy.update({
          fresh,
          microBatches: chunks(mb, alg.micro_batches),
          advantages,
          returns,
          oldLogprobs,
          refLogprobs,
          oldValues: values,
          lr,
        });
        agg.loss += s.loss;
        agg.gradNorm += s.gradNorm;
        agg.clipFraction += s.clipFraction;
        agg.kl += s.kl;
        agg.entropy += s.entropy;
        agg.valueLoss += s.valueLoss ?? 0;
        agg.tokens += s.tokens;
        agg.n++;
        fresh = false;
        for (const [e, sig] of s.signals ?? []) signals.set(e, sig);
        for (const [key, v] of Object.entries(s.metrics ?? {})) lossMetrics[key] = (lossMetrics[key] ?? 0) + v;
      }
    }
    const updateMs = performance.now() - t2;
    const k = Math.max(1, agg.n);
    m['actor/loss'] = agg.loss / k;
    m['actor/grad_norm'] = agg.gradNorm / k;
    m['actor/clip_fraction'] = agg.clipFraction / k;
    m['actor/kl'] = agg.kl / k;
    m['actor/entropy'] = agg.entropy / k;
    for (const [key, v] of Object.entries(lossMetrics)) m[`actor/${key}`] = v / k;
    if (values) m['critic/value_loss'] = agg.valueLoss / k;
    m['optim/lr'] = lr;
    m['time/rollout_s'] = rolloutMs / 1000;
    m['time/score_s'] = scoreMs / 1000;
    m['time/update_s'] = updateMs / 1000;
    // Generated tokens: a branch's copy of its parent's prefix was not generated again.
    const stepTokens = all.reduce((a, e) => a + generatedTokenCount(e), 0);
    m['rollout/model_tokens'] = stepTokens;
    m['perf/rollout_tokens_per_s'] = stepTokens / Math.max(1e-9, rolloutMs / 1000);
    m['perf/update_tokens_per_s'] = agg.tokens / Math.max(1e-9, updateMs / 1000);
    m['perf/tokens_per_s'] = (stepTokens + agg.tokens) / Math.max(1e-9, (rolloutMs + scoreMs + updateMs) / 1000);

    await sink.trajectories?.(step, unscored.length || droppedSample.length ? [...episodes, ...unscored, ...droppedSample] : episodes, advantages, {
      ...(droppedSample.length ? { dropped: new Set(droppedSample) } : {}),
      refLogprobs,
      values,
      ...(signals.size ? { signals } : {}),
      ...(parts ? { advantageParts: parts } : {}),
      ...(teacherLogprobs ? { teacherLogprobs } : {}),
    });
    let improved = false;
    if (ports.eval && cfg.eval.every > 0 && step % cfg.eval.every === 0) {
      lastEval = await ports.eval.evaluate({ step, n: cfg.eval.n_questions });
      for (const [key, v] of Object.entries(lastEval)) m[`eval/${key}`] = v;
      improved = bestImproved(lastEval);
    }
    await sink.metrics(step, m);
    for (const message of watch.observe(step, m)) sink.event?.('warning', { step, message });
    opts.onStep?.(step, m);
    if (step % cfg.checkpoint.every === 0 || step === cfg.steps || opts.signal?.aborted || improved) await save(step);
    if (improved) keepBest(step, lastEval!);
  }
  const lastStep = step - 1;
  if (stopped && lastStep >= start && lastCheckpoint?.step !== lastStep) await save(lastStep);
  if (ports.eval && !stopped && (cfg.eval.every === 0 || cfg.steps % cfg.eval.every !== 0) && lastStep >= start) {
    lastEval = await ports.eval.evaluate({ step: lastStep, n: cfg.eval.n_questions });
    await sink.metrics(lastStep, Object.fromEntries(Object.entries(lastEval).map(([k2, v]) => [`eval/${k2}`, v])));
    // The last step's checkpoint was saved above (step === cfg.steps).
    if (bestImproved(lastEval) && lastCheckpoint?.step === lastStep) keepBest(lastStep, lastEval);
  }
  return { firstStep: start, lastStep, stopped, lastCheckpoint, lastEval };
}
