/**
 * The multi-turn rollout engine: a continuous-batching scheduler over a KV-cache decoder.
 *
 * Every sequence (task × sample) takes a slot. Each scheduler tick sends one `extend` call with
 * every slot that has tokens the cache has not seen yet: a new prompt, an observation after a
 * tool (prefixed by the last sampled token), or the one token sampled at the previous tick.
 * When a model turn ends (stop string, stop token, per-turn limit) the sequence leaves the
 * decode batch and its environment step (tool calls) runs asynchronously while the other
 * sequences keep decoding; when it returns, the observation is appended with loss mask 0 and
 * prefilled at the next tick, and the sequence rejoins. Finished sequences free their slot for
 * the next queued one.
 *
 * Reproducibility: each sequence samples from its own PRNG stream seeded by
 * (seed, group, sample), so batch composition and tool completion order do not change what a
 * sequence samples (up to floating-point differences of the model between batch shapes).
 */
import { Rng, mixSeed, type RngState } from '../base/rng';
import { sampleToken, type SampledToken, type SamplingParams } from './sampling';
import type { DecodeBackend, EnvStepResult, EpisodeEnv, RolloutTask, TextPolicy, TokenizerPort } from './ports';
import type { BranchPoint, OutcomeReward, Trajectory, Turn } from './types';
import { aepoGlobalSamples, decideBranches, validateBranching, windowEntropy, type BranchingOptions } from './branching';

export interface RolloutLimits {
  /** Max tokens the model generates in one turn. */
  maxNewTokens: number;
  /** Max model turns per episode. */
  maxTurns: number;
  /** Max tokens of prompt + all turns. */
  maxTotalLength: number;
}

export interface StopConfig {
  /** A model turn ends as soon as its decoded text contains one of these (e.g. '</search>', '</answer>'). */
  strings: string[];
  /** A model turn ends when one of these ids is sampled (EOS, <|im_end|>); the id is kept in the turn. */
  tokenIds: number[];
}

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

interface Seq {
  task: RolloutTask;
  group: number;
  sample: number;
  seed: number;
  rng: Rng;
  env: EpisodeEnv;
  slot: number;
  promptIds: number[];
  promptText: string;
  turns: Turn[];
  /** Tokens appended to the sequence but not yet in the slot's KV cache. */
  unfed: number[];
  /** Tokens in the sequence (prompt + turns). */
  length: number;
  cur: Turn | null;
  scanFrom: number;
  modelTurns: number;
  truncated: boolean;
  t0: number;
  modelMs: number;
  envMs: number;
  prefillTokens: number;
  generatedTokens: number;
  /** Branching rollouts only (undefined otherwise). */
  br?: SeqBranchState;
}

/** A sample's branching state (./branching.ts). */
interface SeqBranchState {
  g: GroupState;
  decisionRng: Rng;
  /** Normalised window entropy of the first model turn (undefined until measured). */
  h0?: number;
  /** After a tool response: measure the next turn's window; the branch point it would create. */
  measure: { turns: number; tokens: number; depth: number } | null;
  /** Measured, waiting for the group's decisions at this tool step. */
  pending: { turns: number; tokens: number; depth: number; entropy: number } | null;
  resume: (() => void) | null;
  /** Tool responses in the sequence (inherited by branches). */
  depth: number;
  /** AEPO: consecutive earlier high-entropy tool steps of the lineage. */
  consecutive: number;
  /** AEPO: the pre-monitoring sample (never branches). */
  monitor: boolean;
  toolEntropies: number[];
  point?: BranchPoint;
  /** Prefix tokens taken from the parent's forked cache. */
  forked?: number;
}

interface GroupState {
  task: RolloutTask;
  group: number;
  /** Sequences created so far (next sample index). */
  started: number;
  finished: number;
  live: Set<Seq>;
  /** Slots reserved for the group (M of them, so its branches never wait for a slot). */
  slots: number[];
  /** Branches the budget still allows. */
  branchLeft: number;
  phase: 'monitor' | 'run' | 'fill';
  parked: Seq[];
  /** AEPO: the monitor sample's first-turn window entropy. */
  hRoot?: number;
}

function cloneTurn(u: Turn): Turn {
  return {
    ...u,
    tokenIds: u.tokenIds.slice(),
    logprobs: u.logprobs.slice(),
    entropy: u.entropy.slice(),
    lossMask: u.lossMask.slice(),
    ...(u.toolCalls ? { toolCalls: u.toolCalls.map((c) => ({ ...c })) } : {}),
    ...(u.stop ? { stop: { ...u.stop } } : {}),
  };
}

