/**
 * The continuous-batching scheduler of a rollout: which sequences decode at each tick, over a
 * KV-cache decoder with one slot per sequence.
 *
 * Each tick sends one backend call with every slot that has tokens the cache has not seen yet:
 * a new prompt, an observation after a tool (prefixed by the last sampled token), or the token(s)
 * sampled at the previous tick. When a model turn ends (./sequence.ts decides where) the
 * sequence leaves the decode batch and its environment step (tool calls) runs in the background
 * while the others keep decoding; when it returns, the observation is prefilled at the next tick
 * and the sequence rejoins. A finished sequence frees its slot. Who gets a free slot, and what
 * happens around a sequence's tokens, is up to its SequenceSource: independent samples (here) or
 * branching groups (./branch-groups.ts).
 */
import type { RngState } from '../base/rng';
import { chooseSteps, type TurnLengths } from './decode-steps';
import type { DecodeBackend, EnvStepResult, RolloutTask, SampleRequest } from './ports';
import { sampleToken, type SampledToken, type SamplingParams } from './sampling';
import { newSeq, trajectoryOf, type Seq, type TurnEnd, type TurnRules } from './sequence';
import type { BranchPoint, OutcomeReward, Trajectory } from './types';

/** How tokens are drawn: by the backend (greedy or the full distribution), or here from logits (top-k / top-p). */
export interface DecodeMode {
  params: SamplingParams;
  temperature: number;
  greedy: boolean;
  /** The backend samples one step per call (null: extend, then sampleToken here). */
  sample: NonNullable<DecodeBackend['extendSample']> | null;
  /** The backend samples several steps per call and can cut a slot's cache back (null: one step per call). */
  sampleSteps: NonNullable<DecodeBackend['extendSampleSteps']> | null;
  /** Most decode steps per call. */
  stepCap: number;
}

/** The decode mode for these sampling parameters on this backend (checks temperature and top-p). */
export function decodeMode(backend: DecodeBackend, params: SamplingParams, stepCap: number): DecodeMode {
  const temperature = params.temperature ?? 1;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new Error(`sampling.temperature must be a finite number ≥ 0 (got ${temperature})`);
  const topP = params.topP ?? 1;
  if (!(topP > 0 && topP <= 1)) throw new Error(`sampling.topP must be in (0, 1] (got ${topP})`);
  const greedy = temperature === 0;
  const fullDistribution = !(params.topK && params.topK > 0 && params.topK < backend.vocabSize) && topP >= 1;
  const sample = backend.extendSample && (greedy || fullDistribution) ? backend.extendSample.bind(backend) : null;
  const sampleSteps = sample && backend.extendSampleSteps && backend.truncate && stepCap > 1 ? backend.extendSampleSteps.bind(backend) : null;
  return { params, temperature, greedy, sample, sampleSteps, stepCap };
}

/** What a SequenceSource may ask of the scheduler. */
export interface SchedulerHost {
  /** Prompt a sequence that holds a slot; it decodes from the next tick. */
  admit(s: Seq): Promise<void>;
  /** Environment work in the background (its failure ends the rollout). */
  track(p: Promise<void>): void;
  /** The sequence has unfed tokens for the next tick. */
  ready(s: Seq): void;
}

/** Who gets the free slots, and the hooks the scheduler calls around a sequence's tokens. */
export interface SequenceSource {
  /** Between ticks: start sequences in free slots (taking them from `free`); their admissions go to `starting`. */
  admit(free: number[], starting: Promise<void>[]): void;
  /** A finished sequence's slot (its cache already released). */
  release(s: Seq, free: number[]): void;
  /** Sequences (or groups) still waiting for slots. */
  hasQueued(): boolean;
  /** Bookkeeping due at the next admission. */
  hasBookkeeping(): boolean;
  /** Most tokens the sequence may generate before the source must see them (Infinity: no limit). */
  stepLimit(s: Seq): number;
  /** A token was accepted (`ended`: its turn ended): true when the sequence is parked, to go on with `resume` later. */
  parkAfterToken(s: Seq, ended: boolean, resume: () => void): boolean;
  /** The environment's observation of `tokens` tokens (0: none) was appended and the next turn opened. */
  observed(s: Seq, tokens: number): void;
  /** Where a finished sequence branched from (trajectory fields). */
  lineage(s: Seq): { forked?: number; point?: BranchPoint } | undefined;
}

