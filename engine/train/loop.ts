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
import { LearningWatch } from './diagnostics';
import {
  chunks,
  dropFlatGroups,
  episodeMetrics,
  branchMetrics,
  logprobMismatch,
  modelTokenCount,
  overlongPenalty,
  responseBudget,
  stepSeed,
  type Episode,
} from './episode';
import { advantageMetrics, throughputMetrics, updateMetrics, type UpdateTotals } from './step-metrics';

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

/**
 * What the loop reads of the experiment config: the step count and seed, and the optimizer,
 * evaluation, checkpoint, rollout and algorithm sections (the loop is where they meet; each
 * helper below takes only the sections it reads).
 */
export type LoopSettings = Pick<ExperimentConfig, 'steps' | 'seed' | 'optim' | 'eval' | 'checkpoint' | 'rollout' | 'algorithm'>;

/** Learning rate at a step: linear warm-up, then constant or cosine decay to min_lr_ratio·lr. */
export function learningRate(cfg: ExperimentConfig['optim'], step: number, totalSteps: number): number {
  if (cfg.warmup_steps > 0 && step <= cfg.warmup_steps) return (cfg.lr * step) / cfg.warmup_steps;
  if (cfg.schedule === 'constant') return cfg.lr;
  const span = Math.max(1, totalSteps - cfg.warmup_steps);
  const progress = Math.min(1, (step - cfg.warmup_steps) / span);
  const floor = cfg.lr * cfg.min_lr_ratio;
  return floor + 0.5 * (cfg.lr - floor) * (1 + Math.cos(Math.PI * progress));
}

/**
 * Steps from the first (after the resumed checkpoint) to cfg.steps: each awaits opts.beforeStep, stops at
 * opts.signal, trains one step (rlStep), evaluates every eval.every steps, logs and checkpoints; after the
 * last step the held-out evaluation runs once more unless the last step already had one.
 */
export async function runTrainingLoop(cfg: LoopSettings, ports: LoopPorts, opts: LoopOptions): Promise<LoopResult> {
  const { sink } = ports;
  const resumed = opts.resume ? await resume(ports, opts) : undefined;
  const start = resumed ? resumed.step + 1 : 1;
  const checkpoints = new LoopCheckpoints(cfg, ports, opts, resumed);
  const watch = new LearningWatch();
  let lastEval: Record<string, number> | undefined;
  let step = start;
  let stopped = false;
  for (; step <= cfg.steps; step++) {
    await opts.beforeStep?.();
    if (opts.signal?.aborted) {
      stopped = true;
      break;
    }
    const m: Record<string, number> = {};
    const trained = await rlStep(cfg, ports, step, m);
    let improved = false;
    if (trained && ports.eval && cfg.eval.every > 0 && step % cfg.eval.every === 0) {
      lastEval = await ports.eval.evaluate({ step, n: cfg.eval.n_questions });
      for (const [key, v] of Object.entries(lastEval)) m[`eval/${key}`] = v;
      improved = checkpoints.improves(lastEval);
    }
    await sink.metrics(step, m);
    // A step with nothing to train on (every group's judgement failed) is logged without the learning watch.
    if (trained) for (const message of watch.observe(step, m)) sink.event?.('warning', { step, message });
    opts.onStep?.(step, m);
    if (step % cfg.checkpoint.every === 0 || step === cfg.steps || opts.signal?.aborted || improved) await checkpoints.save(step);
    if (improved) checkpoints.keepBest(step, lastEval!);
  }
  const lastStep = step - 1;
  if (stopped && lastStep >= start && checkpoints.last?.step !== lastStep) await checkpoints.save(lastStep);
  if (ports.eval && !stopped && (cfg.eval.every === 0 || cfg.steps % cfg.eval.every !== 0) && lastStep >= start) {
    lastEval = await ports.eval.evaluate({ step: lastStep, n: cfg.eval.n_questions });
    await sink.metrics(lastStep, Object.fromEntries(Object.entries(lastEval).map(([k2, v]) => [`eval/${k2}`, v])));
    // The last step's checkpoint was saved above (step === cfg.steps).
    if (checkpoints.improves(lastEval) && checkpoints.last?.step === lastStep) checkpoints.keepBest(lastStep, lastEval);
  }
  return { firstStep: start, lastStep, stopped, lastCheckpoint: checkpoints.last, lastEval };
}

/**
 * opts.resume: loads the last complete RL checkpoint into the policy (and opts.loadExtra) and drops the
 * store's rows of the steps after it (all of them when there is none). Returns that checkpoint.
 */