function newModelTurn(): Turn {
  return { role: 'model', tokenIds: [], text: '', logprobs: [], entropy: [], lossMask: [] };
}

function obsTurn(ids: number[], text: string, role: 'tool' | 'env'): Turn {
  const z = new Array<number>(ids.length).fill(0);
  return { role, tokenIds: ids, text, logprobs: z, entropy: z.slice(), lossMask: z.slice() };
}

/**
 * Default most decode steps per backend call. With the KV cache in the decode session's worker a
 * call is one message there and back; K steps per message pay those hops once per K tokens, but
 * the steps a row runs after its turn ended (a stop token or stop string) are wasted. A call's K
 * (see chooseSteps) is at most this, at most the tokens any of its sequences may still generate
 * in its turn (max_new_tokens, max_total_length; for a branching sample, the end of its entropy
 * window), and, within that, the K that maximises the expected accepted tokens per unit of cost
 * (K steps + HOP_STEPS) given how long the backend's turns have been (TurnLengths). Measured in
 * docs/BENCHMARKS.md (bench:rollout, third pass).
 */
export const DECODE_STEPS = 8;
/** The cost of a call's two message hops, in decode steps (chooseSteps' cost model: K + HOP_STEPS per call). */
export const HOP_STEPS = 1;

/**
 * How model turns ended, by length, over this backend's recent rollouts: the hazard h(m) that a
 * turn which generated m tokens ended there by a stop token or stop string (turns cut by a limit
 * count as reaching m only). Halved at each rollout's start, so recent rollouts (the current
 * policy) dominate. Only the choice of K depends on it, never a token.
 */
export class TurnLengths {
  private ended: number[] = [];
  private reached: number[] = [];
  /** A turn of `length` tokens ended (by a stop when `stopped`). */
  record(length: number, stopped: boolean): void {
    for (let m = 1; m <= length; m++) this.reached[m] = (this.reached[m] ?? 0) + 1;
    if (stopped && length > 0) this.ended[length] = (this.ended[length] ?? 0) + 1;
  }
  decay(f = 0.5): void {
    this.ended = this.ended.map((x) => x * f);
    this.reached = this.reached.map((x) => x * f);
  }
  hazard(m: number): number {
    const r = this.reached[m] ?? 0;
    return r > 0 ? (this.ended[m] ?? 0) / r : 0;
  }
}
const turnLengths = new WeakMap<DecodeBackend, TurnLengths>();

/**
 * Steps for one call: rows[i] = tokens already in row i's turn; every row may generate at least
 * `maxK` more. The k-th token of this call is kept if the turn did not end at any earlier one
 * (probability Π (1 − h(m)) over those positions); returns the K ≤ maxK maximising the expected
 * kept tokens per (K + HOP_STEPS), the largest on ties.
 */
