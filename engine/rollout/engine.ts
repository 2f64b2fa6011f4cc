/**
 * The multi-turn rollout engine: n samples of every task, each a sequence of model turns and
 * environment steps (tool calls), recorded as trajectories.
 *
 *  - rollout(): sampled from a model over a KV-cache decoder, continuously batched
 *    (./scheduler.ts: which sequences decode each tick, the scheduler the OpenAI endpoint shares;
 *    ./episodes.ts: the rollout's episodes as its source, environment steps between turns;
 *    ./sequence.ts: where a turn ends and what follows the environment's step;
 *    ./branch-groups.ts: ARPO/AEPO branching groups).
 *  - rolloutTextPolicy(): turns written by a text policy (the scripted expert), under the same
 *    limits and environment rules (./sequence.ts afterEnvStep).
 *
 * Reproducibility: each sequence samples from its own PRNG stream seeded by
 * (seed, group, sample), so batch composition and tool completion order do not change what a
 * sequence samples (up to floating-point differences of the model between batch shapes).
 */
import { mixSeed } from '../base/rng';
import type { SamplingParams } from './sampling';
import type { DecodeBackend, RolloutTask, TextPolicy, TokenizerPort } from './ports';
import type { Trajectory, Turn } from './types';
import { validateBranching, type BranchingOptions } from './branching';
import { BranchingGroups } from './branch-groups';
import { DECODE_STEPS, turnLengthsFor } from './decode-steps';
import { Episodes, IndependentSamples } from './episodes';
import { Scheduler, type SchedulerCounters } from './scheduler';
import { TurnRules, afterEnvStep, type RolloutLimits, type Seq, type StopConfig } from './sequence';

export type { RolloutLimits, StopConfig } from './sequence';
export { DECODE_STEPS, HOP_STEPS, TurnLengths, chooseDecodeSteps } from './decode-steps';

export interface RolloutProgress {
  done: number;
  total: number;
  generatedTokens: number;
  elapsedMs: number;
}

export interface RolloutOptions {
  tasks: RolloutTask[];
  /** Samples per task (GRPO group size). */
  n: number;
  seed: number;
  sampling: SamplingParams;
  limits: RolloutLimits;
  stop: StopConfig;
  tokenizer: TokenizerPort;
  /** Largest number of sequences decoded together (≤ backend.maxBatch). */
  maxBatch?: number;
  /** Group index of tasks[0] (groups are numbered tasks[i] → groupOffset + i). */
  groupOffset?: number;
  /**
   * Prefill identical prompts of sequences starting together (a GRPO group) once and fork the
   * cache to the others (default true when the backend can fork).
   */
  sharePrefix?: boolean;
  /**
   * Branching rollouts (ARPO / AEPO, ./branching.ts): `n` is the per-prompt budget M; samples
   * branch after tool responses, sharing the parent's KV cache up to the branch point.
   */
  branching?: BranchingOptions;
  /**
   * Most decode steps per backend call (default DECODE_STEPS; 1 = one step per call). Used when
   * the backend samples (extendSampleSteps + truncate, greedy or full-distribution sampling);
   * see DECODE_STEPS. Tokens and logprobs do not depend on it.
   */
  decodeSteps?: number;
  onTrajectory?(t: Trajectory): void;
  onProgress?(p: RolloutProgress): void;
  signal?: AbortSignal;
}

export interface RolloutStats {
  trajectories: number;
  generatedTokens: number;
  prefillTokens: number;
  modelCalls: number;
  /** Decode steps the backend ran (≥ modelCalls: several per call with decodeSteps > 1). */
  modelSteps: number;
  /** Tokens sampled by a multi-step call after their sequence's turn had ended (discarded; the cache and stream rewound). */
  discardedTokens: number;
  modelMs: number;
  wallMs: number;
  /** Generated tokens per wall-clock second. */
  tokensPerSecond: number;
  /** Mean number of sequences per decode call. */
  meanBatch: number;
  /** Time in sampling and the per-token bookkeeping (stop checks, detokenising) on the engine's thread. */
  sampleMs: number;
  /** Time the scheduler waited with no sequence to decode (every live one in its environment). */
  envWaitMs: number;
  /** Branching rollouts: branches created, and prefix tokens they took from a forked cache instead of prefilling. */
  branches?: number;
  prefixTokensSaved?: number;
}

export interface RolloutResult {
  /** In (group, sample) order. */
  trajectories: Trajectory[];
  stats: RolloutStats;
}