async function resume(ports: LoopPorts, opts: LoopOptions): Promise<CheckpointInfo | undefined> {
  const ck = latestCheckpoint(opts.runDir);
  const resumed = ck && ck.state.phase === 'rl' ? ck : undefined;
  if (resumed) {
    await ports.policy.load(resumed.dir);
    await opts.loadExtra?.(resumed.dir);
    ports.sink.event?.('resumed', { fromStep: resumed.step, checkpoint: resumed.dir });
  }
  await ports.sink.truncateAfter(resumed?.step ?? 0);
  return resumed;
}

/**
 * The loop's checkpoints in runDir (the policy and opts.saveExtra, under checkpoint.keep_last's retention),
 * and the best one by held-out score (checkpoint.keep_best): marked beside the last ones, never pruned.
 */
class LoopCheckpoints {
  /** The last checkpoint saved (or resumed from). */
  last: CheckpointInfo | undefined;
  private best: BestMark | undefined;
  private readonly retention: ReturnType<typeof retentionOf>;

  constructor(
    private readonly cfg: Pick<LoopSettings, 'checkpoint' | 'seed' | 'steps'>,
    private readonly ports: Pick<LoopPorts, 'policy' | 'sink'>,
    private readonly opts: Pick<LoopOptions, 'runDir' | 'resume' | 'saveExtra'>,
    resumed: CheckpointInfo | undefined,
  ) {
    this.last = resumed;
    this.retention = retentionOf(cfg);
    this.best = opts.resume ? readBest(opts.runDir) : undefined;
  }

  async save(step: number): Promise<void> {
    const { policy, sink } = this.ports;
    const { runDir, saveExtra } = this.opts;
    this.last = await saveCheckpoint(
      runDir,
      { step, phase: 'rl', seed: this.cfg.seed },
      async (dir) => {
        await policy.save(dir);
        await saveExtra?.(dir);
      },
      this.retention,
    );
    sink.event?.('checkpoint', { step, dir: this.last.dir, bytes: treeBytes(this.last.dir) });
  }

  /** Whether a held-out evaluation beats the best so far (always false without checkpoint.keep_best); refuses a best_metric the task does not report. */
  improves(ev: Record<string, number>): boolean {
    const { keep_best, best_metric } = this.cfg.checkpoint;
    if (!keep_best) return false;
    const v = ev[best_metric];
    if (v === undefined)
      throw new Error(`checkpoint.best_metric: "${best_metric}" is not a held-out metric of this task (it reports ${Object.keys(ev).join(', ')})`);
    return Number.isFinite(v) && (this.best === undefined || v > this.best.value);
  }

  /** Marks the checkpoint of `step` (saved already) the best, by its evaluation `ev`. */
  keepBest(step: number, ev: Record<string, number>): void {
    const metric = this.cfg.checkpoint.best_metric;
    this.best = { step, metric, value: ev[metric]! };
    markBest(this.opts.runDir, this.best, this.retention);
    this.ports.sink.event?.('best_checkpoint', { ...this.best });
  }
}

/**
 * One RL step: sample a batch (with dynamic sampling's refill), shape rewards (overlong), score it (old policy,
 * reference, teacher, critic), compute advantages, update the policy, and store the step's trajectories. Adds
 * the step's metrics to `m`. Returns false when nothing was left to train on (every group's judgement failed:
 * the step is logged and its episodes stored, the weights stay).
 */