export function chooseSteps(rows: number[], maxK: number, stats: TurnLengths): number {
  if (maxK <= 1) return 1;
  const alive = rows.map(() => 1);
  let kept = 0;
  let best = 1;
  let bestRate = -1;
  for (let k = 1; k <= maxK; k++) {
    rows.forEach((n, i) => {
      if (k > 1) alive[i]! *= 1 - stats.hazard(n + k - 1);
      kept += alive[i]!;
    });
    const rate = kept / (k + HOP_STEPS);
    if (rate >= bestRate * (1 + 1e-9)) {
      best = k;
      bestRate = rate;
    }
  }
  return best;
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
  const { tokenizer, limits, stop } = opts;
  const start = performance.now();
  const maxBatch = Math.min(opts.maxBatch ?? backend.maxBatch, backend.maxBatch);
  const stopTokens = new Set(stop.tokenIds);
  const maxStopLen = stop.strings.reduce((m, s) => Math.max(m, s.length), 0);
  const groupOffset = opts.groupOffset ?? 0;
  // Sampling in the backend (DecodeBackend.extendSample) covers greedy and the full distribution;
  // top-k / top-p rows are sampled here from logits.
  const temperature = opts.sampling.temperature ?? 1;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new Error(`sampling.temperature must be a finite number ≥ 0 (got ${temperature})`);
  const topP = opts.sampling.topP ?? 1;
  if (!(topP > 0 && topP <= 1)) throw new Error(`sampling.topP must be in (0, 1] (got ${topP})`);
  const greedy = temperature === 0;
  const fullDistribution = !(opts.sampling.topK && opts.sampling.topK > 0 && opts.sampling.topK < backend.vocabSize) && topP >= 1;
  const fastSample = backend.extendSample && (greedy || fullDistribution) ? backend.extendSample.bind(backend) : null;
  // Several decode steps per call: the backend samples and can cut a slot's cache back.
  const stepCap = opts.decodeSteps ?? DECODE_STEPS;
  const multiSample = fastSample && backend.extendSampleSteps && backend.truncate && stepCap > 1 ? backend.extendSampleSteps.bind(backend) : null;
  // How this backend's turns ended in earlier rollouts (the trainer reuses one backend across steps).
  const lengths = turnLengths.get(backend) ?? new TurnLengths();
  if (turnLengths.has(backend)) lengths.decay();
  else turnLengths.set(backend, lengths);
  const shareFork = !!backend.fork && opts.sharePrefix !== false;
  const br = opts.branching;
  if (br) {
    validateBranching(br, opts.n);
    if (maxBatch < opts.n) throw new Error(`branching rollouts need a batch of at least rollout.n = ${opts.n} (the group's budget; got ${maxBatch})`);
  }

  const newSeq = (task: RolloutTask, group: number, sample: number): Seq => {
    const seed = mixSeed(opts.seed, group, sample);
    return {
      task,
      group,
      sample,
      seed,
      rng: new Rng(seed),
      env: task.createEnv(),
      slot: -1,
      promptIds: [],
      promptText: '',
      turns: [],
      unfed: [],
      length: 0,
      cur: null,
      scanFrom: 0,
      modelTurns: 0,
      truncated: false,
      t0: 0,
      modelMs: 0,
      envMs: 0,
      prefillTokens: 0,
      generatedTokens: 0,
    };
  };
  const queue: Seq[] = [];
  // Branching: groups are admitted whole (M slots reserved), their samples started by maintain().
  const groupQueue: GroupState[] = [];
  opts.tasks.forEach((task, gi) => {
    const group = groupOffset + gi;
    if (br) groupQueue.push({ task, group, started: 0, finished: 0, live: new Set(), slots: [], branchLeft: 0, phase: 'run', parked: [] });
    else for (let s = 0; s < opts.n; s++) queue.push(newSeq(task, group, s));
  });
  const total = opts.tasks.length * opts.n;
  const dirty = new Set<GroupState>();
  let branches = 0;
  let prefixSaved = 0;
  const results: Trajectory[] = [];
  const freeSlots = Array.from({ length: maxBatch }, (_, i) => maxBatch - 1 - i);
  const ready: Seq[] = []; // sequences with unfed tokens, waiting for the next tick
  const pending = new Set<Promise<void>>(); // env work in flight
  let failure: unknown = null;
  let generated = 0;
  let prefill = 0;
  let calls = 0;
  let steps = 0;
  let discarded = 0;
  let batchSum = 0;
  let modelMs = 0;
  let sampleMs = 0;
  let envWaitMs = 0;

  const progress = () => opts.onProgress?.({ done: results.length, total, generatedTokens: generated, elapsedMs: performance.now() - start });

  const track = (p: Promise<void>) => {
    const q = p
      .catch((e) => {
        failure ??= e;
      })
      .finally(() => pending.delete(q));
    pending.add(q);
  };

  const finish = async (s: Seq) => {
    backend.release(s.slot);
    if (s.br) {
      const g = s.br.g;
      g.slots.push(s.slot);
      g.live.delete(s);
      g.finished++;
      dirty.add(g);
    } else freeSlots.push(s.slot);
    s.slot = -1;
    const t = performance.now();
    let outcome: OutcomeReward;
    try {
      outcome = await s.env.outcome();
    } catch (e) {
      throw new Error(`environment outcome() failed for task ${s.task.id}: ${e instanceof Error ? e.message : String(e)}`);
    }
    s.envMs += performance.now() - t;
    const traj: Trajectory = {
      taskId: s.task.id,
      group: s.group,
      sample: s.sample,
      promptIds: s.promptIds,
      promptText: s.promptText,
      turns: s.turns,
      outcome,
      truncated: s.truncated,
      seed: s.seed,
      timings: {
        totalMs: performance.now() - s.t0,
        modelMs: s.modelMs,
        envMs: s.envMs,
        prefillTokens: s.prefillTokens,
        generatedTokens: s.generatedTokens,
        ...(s.br?.forked ? { forkedTokens: s.br.forked } : {}),
      },
      ...(s.task.meta ? { meta: s.task.meta } : {}),
      ...(s.br?.point ? { branch: s.br.point } : {}),
    };
    results.push(traj);
    opts.onTrajectory?.(traj);
    progress();
  };

  const admit = async (s: Seq) => {
    s.t0 = performance.now();
    const p = await s.env.prompt();
    s.envMs += performance.now() - s.t0;
    if (p.ids.length === 0) throw new Error(`task ${s.task.id}: the environment gave an empty prompt`);
    if (p.ids.length >= limits.maxTotalLength)
      throw new Error(`task ${s.task.id}: prompt has ${p.ids.length} tokens, not below limits.maxTotalLength (${limits.maxTotalLength})`);
    s.promptIds = p.ids.slice();
    s.promptText = p.text ?? tokenizer.decode(p.ids);
    s.unfed = s.promptIds.slice();
    s.length = s.promptIds.length;
    s.cur = newModelTurn();
    s.scanFrom = 0;
    ready.push(s);
  };

  /** The model's turn ended: run the environment, then either finish or queue the observation. */
  const endTurn = async (s: Seq, reason: NonNullable<Turn['stop']>) => {
    const turn = s.cur!;
    s.cur = null;
    lengths.record(turn.tokenIds.length, reason.reason === 'stop_token' || reason.reason === 'stop_string');
    turn.stop = reason;
    s.turns.push(turn);
    s.modelTurns++;
    const t = performance.now();
    let r: EnvStepResult;
    try {
      r = await s.env.step({ text: turn.text, tokenIds: turn.tokenIds.slice(), stopReason: reason.reason });
    } catch (e) {
      throw new Error(`environment step() failed for task ${s.task.id}, turn ${s.modelTurns}: ${e instanceof Error ? e.message : String(e)}`);
    }
    s.envMs += performance.now() - t;
    if (r.toolCalls?.length) turn.toolCalls = r.toolCalls;
    if (r.stepReward !== undefined) turn.stepReward = r.stepReward;
    // A turn cut by the total length truncates the episode even if the env ends it here.
    if (reason.reason === 'max_total_length') s.truncated = true;
    if (r.done) return finish(s);
    if (reason.reason === 'max_total_length' || s.modelTurns >= limits.maxTurns) {
      s.truncated = true;
      return finish(s);
    }
    let ids: number[] = [];
    let text = '';
    if (r.observation) {
      ids = r.observation.ids ? r.observation.ids.slice() : tokenizer.encode(r.observation.text ?? '');
      text = r.observation.text ?? tokenizer.decode(ids);
    }
    // The observation must leave room for at least one generated token.
    if (s.length + ids.length >= limits.maxTotalLength) {
      s.truncated = true;
      return finish(s);
    }
    if (ids.length) s.turns.push(obsTurn(ids, text, r.observation?.role ?? 'tool'));
    s.unfed.push(...ids);
    s.length += ids.length;
    if (s.br && ids.length) {
      // A tool response: the next turn's first k tokens are measured; a branch would start here.
      s.br.depth++;
      s.br.measure = { turns: s.turns.length, tokens: s.length, depth: s.br.depth };
    }
    s.cur = newModelTurn();
    s.scanFrom = 0;
    ready.push(s);
  };

  /** Append a sampled token to the current model turn; returns why the turn ended, if it did. */
  const accept = (s: Seq, tok: SampledToken): NonNullable<Turn['stop']> | null => {
    const turn = s.cur!;
    turn.tokenIds.push(tok.id);
    turn.logprobs.push(tok.logprob);
    turn.entropy.push(tok.entropy);
    turn.lossMask.push(1);
    s.length++;
    s.generatedTokens++;
    generated++;
    s.unfed = [tok.id];
    if (stopTokens.has(tok.id)) {
      turn.text = tokenizer.decode(turn.tokenIds);
      return { reason: 'stop_token', value: tok.id };
    }
    if (maxStopLen > 0) {
      turn.text = tokenizer.decode(turn.tokenIds);
      const from = Math.max(0, s.scanFrom - maxStopLen);
      for (const str of stop.strings) if (turn.text.indexOf(str, from) >= 0) return { reason: 'stop_string', value: str };
      s.scanFrom = turn.text.length;
    }
    const limit: NonNullable<Turn['stop']> | null =
      s.length >= limits.maxTotalLength ? { reason: 'max_total_length' } : turn.tokenIds.length >= limits.maxNewTokens ? { reason: 'max_new_tokens' } : null;
    if (limit && maxStopLen === 0) turn.text = tokenizer.decode(turn.tokenIds);
    return limit;
  };

  /** Start a fresh sample of a branching group (a root: its own prompt, no shared prefix). */
  const startRoot = (g: GroupState, monitor: boolean): Promise<void> => {
    const s = newSeq(g.task, g.group, g.started++);
    s.br = newBranchState(g, s, monitor);
    s.slot = g.slots.pop()!;
    g.live.add(s);
    return admit(s);
  };
  const newBranchState = (g: GroupState, s: Seq, monitor: boolean): SeqBranchState => ({
    g,
    decisionRng: new Rng(mixSeed(s.seed, 0x62726e63)),
    measure: null,
    pending: null,
    resume: null,
    depth: 0,
    consecutive: 0,
    monitor,
    toolEntropies: [],
  });

  /** A branch of `p` from its pending branch point: the parent's prefix, its cache forked up to the prefix's last token. */
  const startBranch = (g: GroupState, p: Seq, probability: number, consecutive: number): void => {
    const pb = p.br!;
    const at = pb.pending!;
    const c = newSeq(g.task, g.group, g.started++);
    c.br = { ...newBranchState(g, c, false), h0: pb.h0, depth: at.depth, consecutive };
    c.br.point = { parent: p.sample, turn: at.turns, tokens: at.tokens, entropy: at.entropy, deltaH: at.entropy - (pb.h0 ?? 0), probability };
    c.slot = g.slots.pop()!;
    g.live.add(c);
    c.promptIds = p.promptIds;
    c.promptText = p.promptText;
    c.turns = p.turns.slice(0, at.turns).map(cloneTurn);
    c.modelTurns = c.turns.filter((u) => u.role === 'model').length;
    c.length = at.tokens;
    const prefix = [...p.promptIds, ...c.turns.flatMap((u) => u.tokenIds)];
    if (prefix.length !== at.tokens) throw new Error(`branch of task ${g.task.id}: prefix has ${prefix.length} tokens, expected ${at.tokens}`);
    if (shareFork) {
      // The branch feeds the prefix's last token itself and samples its first token from its own stream.
      backend.fork!(p.slot, c.slot, at.tokens - 1);
      c.unfed = [prefix[at.tokens - 1]!];
      c.br.forked = at.tokens - 1;
      prefixSaved += at.tokens - 1;
    } else c.unfed = prefix;
    c.cur = newModelTurn();
    c.scanFrom = 0;
    branches++;
    c.t0 = performance.now();
    // The branch's environment replays the shared turns (tool calls run again, observations are
    // the parent's recorded tokens), so its state (calls made, episode context) matches.
    track(
      (async () => {
        await c.env.prompt();
        for (const u of c.turns)
          if (u.role === 'model') {
            const r = await c.env.step({ text: u.text, tokenIds: u.tokenIds.slice(), stopReason: u.stop?.reason ?? 'policy' });
            if (r.done) throw new Error(`branch of task ${g.task.id}: the environment ended the episode while replaying the parent's turns`);
          }
        c.envMs += performance.now() - c.t0;
        ready.push(c);
      })(),
    );
  };

  /** Group bookkeeping, run between ticks: AEPO's split, decisions at a tool step, fill, slots back. */
  const maintain = (g: GroupState, starting: Promise<void>[]) => {
    // AEPO: the pre-monitoring sample ended before any tool response: H_tool = H_root.
    if (g.phase === 'monitor' && g.finished === 1) split(g, g.hRoot ?? 0, g.hRoot ?? 0, starting);
    if (g.phase === 'run' && g.parked.length && [...g.live].every((s) => s.br!.pending)) {
      // Every live sample measured this tool step: decide in sample order.
      const parents = g.parked.splice(0).sort((a, b) => a.sample - b.sample);
      const dec = decideBranches(
        br!,
        parents.map((p) => ({ deltaH: p.br!.pending!.entropy - (p.br!.h0 ?? 0), consecutive: p.br!.consecutive, rng: p.br!.decisionRng })),
        g.branchLeft,
      );
      parents.forEach((p, i) => {
        const d = dec[i]!;
        for (let j = 0; j < d.children; j++) startBranch(g, p, d.probability, d.consecutive);
        g.branchLeft -= d.children;
        p.br!.consecutive = d.consecutive;
      });
      for (const p of parents) {
        p.br!.pending = null;
        const r = p.br!.resume!;
        p.br!.resume = null;
        r();
      }
    }
    if (g.phase === 'run' && g.live.size === 0 && g.started < opts.n) {
      // Nothing left to branch from: fill the budget with fresh samples.
      g.phase = 'fill';
      g.branchLeft = 0;
      while (g.started < opts.n) starting.push(startRoot(g, false));
    }
    if (g.finished === opts.n) freeSlots.push(...g.slots.splice(0));
  };
  /** AEPO's budget split from pre-monitoring: m global samples (the monitor included), M − m branches. */
  const split = (g: GroupState, hRoot: number, hTool: number, starting: Promise<void>[]) => {
    const m = aepoGlobalSamples(opts.n, br!.budgetBeta, hRoot, hTool);
    g.phase = 'run';
    g.branchLeft = opts.n - m;
    for (let i = 1; i < m; i++) starting.push(startRoot(g, false));
  };

  /**
   * Branching: a sampled token may complete a measurement window (k tokens, or the turn's end).
   * Returns true when the sequence parked to wait for its group's decisions (it then resumes
   * with `then`).
   */
  const measure = (s: Seq, ended: boolean, then: () => void): boolean => {
    const b = s.br!;
    const turn = s.cur!;
    if (!(ended || turn.tokenIds.length === br!.entropyWindow)) return false;
    if (b.h0 === undefined && s.modelTurns === 0) {
      b.h0 = windowEntropy(turn.entropy, br!.entropyWindow, backend.vocabSize);
      if (b.monitor) b.g.hRoot = b.h0;
      return false;
    }
    const at = b.measure;
    if (!at) return false;
    b.measure = null;
    const entropy = windowEntropy(turn.entropy, br!.entropyWindow, backend.vocabSize);
    if (b.monitor) {
      // AEPO: the monitor's first post-tool window completes pre-monitoring; it then takes part
      // in this tool step's decisions like any sample.
      b.monitor = false;
      const starting: Promise<void>[] = [];
      split(b.g, b.h0 ?? 0, entropy, starting);
      for (const p of starting) track(p);
    }
    if (b.g.phase !== 'run' || b.g.branchLeft <= 0) return false;
    b.pending = { ...at, entropy };
    b.resume = then;
    b.g.parked.push(s);
    dirty.add(b.g);
    return true;
  };

  try {
    while (results.length < total) {
      if (opts.signal?.aborted) throw new Error('rollout aborted');
      if (failure) throw failure;
      // Admit queued sequences into free slots.
      const admitting: Promise<void>[] = [];
      if (br) {
        const gs = [...dirty];
        dirty.clear();
        for (const g of gs) maintain(g, admitting);
        while (groupQueue.length && freeSlots.length >= opts.n) {
          const g = groupQueue.shift()!;
          g.slots = freeSlots.splice(freeSlots.length - opts.n, opts.n);
          g.phase = br.mode === 'aepo' ? 'monitor' : 'run';
          const first = br.mode === 'aepo' ? 1 : br.initialSamples;
          if (br.mode === 'arpo') g.branchLeft = opts.n - first;
          for (let i = 0; i < first; i++) admitting.push(startRoot(g, br.mode === 'aepo'));
        }
      }
      while (freeSlots.length && queue.length) {
        const s = queue.shift()!;
        s.slot = freeSlots.pop()!;
        admitting.push(admit(s));
      }
      if (admitting.length) await Promise.all(admitting);
      if (ready.length === 0) {
        if (pending.size === 0) {
          if (failure) throw failure;
          if (dirty.size) continue;
          if (results.length < total && queue.length === 0 && groupQueue.length === 0)
            throw new Error('rollout scheduler stalled (no work and nothing pending)');
          continue;
        }
        const tw = performance.now();
        await Promise.race(pending);
        envWaitMs += performance.now() - tw;
        continue;
      }
      // One model call for every sequence with unfed tokens.
      const ticked = ready.splice(0, ready.length).sort((a, b) => a.slot - b.slot);
      // Prefix sharing: sequences whose cache is empty and whose prompts are identical (a GRPO
      // group) prefill it once: the first one feeds all but the prompt's last token, its cache
      // is forked to the others, and all of them feed that last token at the next tick (where
      // each samples from its own stream).
      const followers = new Map<Seq, Seq[]>();
      if (shareFork) {
        const byPrompt = new Map<string, Seq>();
        for (const s of ticked) {
          if (s.unfed.length < 2 || s.unfed.length !== s.length) continue;
          const key = s.unfed.join(',');
          const lead = byPrompt.get(key);
          if (lead) followers.get(lead)!.push(s);
          else {
            byPrompt.set(key, s);
            followers.set(s, []);
          }
        }
        for (const [lead, fs] of followers) if (fs.length === 0) followers.delete(lead);
      }
      const isFollower = new Set([...followers.values()].flat());
      const batch = ticked.filter((s) => !isFollower.has(s));
      const items = batch.map((s) => ({ slot: s.slot, tokens: followers.has(s) ? s.unfed.slice(0, -1) : s.unfed }));
      batch.forEach((s, i) => {
        const n = items[i]!.tokens.length;
        if (n > 1 || s.cur!.tokenIds.length === 0) {
          s.prefillTokens += n;
          prefill += n;
        }
      });
      // Decode steps in this call: K > 1 only when every row samples (no shared prefix's lead row),
      // at most the tokens any row may still generate in its turn (and, for a branching sample
      // about to measure its entropy window, the window's end).
      let K = 1;
      if (multiSample && followers.size === 0) {
        K = stepCap;
        for (const s of batch) {
          const n = s.cur!.tokenIds.length;
          K = Math.min(K, limits.maxNewTokens - n, limits.maxTotalLength - s.length);
          if (s.br && (s.br.measure || s.br.h0 === undefined) && n < br!.entropyWindow) K = Math.min(K, br!.entropyWindow - n);
        }
        K = chooseSteps(
          batch.map((s) => s.cur!.tokenIds.length),
          Math.max(1, K),
          lengths,
        );
      }
      const t = performance.now();
      let sampled: SampledToken[][] | null = null;
      let logits: Float32Array[] = [];
      // Each sampling row's stream before this call's draws (to rewind when a turn ends early).
      const before: (RngState | null)[] = [];
      if (fastSample) {
        // The backend samples: one uniform per sampled row and step from the sequence's own
        // stream, as sampleToken would draw it (none when greedy, none for a shared prefix's row).
        const B = batch.length;
        const req = {
          u: new Float32Array(K * B),
          invTemp: new Float32Array(B).fill(greedy ? 1 : 1 / temperature),
          greedy: new Float32Array(B).fill(greedy ? 1 : 0),
        };
        if (!greedy)
          batch.forEach((s, i) => {
            if (followers.has(s)) return;
            before[i] = K > 1 ? s.rng.state() : null;
            for (let k = 0; k < K; k++) req.u[k * B + i] = s.rng.next();
          });
        sampled = K > 1 ? await multiSample!(items, req, K) : (await fastSample(items, req)).map((x) => [x]);
      } else logits = await backend.extend(items);
      const dt = performance.now() - t;
      modelMs += dt;
      calls++;
      steps += K;
      batchSum += batch.length;
      const rowsBack = sampled ? sampled.length : logits.length;
      if (rowsBack !== batch.length)
        throw new Error(`decode backend returned ${rowsBack} ${sampled ? 'samples' : 'logits rows'} for ${batch.length} sequences`);
      const ts = performance.now();
      batch.forEach((s, i) => {
        s.modelMs += dt / batch.length;
        const group = followers.get(s);
        if (group) {
          const last = s.unfed[s.unfed.length - 1]!;
          s.unfed = [last];
          ready.push(s);
          for (const f of group) {
            backend.fork!(s.slot, f.slot);
            f.unfed = [last];
            ready.push(f);
          }
          return;
        }
        if (!sampled) {
          const row = logits[i]!;
          if (row.length !== backend.vocabSize) throw new Error(`decode backend returned a logits row of ${row.length} for vocab ${backend.vocabSize}`);
          const ended = accept(s, sampleToken(row, opts.sampling, s.rng));
          const go = ended ? () => track(endTurn(s, ended)) : () => ready.push(s);
          if (s.br && measure(s, !!ended, go)) return;
          go();
          return;
        }
        // The row's tokens in order, through the same accept() as one step per call; the turn
        // may end (or the sample park for its group's branch decisions) before the last.
        const toks = sampled[i]!;
        if (toks.length !== K) throw new Error(`decode backend returned ${toks.length} steps for ${K}`);
        let used = 0;
        let parked = false;
        let go: () => void = () => ready.push(s);
        while (used < K) {
          const tok = toks[used++]!;
          if (!Number.isFinite(tok.logprob)) throw new Error('sampleToken: logits contain NaN or are all -Infinity');
          const ended = accept(s, tok);
          if (ended) go = () => track(endTurn(s, ended));
          if (s.br && measure(s, !!ended, go)) {
            parked = true;
            break;
          }
          if (ended) break;
        }
        if (used < K) {
          // Discard the rest: the stream as if only `used` uniforms were drawn, the cache up to
          // the last accepted token (which is unfed, as after a one-step call).
          discarded += K - used;
          const st = before[i];
          if (st) {
            s.rng.restore(st);
            for (let k = 0; k < used; k++) s.rng.next();
          }
          backend.truncate!(s.slot, s.length - s.unfed.length);
        }
        if (!parked) go();
      });
      sampleMs += performance.now() - ts;
      // Let environment work that already completed run before the next tick.
      if (pending.size) await new Promise<void>((r) => setImmediate(r));
    }
    if (failure) throw failure;
  } finally {
    if (pending.size) await Promise.allSettled([...pending]);
  }
  const wallMs = performance.now() - start;
  results.sort((a, b) => a.group - b.group || a.sample - b.sample);
  return {
    trajectories: results,
    stats: {
      trajectories: results.length,
      generatedTokens: generated,
      prefillTokens: prefill,
      modelCalls: calls,
      modelSteps: steps,
      discardedTokens: discarded,
      modelMs,
      wallMs,
      tokensPerSecond: generated / Math.max(1e-9, wallMs / 1000),
      meanBatch: calls ? batchSum / calls : 0,
      sampleMs,
      envWaitMs,
      ...(br ? { branches, prefixTokensSaved: prefixSaved } : {}),
    },
  };
}