export function validateRolloutOptions(o: { n: number; limits: RolloutLimits; maxBatch?: number; decodeSteps?: number }, backend?: DecodeBackend): void {
  const bad = (f: string, v: unknown, want: string) => new Error(`rollout option ${f} must be ${want} (got ${String(v)})`);
  if (!Number.isInteger(o.n) || o.n < 1) throw bad('n', o.n, 'an integer ≥ 1');
  if (!Number.isInteger(o.limits.maxNewTokens) || o.limits.maxNewTokens < 1) throw bad('limits.maxNewTokens', o.limits.maxNewTokens, 'an integer ≥ 1');
  if (!Number.isInteger(o.limits.maxTurns) || o.limits.maxTurns < 1) throw bad('limits.maxTurns', o.limits.maxTurns, 'an integer ≥ 1');
  if (!Number.isInteger(o.limits.maxTotalLength) || o.limits.maxTotalLength < 2) throw bad('limits.maxTotalLength', o.limits.maxTotalLength, 'an integer ≥ 2');
  if (backend && o.limits.maxTotalLength > backend.maxLength)
    throw bad('limits.maxTotalLength', o.limits.maxTotalLength, `≤ the model's context (${backend.maxLength})`);
  if (o.maxBatch !== undefined && (!Number.isInteger(o.maxBatch) || o.maxBatch < 1)) throw bad('maxBatch', o.maxBatch, 'an integer ≥ 1');
  if (o.decodeSteps !== undefined && (!Number.isInteger(o.decodeSteps) || o.decodeSteps < 1)) throw bad('decodeSteps', o.decodeSteps, 'an integer ≥ 1');
}

/** Roll out n samples of every task with a model (KV-cache decoder). */
export async function rollout(backend: DecodeBackend, opts: RolloutOptions): Promise<RolloutResult> {
  validateRolloutOptions(opts, backend);
  validateSampling(opts.sampling);
  const start = performance.now();
  const maxBatch = Math.min(opts.maxBatch ?? backend.maxBatch, backend.maxBatch);
  const lengths = turnLengthsFor(backend);
  const sharePrefix = !!backend.fork && opts.sharePrefix !== false;
  const br = opts.branching;
  if (br) {
    validateBranching(br, opts.n);
    if (maxBatch < opts.n) throw new Error(`branching rollouts need a batch of at least rollout.n = ${opts.n} (the group's budget; got ${maxBatch})`);
  }
  const groups = opts.tasks.map((task, i) => ({ task, group: (opts.groupOffset ?? 0) + i }));
  const { signal, onTrajectory, onProgress } = opts;
  const rules = new TurnRules(opts.stop, opts.limits, opts.tokenizer, lengths);
  const scheduler = new Scheduler<Seq, Episodes>(
    backend,
    { maxBatch, stepCap: opts.decodeSteps ?? DECODE_STEPS, lengths, sharePrefix, yieldEachTick: false },
    (host) =>
      new Episodes(host, rules, { sampling: opts.sampling, total: opts.tasks.length * opts.n, start, signal, onTrajectory, onProgress }, (episodes) =>
        br
          ? new BranchingGroups(
              {
                branching: br,
                budget: opts.n,
                seed: opts.seed,
                vocabSize: backend.vocabSize,
                fork: sharePrefix ? (from, to, n) => backend.fork!(from, to, n) : null,
              },
              groups,
              episodes,
            )
          : new IndependentSamples(groups, opts.n, opts.seed, episodes),
      ),
  );
  await scheduler.run();
  const { results, plan } = scheduler.source;
  const trajectories = results.sort((a, b) => a.group - b.group || a.sample - b.sample);
  return {
    trajectories,
    stats: rolloutStats(scheduler.counters, trajectories.length, performance.now() - start, plan instanceof BranchingGroups ? plan : null),
  };
}

/** Sampling parameters the backend or sampleToken can honour (sampleToken checks them again on its path). */
function validateSampling(params: SamplingParams): void {
  const temperature = params.temperature ?? 1;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new Error(`sampling.temperature must be a finite number ≥ 0 (got ${temperature})`);
  const topP = params.topP ?? 1;
  if (!(topP > 0 && topP <= 1)) throw new Error(`sampling.topP must be in (0, 1] (got ${topP})`);
}

function rolloutStats(c: SchedulerCounters, trajectories: number, wallMs: number, branching: BranchingGroups | null): RolloutStats {
  return {
    trajectories,
    generatedTokens: c.generated,
    prefillTokens: c.prefill,
    modelCalls: c.calls,
    modelSteps: c.steps,
    discardedTokens: c.discarded,
    modelMs: c.modelMs,
    wallMs,
    tokensPerSecond: c.generated / Math.max(1e-9, wallMs / 1000),
    meanBatch: c.calls ? c.batchSum / c.calls : 0,
    sampleMs: c.sampleMs,
    envWaitMs: c.envWaitMs,
    ...(branching ? { branches: branching.branches, prefixTokensSaved: branching.prefixTokensSaved } : {}),
  };
}

type TextPolicyOptions = Omit<RolloutOptions, 'sampling' | 'maxBatch' | 'stop'> & { concurrency?: number; imitateMistakes?: boolean };
type TextPolicyJob = { task: RolloutTask; group: number; sample: number };