async function rlStep(cfg: LoopSettings, ports: LoopPorts, step: number, m: Record<string, number>): Promise<boolean> {
  const { rollout, policy, advantage, sink } = ports;
  const t0 = performance.now();
  const batch = await sampleBatch(cfg, rollout, step);
  const rolloutMs = performance.now() - t0;
  if (batch.droppedGroups !== undefined) m['dynamic_sampling/dropped_groups'] = batch.droppedGroups;
  Object.assign(m, episodeMetrics(batch.all));
  Object.assign(m, rollout.takeMetrics?.());
  const { all, episodes, unscored, droppedSample } = batch;
  if (episodes.length === 0) {
    m['learn/unscored_step'] = 1;
    m['time/rollout_s'] = rolloutMs / 1000;
    await sink.trajectories?.(step, unscored, new Map());
    return false;
  }
  if (cfg.rollout.branching.mode !== 'none') Object.assign(m, branchMetrics(all));
  if (cfg.algorithm.overlong.enabled) Object.assign(m, applyOverlongPenalty(cfg, episodes));

  const t1 = performance.now();
  const scores = await scoreBatch(cfg, ports, episodes, m);
  const scoreMs = performance.now() - t1;
  const { oldLogprobs, refLogprobs, teacherLogprobs, values } = scores;

  const { advantages, returns, metrics: estimatorMetrics, parts } = advantage.compute({ episodes, refLogprobs, oldLogprobs, values, teacherLogprobs });
  Object.assign(m, estimatorMetrics);
  Object.assign(m, advantageMetrics(episodes, advantages));

  const t2 = performance.now();
  const lr = learningRate(cfg.optim, step, cfg.steps);
  const { totals, signals } = await updatePolicy(cfg, policy, step, episodes, { advantages, returns, oldLogprobs, refLogprobs, oldValues: values, lr });
  const updateMs = performance.now() - t2;
  Object.assign(m, updateMetrics(totals, values !== undefined));
  m['optim/lr'] = lr;
  Object.assign(m, throughputMetrics({ rolloutMs, scoreMs, updateMs }, all, totals.tokens));

  await sink.trajectories?.(step, unscored.length || droppedSample.length ? [...episodes, ...unscored, ...droppedSample] : episodes, advantages, {
    ...(droppedSample.length ? { dropped: new Set(droppedSample) } : {}),
    refLogprobs,
    values,
    ...(signals.size ? { signals } : {}),
    ...(parts ? { advantageParts: parts } : {}),
    ...(teacherLogprobs ? { teacherLogprobs } : {}),
  });
  return true;
}

/** A step's sampled episodes, sorted by what becomes of them. */
interface StepBatch {
  /** Everything sampled, over every round. */
  all: Episode[];
  /** What the step trains on. */
  episodes: Episode[];
  /** Episodes whose reward is incomplete (a judge's named failure, engine/train/judge-rollout.ts): stored, never trained on. */
  unscored: Episode[];
  /** A sample of the flat groups dynamic sampling dropped (DROPPED_GROUPS_STORED of them), stored flagged `dropped` so the learning panel opens them. */
  droppedSample: Episode[];
  /** With dynamic sampling: how many flat groups it dropped (dynamic_sampling/dropped_groups). */
  droppedGroups?: number;
}

/** Episodes whose reward is complete. */
const scoredOnly = (eps: Episode[]) => eps.filter((e) => e.unscored === undefined);

/** Samples a step's batch: rollout.prompts_per_step prompts × rollout.n, or with dynamic sampling the groups with reward variance (dynamicSamplingBatch). */
async function sampleBatch(cfg: Pick<LoopSettings, 'algorithm' | 'rollout' | 'seed'>, rollout: RolloutPort, step: number): Promise<StepBatch> {
  const ds = cfg.algorithm.dynamic_sampling;
  // Prompts per rollout round: with dynamic sampling, gen_prompts may oversample so that one round usually fills the batch.
  const roundPrompts = ds.enabled ? (ds.gen_prompts ?? cfg.rollout.prompts_per_step) : cfg.rollout.prompts_per_step;
  const all = await rollout.sample({ step, seed: stepSeed(cfg.seed, step), prompts: roundPrompts, n: cfg.rollout.n, round: 0 });
  if (!ds.enabled) return { all, episodes: scoredOnly(all), unscored: all.filter((e) => e.unscored !== undefined), droppedSample: [] };
  const { episodes, droppedGroups, dropped } = await dynamicSamplingBatch(cfg, rollout, step, all, roundPrompts);
  return {
    all,
    episodes,
    unscored: all.filter((e) => e.unscored !== undefined),
    droppedSample: droppedGroups.slice(0, DROPPED_GROUPS_STORED).flat(),
    droppedGroups: dropped,
  };
}

/**
 * DAPO's dynamic sampling: drops the flat groups (no reward variance) of the first round `all` and samples
 * more rounds (up to dynamic_sampling.max_rounds, appended to `all`) until prompts_per_step groups are kept.
 * Returns the batch, the dropped groups (those not trained on) and how many were dropped.
 */