/**
 * Roll out a text policy (the scripted expert): its turns are tokenised once (they are
 * demonstrations, not samples), carry loss mask 1 and logprob/entropy 0 — except a turn the policy
 * marks as a deliberate mistake, which carries loss mask 0 unless `imitateMistakes`; everything else
 * (env steps, observations, limits) goes through the same rules as the model path.
 */
export async function rolloutTextPolicy(
  policy: TextPolicy,
  opts: Omit<RolloutOptions, 'sampling' | 'maxBatch' | 'stop'> & { concurrency?: number; imitateMistakes?: boolean },
): Promise<RolloutResult> {
  validateRolloutOptions(opts);
  const { tokenizer, limits } = opts;
  const start = performance.now();
  const jobs: { task: RolloutTask; group: number; sample: number }[] = [];
  opts.tasks.forEach((task, gi) => {
    for (let s = 0; s < opts.n; s++) jobs.push({ task, group: (opts.groupOffset ?? 0) + gi, sample: s });
  });
  const out: Trajectory[] = [];
  let generated = 0;
  const one = async (j: (typeof jobs)[number]): Promise<Trajectory> => {
    const t0 = performance.now();
    const seed = mixSeed(opts.seed, j.group, j.sample);
    const env = j.task.createEnv();
    const p = await env.prompt();
    const promptText = p.text ?? tokenizer.decode(p.ids);
    const turns: Turn[] = [];
    let length = p.ids.length;
    let truncated = false;
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
      generated += ids.length;
      length += ids.length;
      modelTurns++;
      const r = await env.step({ text: turn.text, tokenIds: ids.slice(), stopReason: reason.reason });
      if (r.toolCalls?.length) turn.toolCalls = r.toolCalls;
      if (r.stepReward !== undefined) turn.stepReward = r.stepReward;
      if (reason.reason === 'max_total_length') truncated = true;
      if (r.done) break;
      if (reason.reason === 'max_total_length' || modelTurns >= limits.maxTurns) {
        truncated = true;
        break;
      }
      const oids = r.observation ? (r.observation.ids ?? tokenizer.encode(r.observation.text ?? '')) : [];
      if (length + oids.length >= limits.maxTotalLength) {
        truncated = true;
        break;
      }
      if (oids.length) turns.push(obsTurn(oids.slice(), r.observation!.text ?? tokenizer.decode(oids), r.observation!.role ?? 'tool'));
      length += oids.length;
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
  };
  const concurrency = Math.max(1, opts.concurrency ?? 8);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const t = await one(jobs[next++]!);
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