/**
 * Roll out a text policy (the scripted expert): its turns are tokenised once (they are
 * demonstrations, not samples), carry loss mask 1 and logprob/entropy 0 — except a turn the policy
 * marks as a deliberate mistake, which carries loss mask 0 unless `imitateMistakes`; everything else
 * (env steps, observations, limits) goes through the same rules as the model path. Up to
 * `concurrency` episodes (default 8) run at once.
 */
export async function rolloutTextPolicy(policy: TextPolicy, opts: TextPolicyOptions): Promise<RolloutResult> {
  validateRolloutOptions(opts);
  const start = performance.now();
  const jobs: TextPolicyJob[] = [];
  opts.tasks.forEach((task, gi) => {
    for (let s = 0; s < opts.n; s++) jobs.push({ task, group: (opts.groupOffset ?? 0) + gi, sample: s });
  });
  const out: Trajectory[] = [];
  let generated = 0;
  const concurrency = Math.max(1, opts.concurrency ?? 8);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const t = await textPolicyEpisode(policy, jobs[next++]!, opts, (n) => (generated += n));
      out.push(t);
      opts.onTrajectory?.(t);
      opts.onProgress?.({ done: out.length, total: jobs.length, generatedTokens: generated, elapsedMs: performance.now() - start });
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, jobs.length) }, worker));
  out.sort((a, b) => a.group - b.group || a.sample - b.sample);
  const wallMs = performance.now() - start;
  return {
    trajectories: out,
    stats: {
      trajectories: out.length,
      generatedTokens: generated,
      prefillTokens: 0,
      modelCalls: 0,
      modelSteps: 0,
      discardedTokens: 0,
      modelMs: 0,
      wallMs,
      tokensPerSecond: generated / Math.max(1e-9, wallMs / 1000),
      meanBatch: 0,
      sampleMs: 0,
      envWaitMs: 0,
    },
  };
}

/** One text-policy episode: each turn the policy writes, cut to the turn's room; `wrote` counts its tokens as they come. */
async function textPolicyEpisode(policy: TextPolicy, j: TextPolicyJob, opts: TextPolicyOptions, wrote: (tokens: number) => void): Promise<Trajectory> {
  const { tokenizer, limits } = opts;
  const t0 = performance.now();
  const seed = mixSeed(opts.seed, j.group, j.sample);
  const env = j.task.createEnv();
  const p = await env.prompt();
  const promptText = p.text ?? tokenizer.decode(p.ids);
  const turns: Turn[] = [];
  let length = p.ids.length;
  let truncated: boolean;
  let modelTurns = 0;
  for (;;) {
    if (opts.signal?.aborted) throw new Error('rollout aborted');
    const acted = await policy.act({ task: j.task, sample: j.sample, promptText, history: turns.map((u) => ({ role: u.role, text: u.text })), seed });
    const text = typeof acted === 'string' ? acted : acted.text;
    const learn = typeof acted === 'string' || !acted.mistake || !!opts.imitateMistakes;
    let ids = tokenizer.encode(text);
    let reason: NonNullable<Turn['stop']> = { reason: 'policy' };
    const room = Math.min(limits.maxNewTokens, limits.maxTotalLength - length);
    if (ids.length > room) {
      ids = ids.slice(0, room);
      reason = { reason: room === limits.maxNewTokens ? 'max_new_tokens' : 'max_total_length' };
    }
    const z = new Array<number>(ids.length).fill(0);
    const turn: Turn = {
      role: 'model',
      tokenIds: ids,
      text: tokenizer.decode(ids),
      logprobs: z,
      entropy: z.slice(),
      lossMask: z.map(() => (learn ? 1 : 0)),
      stop: reason,
    };
    turns.push(turn);
    wrote(ids.length);
    length += ids.length;
    modelTurns++;
    const r = await env.step({ text: turn.text, tokenIds: ids.slice(), stopReason: reason.reason });
    const next = afterEnvStep(turn, reason, r, { length, modelTurns }, limits, tokenizer);
    if (next.end) {
      truncated = next.truncated;
      break;
    }
    if (next.observation) {
      turns.push(next.observation);
      length += next.observation.tokenIds.length;
    }
  }
  const outcome = await env.outcome();
  const gen = turns.filter((u) => u.role === 'model').reduce((a, u) => a + u.tokenIds.length, 0);
  return {
    taskId: j.task.id,
    group: j.group,
    sample: j.sample,
    promptIds: p.ids.slice(),
    promptText,
    turns,
    outcome,
    truncated,
    seed,
    timings: { totalMs: performance.now() - t0, modelMs: 0, envMs: performance.now() - t0, prefillTokens: 0, generatedTokens: gen },
    ...(j.task.meta ? { meta: j.task.meta } : {}),
  };
}