/** Every task's n samples, queued at the start (their environments created in (group, sample) order), each admitted on its own. */
export class IndependentSamples implements SequenceSource {
  private readonly queue: Seq[] = [];
  constructor(
    groups: { task: RolloutTask; group: number }[],
    n: number,
    seed: number,
    private readonly host: SchedulerHost,
  ) {
    for (const { task, group } of groups) for (let s = 0; s < n; s++) this.queue.push(newSeq(task, group, s, seed));
  }
  admit(free: number[], starting: Promise<void>[]): void {
    while (free.length && this.queue.length) {
      const s = this.queue.shift()!;
      s.slot = free.pop()!;
      starting.push(this.host.admit(s));
    }
  }
  release(s: Seq, free: number[]): void {
    free.push(s.slot);
  }
  hasQueued(): boolean {
    return this.queue.length > 0;
  }
  hasBookkeeping(): boolean {
    return false;
  }
  stepLimit(): number {
    return Infinity;
  }
  parkAfterToken(): boolean {
    return false;
  }
  observed(): void {}
  lineage(): undefined {
    return undefined;
  }
}

export interface SchedulerOptions {
  /** Slots (sequences decoded together). */
  maxBatch: number;
  mode: DecodeMode;
  /** Prefill identical prompts starting together once and fork the cache (the backend can fork). */
  sharePrefix: boolean;
  /** This backend's turn lengths (the choice of steps per call). */
  lengths: TurnLengths;
  /** Trajectories the rollout ends with. */
  total: number;
  /** The rollout's start (performance.now()), for progress. */
  start: number;
  signal?: AbortSignal;
  onTrajectory?(t: Trajectory): void;
  onProgress?(p: { done: number; total: number; generatedTokens: number; elapsedMs: number }): void;
}

/** What the scheduler counted (RolloutStats without the derived figures). */
export interface SchedulerCounters {
  generated: number;
  prefill: number;
  calls: number;
  steps: number;
  discarded: number;
  /** Sum of batch sizes over calls. */
  batchSum: number;
  modelMs: number;
  sampleMs: number;
  envWaitMs: number;
}

/** One backend call's rows, as the backend returned them. */
type CallResult = { sampled: SampledToken[][]; logits: null } | { sampled: null; logits: Float32Array[] };

export class RolloutScheduler implements SchedulerHost {
  readonly counters: SchedulerCounters = { generated: 0, prefill: 0, calls: 0, steps: 0, discarded: 0, batchSum: 0, modelMs: 0, sampleMs: 0, envWaitMs: 0 };
  readonly source: SequenceSource;
  private readonly results: Trajectory[] = [];
  private readonly freeSlots: number[];
  /** Sequences with unfed tokens, waiting for the next tick. */
  private readonly waiting: Seq[] = [];
  /** Environment work in flight. */
  private readonly pending = new Set<Promise<void>>();
  private failure: unknown = null;

  constructor(
    private readonly backend: DecodeBackend,
    private readonly rules: TurnRules,
    private readonly o: SchedulerOptions,
    source: (host: SchedulerHost) => SequenceSource,
  ) {
    this.freeSlots = Array.from({ length: o.maxBatch }, (_, i) => o.maxBatch - 1 - i);
    this.source = source(this);
  }

  /** Tick until every trajectory is in; returns them in (group, sample) order. */
  async run(): Promise<Trajectory[]> {
    try {
      while (this.results.length < this.o.total) {
        if (this.o.signal?.aborted) throw new Error('rollout aborted');
        if (this.failure) throw this.failure;
        const admitting: Promise<void>[] = [];
        this.source.admit(this.freeSlots, admitting);
        if (admitting.length) await Promise.all(admitting);
        if (this.waiting.length === 0) {
          if (this.pending.size === 0) {
            if (this.failure) throw this.failure;
            if (!this.source.hasBookkeeping() && !this.source.hasQueued()) throw new Error('rollout scheduler stalled (no work and nothing pending)');
            continue;
          }
          const tw = performance.now();
          await Promise.race(this.pending);
          this.counters.envWaitMs += performance.now() - tw;
          continue;
        }
        await this.tick();
      }
      if (this.failure) throw this.failure;
    } finally {
      if (this.pending.size) await Promise.allSettled([...this.pending]);
    }
    return this.results.sort((a, b) => a.group - b.group || a.sample - b.sample);
  }