async function dynamicSamplingBatch(
  cfg: Pick<LoopSettings, 'algorithm' | 'rollout' | 'seed'>,
  rollout: RolloutPort,
  step: number,
  all: Episode[],
  roundPrompts: number,
): Promise<{ episodes: Episode[]; droppedGroups: Episode[][]; dropped: number }> {
  const firstRound = scoredOnly(all);
  const first = dropFlatGroups(firstRound);
  const droppedGroups: Episode[][] = [...first.droppedGroups];
  let kept = first.kept;
  let dropped = first.dropped;
  const want = cfg.rollout.prompts_per_step * cfg.rollout.n;
  for (let round = 1; kept.length < want && round <= cfg.algorithm.dynamic_sampling.max_rounds; round++) {
    const more = await rollout.sample({ step, seed: stepSeed(cfg.seed, step, round), prompts: roundPrompts, n: cfg.rollout.n, round });
    // Past every group sampled so far (kept, dropped or unscored): a refill's groups never share a number with an earlier round's.
    const offset = Math.max(-1, ...all.map((e) => e.group)) + 1;
    all.push(...more);
    for (const e of more) e.group += offset;
    const r = dropFlatGroups(scoredOnly(more));
    droppedGroups.push(...r.droppedGroups);
    dropped += r.dropped;
    kept = kept.concat(r.kept);
  }
  // Keep whole groups up to the target batch; never an empty batch: when every round's groups were
  // flat, the first prompts_per_step of them are the batch (trained on with the advantages their
  // estimator gives a flat group) and are neither counted nor stored as dropped.
  const batchOf = (eps: Episode[]) => {
    const keepGroups = new Set([...new Set(eps.map((e) => e.group))].slice(0, cfg.rollout.prompts_per_step));
    return eps.filter((e) => keepGroups.has(e.group));
  };
  if (kept.length > 0) return { episodes: batchOf(kept), droppedGroups, dropped };
  if (firstRound.length === 0) return { episodes: firstRound, droppedGroups, dropped };
  const episodes = batchOf(scoredOnly(all));
  const trained = new Set(episodes);
  return {
    episodes,
    droppedGroups: droppedGroups.filter((g) => !trained.has(g[0]!)),
    dropped: dropped - new Set(episodes.map((e) => e.group)).size,
  };
}

/** DAPO's overlong shaping: adds each episode's soft penalty (its model tokens against its response budget) to its reward. Returns the penalty's and the shaped reward's means. */
function applyOverlongPenalty(cfg: Pick<LoopSettings, 'algorithm' | 'rollout'>, episodes: Episode[]): Record<string, number> {
  const { buffer, penalty: factor } = cfg.algorithm.overlong;
  let penalty = 0;
  for (const e of episodes) {
    const p = overlongPenalty(modelTokenCount(e), responseBudget(e, cfg.rollout), buffer, e.truncated, factor);
    e.reward += p;
    penalty += p;
  }
  return {
    'reward/overlong_penalty_mean': penalty / episodes.length,
    'reward/shaped_mean': episodes.reduce((a, e) => a + e.reward, 0) / episodes.length,
  };
}

/** Per-token scores of a batch, per episode. */
interface BatchScores {
  oldLogprobs: Map<Episode, Float32Array>;
  refLogprobs?: Map<Episode, Float32Array>;
  teacherLogprobs?: Map<Episode, Float32Array>;
  values?: Map<Episode, Float32Array>;
}

/**
 * The most episodes one scoring call takes: the update's micro-batch (a step's episodes over
 * algorithm.mini_batches, each of those over algorithm.micro_batches, as updatePolicy cuts them:
 * the largest piece of `chunks`). A scoring call holds its LM head's [rows, vocabulary] chunks and
 * every layer's activations for all of its rows at once, so it is cut as the update is (TRL scores
 * in its per-device train batch; verl in log_prob_micro_batch_size pieces).
 */
export function scorePieceSize(alg: Pick<LoopSettings['algorithm'], 'mini_batches' | 'micro_batches'>, episodes: number): number {
  const n = Math.max(1, episodes);
  const mini = Math.ceil(n / Math.min(Math.max(1, alg.mini_batches), n));
  return Math.ceil(mini / Math.min(Math.max(1, alg.micro_batches), mini));
}

/**
 * `fn` (a per-episode pass: scores, values) over consecutive pieces of at most `size` episodes, its
 * results concatenated in the episodes' order. Rows are independent, so each episode's result is
 * the one a single call would give (only the padding of its piece differs).
 */
export async function inPieces<R>(episodes: Episode[], size: number, fn: (piece: Episode[]) => Promise<R[]>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < episodes.length; i += Math.max(1, size)) {
    const piece = episodes.slice(i, i + Math.max(1, size));
    const r = await fn(piece);
    if (r.length !== piece.length) throw new Error(`scoring: a pass over ${piece.length} episodes returned ${r.length} results`);
    out.push(...r);
  }
  return out;
}