  /** Prompt a sequence that holds a slot; it decodes from the next tick. */
  async admit(s: Seq): Promise<void> {
    s.t0 = performance.now();
    const p = await s.env.prompt();
    s.envMs += performance.now() - s.t0;
    this.rules.start(s, p);
    this.waiting.push(s);
  }

  track(p: Promise<void>): void {
    const q = p
      .catch((e) => {
        this.failure ??= e;
      })
      .finally(() => this.pending.delete(q));
    this.pending.add(q);
  }

  ready(s: Seq): void {
    this.waiting.push(s);
  }

  /** One backend call for every sequence with unfed tokens, and each row's tokens taken. */
  private async tick(): Promise<void> {
    const c = this.counters;
    const ticked = this.waiting.splice(0, this.waiting.length).sort((a, b) => a.slot - b.slot);
    const followers = this.o.sharePrefix ? sharedPrompts(ticked) : new Map<Seq, Seq[]>();
    const isFollower = new Set([...followers.values()].flat());
    const batch = ticked.filter((s) => !isFollower.has(s));
    const items = batch.map((s) => ({ slot: s.slot, tokens: followers.has(s) ? s.unfed.slice(0, -1) : s.unfed }));
    batch.forEach((s, i) => {
      const n = items[i]!.tokens.length;
      if (n > 1 || s.cur!.tokenIds.length === 0) {
        s.prefillTokens += n;
        c.prefill += n;
      }
    });
    // K > 1 only when every row samples (no shared prompt's lead row).
    const K = this.o.mode.sampleSteps && followers.size === 0 ? this.stepsFor(batch) : 1;
    const { sample, sampleSteps } = this.o.mode;
    const t = performance.now();
    let out: CallResult;
    // Each sampling row's stream before this call's draws (to rewind when a turn ends early).
    const before: (RngState | null)[] = [];
    if (sample) {
      const req = this.sampleRequest(batch, followers, K, before);
      out = { sampled: K > 1 ? await sampleSteps!(items, req, K) : (await sample(items, req)).map((x) => [x]), logits: null };
    } else out = { sampled: null, logits: await this.backend.extend(items) };
    const dt = performance.now() - t;
    c.modelMs += dt;
    c.calls++;
    c.steps += K;
    c.batchSum += batch.length;
    const rowsBack = out.sampled ? out.sampled.length : out.logits.length;
    if (rowsBack !== batch.length)
      throw new Error(`decode backend returned ${rowsBack} ${out.sampled ? 'samples' : 'logits rows'} for ${batch.length} sequences`);
    const ts = performance.now();
    batch.forEach((s, i) => {
      s.modelMs += dt / batch.length;
      const group = followers.get(s);
      if (group) this.forkPrompt(s, group);
      else if (out.sampled) this.takeSteps(s, out.sampled[i]!, K, before[i]);
      else this.sampleRow(s, out.logits[i]!);
    });
    c.sampleMs += performance.now() - ts;
    // Let environment work that already completed run before the next tick.
    if (this.pending.size) await new Promise<void>((r) => setImmediate(r));
  }

  /**
   * Decode steps in this call: at most the cap, the tokens any row may still generate in its turn
   * and its source's step limit (a branching sample's entropy window), then chooseSteps.
   */
  private stepsFor(batch: Seq[]): number {
    let K = this.o.mode.stepCap;
    for (const s of batch) K = Math.min(K, this.rules.room(s), this.source.stepLimit(s));
    return chooseSteps(
      batch.map((s) => s.cur!.tokenIds.length),
      Math.max(1, K),
      this.o.lengths,
    );
  }

  /**
   * The backend samples: one uniform per sampled row and step from the sequence's own stream, as
   * sampleToken would draw it (none when greedy, none for a shared prompt's lead row). Each row's
   * stream state before the draws goes to `before` when K > 1.
   */
  private sampleRequest(batch: Seq[], followers: Map<Seq, Seq[]>, K: number, before: (RngState | null)[]): SampleRequest {
    const { greedy, temperature } = this.o.mode;
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
    return req;
  }

  /** A shared prompt's lead row fed all but the last token: its cache forked to the followers; all of them feed that token at the next tick. */
  private forkPrompt(lead: Seq, group: Seq[]): void {
    const last = lead.unfed[lead.unfed.length - 1]!;
    lead.unfed = [last];
    this.waiting.push(lead);
    for (const f of group) {
      this.backend.fork!(lead.slot, f.slot);
      f.unfed = [last];
      this.waiting.push(f);
    }
  }