/** A ScorePort's logprobs of `episodes`, scored in pieces of at most `size` (inPieces). */
export async function scoreInPieces(port: ScorePort, episodes: Episode[], size: number): Promise<Float32Array[]> {
  return inPieces(episodes, size, async (piece) => (await port.score(piece)).logprobs);
}

/**
 * The batch's old-policy logprobs (the rollout's own with algorithm.old_logprobs: rollout, else recomputed by the
 * policy, their mismatch with the rollout's logged in `m`), the reference's (with a KL term), the teacher's
 * (algorithm.distill) and the critic's values (an estimator with a critic); each pass in pieces of the update's
 * micro-batch (scorePieceSize).
 */
async function scoreBatch(cfg: Pick<LoopSettings, 'algorithm'>, ports: LoopPorts, episodes: Episode[], m: Record<string, number>): Promise<BatchScores> {
  const byEpisode = <T>(xs: T[]) => new Map(episodes.map((e, i) => [e, xs[i]!] as const));
  const size = scorePieceSize(cfg.algorithm, episodes.length);
  let oldLogprobs: Map<Episode, Float32Array>;
  if (cfg.algorithm.old_logprobs === 'rollout') {
    // The rollout's own logprobs: the policy has not changed since it sampled them.
    oldLogprobs = new Map(episodes.map((e) => [e, e.rolloutLogprobs] as const));
  } else {
    const old = await scoreInPieces(ports.policy, episodes, size);
    oldLogprobs = byEpisode(old);
    const mis = logprobMismatch(episodes, old);
    m['rollout/logprob_mismatch'] = mis.meanAbs;
    m['rollout/logprob_mismatch_max'] = mis.max;
  }
  const refLogprobs = ports.reference && cfg.algorithm.kl_coef > 0 ? byEpisode(await scoreInPieces(ports.reference, episodes, size)) : undefined;
  const teacherLogprobs = ports.teacher ? byEpisode(await scoreInPieces(ports.teacher, episodes, size)) : undefined;
  const values = ports.advantage.values ? byEpisode(await inPieces(episodes, size, (piece) => ports.advantage.values!(piece))) : undefined;
  return { oldLogprobs, refLogprobs, teacherLogprobs, values };
}

/**
 * The step's update: algorithm.ppo_epochs passes over the batch, each shuffled (from the step's seed) into
 * algorithm.mini_batches optimizer steps that accumulate over algorithm.micro_batches. Returns the optimizer
 * steps' sums and, per episode, the token signals of the last pass that saw it.
 */
async function updatePolicy(
  cfg: Pick<LoopSettings, 'algorithm' | 'seed'>,
  policy: PolicyPort,
  step: number,
  episodes: Episode[],
  inputs: Omit<Parameters<PolicyPort['update']>[0], 'microBatches' | 'fresh'>,
): Promise<{ totals: UpdateTotals; signals: Map<Episode, TokenSignal> }> {
  const alg = cfg.algorithm;
  const rand = mulberry32(stepSeed(cfg.seed, step, 1000));
  const totals: UpdateTotals = { loss: 0, gradNorm: 0, clipFraction: 0, kl: 0, entropy: 0, valueLoss: 0, n: 0, tokens: 0, lossMetrics: {} };
  const signals = new Map<Episode, TokenSignal>();
  // The first optimizer step's weights are the ones that scored the old logprobs (unless they are the rollout's own).
  let fresh = alg.old_logprobs !== 'rollout';
  for (let epoch = 0; epoch < alg.ppo_epochs; epoch++) {
    for (const mb of chunks(shuffled(episodes, rand), alg.mini_batches)) {
      const s = await policy.update({ fresh, microBatches: chunks(mb, alg.micro_batches), ...inputs });
      totals.loss += s.loss;
      totals.gradNorm += s.gradNorm;
      totals.clipFraction += s.clipFraction;
      totals.kl += s.kl;
      totals.entropy += s.entropy;
      totals.valueLoss += s.valueLoss ?? 0;
      totals.tokens += s.tokens;
      totals.n++;
      fresh = false;
      for (const [e, sig] of s.signals ?? []) signals.set(e, sig);
      for (const [key, v] of Object.entries(s.metrics ?? {})) totals.lossMetrics[key] = (totals.lossMetrics[key] ?? 0) + v;
    }
  }
  return { totals, signals };
}