  /** A logits row: sample the token here from the sequence's stream. */
  private sampleRow(s: Seq, row: Float32Array): void {
    if (row.length !== this.backend.vocabSize) throw new Error(`decode backend returned a logits row of ${row.length} for vocab ${this.backend.vocabSize}`);
    const ended = this.accept(s, sampleToken(row, this.o.mode.params, s.rng));
    const go = ended ? () => this.track(this.endTurn(s, ended)) : () => this.waiting.push(s);
    if (this.source.parkAfterToken(s, !!ended, go)) return;
    go();
  }

  /**
   * A row's K sampled tokens, in order, through the same accept() as one step per call; the turn
   * may end (or the source park the sequence) before the last. The rest are discarded: the stream
   * as if only the used uniforms were drawn, the cache cut back to the last accepted token (which
   * is unfed, as after a one-step call).
   */
  private takeSteps(s: Seq, toks: SampledToken[], K: number, before: RngState | null | undefined): void {
    if (toks.length !== K) throw new Error(`decode backend returned ${toks.length} steps for ${K}`);
    let used = 0;
    let parked = false;
    let go: () => void = () => this.waiting.push(s);
    while (used < K) {
      const tok = toks[used++]!;
      if (!Number.isFinite(tok.logprob)) throw new Error('sampleToken: logits contain NaN or are all -Infinity');
      const ended = this.accept(s, tok);
      if (ended) go = () => this.track(this.endTurn(s, ended));
      if (this.source.parkAfterToken(s, !!ended, go)) {
        parked = true;
        break;
      }
      if (ended) break;
    }
    if (used < K) {
      this.counters.discarded += K - used;
      if (before) {
        s.rng.restore(before);
        for (let k = 0; k < used; k++) s.rng.next();
      }
      this.backend.truncate!(s.slot, s.length - s.unfed.length);
    }
    if (!parked) go();
  }

  private accept(s: Seq, tok: SampledToken): TurnEnd | null {
    const ended = this.rules.accept(s, tok);
    this.counters.generated++;
    return ended;
  }

  /** The model's turn ended: run the environment, then either finish or queue the observation. */
  private async endTurn(s: Seq, reason: TurnEnd): Promise<void> {
    const turn = this.rules.close(s, reason);
    const t = performance.now();
    let r: EnvStepResult;
    try {
      r = await s.env.step({ text: turn.text, tokenIds: turn.tokenIds.slice(), stopReason: reason.reason });
    } catch (e) {
      throw new Error(`environment step() failed for task ${s.task.id}, turn ${s.modelTurns}: ${e instanceof Error ? e.message : String(e)}`);
    }
    s.envMs += performance.now() - t;
    const observed = this.rules.afterStep(s, turn, reason, r);
    if (observed === null) return this.finish(s);
    this.source.observed(s, observed);
    this.waiting.push(s);
  }

  /** The episode ended: the slot is freed, the environment scores it, the trajectory is recorded. */
  private async finish(s: Seq): Promise<void> {
    this.backend.release(s.slot);
    this.source.release(s, this.freeSlots);
    s.slot = -1;
    const t = performance.now();
    let outcome: OutcomeReward;
    try {
      outcome = await s.env.outcome();
    } catch (e) {
      throw new Error(`environment outcome() failed for task ${s.task.id}: ${e instanceof Error ? e.message : String(e)}`);
    }
    s.envMs += performance.now() - t;
    const traj = trajectoryOf(s, outcome, this.source.lineage(s));
    this.results.push(traj);
    this.o.onTrajectory?.(traj);
    this.o.onProgress?.({
      done: this.results.length,
      total: this.o.total,
      generatedTokens: this.counters.generated,
      elapsedMs: performance.now() - this.o.start,
    });
  }
}

/**
 * Prefix sharing: sequences whose cache is empty and whose prompts are identical (a GRPO group)
 * prefill it once: the first one (the lead) feeds all but the prompt's last token, its cache is
 * forked to the others (its followers), and all of them feed that last token at the next tick
 * (where each samples from its own stream). Returns each lead's followers (leads with none left out).
 */
function sharedPrompts(ticked: Seq[]): Map<Seq, Seq[]> {
  const followers = new Map<Seq, Seq[]>();
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
  return followers;
}
