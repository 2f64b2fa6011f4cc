/**
 * The continuous-batching scheduler: which sequences decode at each tick, over a KV-cache decoder
 * with one slot per sequence. One scheduler runs under both the rollout and the OpenAI-compatible
 * endpoint; what a sequence (a row) is, who gets a free slot and what follows a sampled token is
 * up to its SequenceSource: a rollout's fixed set of episodes (./episodes.ts: model turns and
 * environment steps, independent samples or branching groups) or the endpoint's requests
 * arriving over time (engine/openai/requests.ts: one model turn each).
 *
 * Each tick sends one backend call with every row that has tokens the cache has not seen yet: a
 * new prompt, an observation after a tool (prefixed by the last sampled token), or the token(s)
 * sampled at the previous tick. A row leaves the decode batch when its source says so after a
 * token (its turn ended, or it parked); it rejoins with `ready` (an environment step's
 * observation, a branching group's decisions) or frees its slot with `release`.
 *
 * Sampling: each row samples from its own stream, so what it samples depends neither on what
 * shares its batch (up to floating-point differences between batch shapes) nor on the steps per
 * call. When every row of the call samples from the full distribution (or greedily) and wants no
 * top logprobs, the backend samples (DecodeBackend.extendSample: only ids and logprobs cross from
 * the worker), up to K steps per call, a row's stream and cache rewound past the tokens its
 * source did not take; otherwise the call returns logits rows and the token is drawn here
 * (sampleToken: top-k / top-p), one step per call.
 */
import type { Rng, RngState } from '../base/rng';
import { chooseDecodeSteps, type TurnLengths } from './decode-steps';
import type { DecodeBackend, SampleRequest } from './ports';
import { sampleToken, topLogprobs, type SampledToken, type SamplingParams } from './sampling';

/** A sampled token; `top`: the most likely tokens at its position (a row that asks for top logprobs). */
export interface GenToken extends SampledToken {
  top?: { id: number; logprob: number }[];
}

/** What the scheduler reads and writes of a sequence that decodes (a row). */
export interface Row {
  /** Its KV slot (-1: none). */
  slot: number;
  /** Tokens appended to the row but not yet in the slot's cache. */
  unfed: number[];
  /** Tokens in the row (cached and unfed). */
  length: number;
  /** The row's own stream (uniforms for the backend's sampling, or sampleToken's draws). */
  rng: Rng;
  /** Tokens the row prefilled. */
  prefillTokens: number;
  /** The row's share of backend time. */
  modelMs: number;
}

/** How a row samples. */
export interface RowSampling {
  params: SamplingParams;
  /** The most likely tokens recorded with each sampled token (0: none; > 0 samples from logits here). */
  topLogprobs: number;
}

/** What a source may ask of the scheduler. */
export interface SchedulerHost<S extends Row> {
  /** The row has unfed tokens: it decodes from the next tick. */
  ready(s: S): void;
  /** Work in the background (an environment step); its failure ends the scheduler's run. */
  track(p: Promise<void>): void;
  /** The row is done with its slot: it leaves the batch, the backend forgets its cache, the source gets the slot (SequenceSource.release). */
  release(s: S): void;
  readonly counters: SchedulerCounters;
}

/** What a row is, who gets the free slots, and what follows each sampled token. */
export interface SequenceSource<S extends Row> {
  /** Checked before each admission: a reason to stop the run now (an aborted rollout), else null. */
  interrupted(): Error | null;
  /** Between ticks: start rows in free slots (taking them from `free`); asynchronous admissions go to `starting`. */
  admit(free: number[], starting: Promise<void>[]): void;
  /** A released row's slot (its cache already forgotten): back to `free`, or kept by the source. */
  release(s: S, free: number[]): void;
  /** Nothing is left to decode or to come: the run ends. */
  done(): boolean;
  /** Work that needs no tick (rows waiting for slots, bookkeeping due at the next admission). */
  hasWork(): boolean;
  sampling(s: S): RowSampling;
  /** Tokens in the row's current turn (0: nothing generated yet, its unfed tokens are prefill). */
  turnLength(s: S): number;
  /** Most tokens the row may generate before its source must see them (≥ 1). */
  room(s: S): number;
  /**
   * A sampled token, in order: the source appends it to the row (its unfed becomes [id], its
   * length grows by one). Returns null to go on decoding; else the row leaves the batch, and the
   * returned function runs once the row's stream and cache are rewound to this token (it may end
   * the turn, free the slot, or do nothing while the row waits to be resumed with `ready`).
   */
  take(s: S, tok: GenToken): (() => void) | null;
}

export interface SchedulerOptions {
  /** Slots (rows decoded together). */
  maxBatch: number;
  /** Most decode steps per backend call (used when the backend samples and can cut a slot's cache back). */
  stepCap: number;
  /** How this backend's turns ended, behind the choice of steps per call (chooseDecodeSteps); null: as many as every row has room for. */
  lengths: TurnLengths | null;
  /** Prefill identical prompts starting together once and fork the cache (the backend can fork). */
  sharePrefix: boolean;
  /** Yield to the event loop after every tick (requests arriving over HTTP); else only while background work is in flight. */
  yieldEachTick: boolean;
}

/** What the scheduler counted. */
export interface SchedulerCounters {
  generated: number;
  prefill: number;
  calls: number;
  steps: number;
  /** Tokens a multi-step call sampled after their row left the batch. */
  discarded: number;
  /** Sum of batch sizes over calls. */
  batchSum: number;
  /** Time inside backend calls (ticks never overlap). */
  modelMs: number;
  /** Time taking each call's tokens (sampling from logits, the sources' stop checks). */
  sampleMs: number;
  /** Time with no row to decode, waiting on background work. */
  envWaitMs: number;
}

/** One backend call's rows, as the backend returned them. */
type CallResult = { sampled: SampledToken[][]; logits: null } | { sampled: null; logits: Float32Array[] };

export class Scheduler<S extends Row, Src extends SequenceSource<S> = SequenceSource<S>> implements SchedulerHost<S> {
  readonly counters: SchedulerCounters = { generated: 0, prefill: 0, calls: 0, steps: 0, discarded: 0, batchSum: 0, modelMs: 0, sampleMs: 0, envWaitMs: 0 };
  readonly source: Src;
  private readonly freeSlots: number[];
  /** Rows with unfed tokens, waiting for the next tick. */
  private readonly waiting: S[] = [];
  /** Background work in flight. */
  private readonly pending = new Set<Promise<void>>();
  private failure: unknown = null;
  /** The backend can run several sampled steps per call and cut a slot's cache back. */
  private readonly multiStep: boolean;

  constructor(
    private readonly backend: DecodeBackend,
    private readonly o: SchedulerOptions,
    source: (host: SchedulerHost<S>) => Src,
  ) {
    this.freeSlots = Array.from({ length: o.maxBatch }, (_, i) => o.maxBatch - 1 - i);
    this.multiStep = !!backend.extendSampleSteps && !!backend.truncate && o.stepCap > 1;
    this.source = source(this);
  }

  /** Tick until the source is done (a failure of the backend, a source or background work ends it). */
  async run(): Promise<void> {
    try {
      while (!this.source.done()) {
        const stop = this.source.interrupted();
        if (stop) throw stop;
        if (this.failure) throw this.failure;
        const admitting: Promise<void>[] = [];
        this.source.admit(this.freeSlots, admitting);
        if (admitting.length) await Promise.all(admitting);
        if (this.waiting.length === 0) {
          if (this.pending.size === 0) {
            if (this.failure) throw this.failure;
            if (!this.source.hasWork()) throw new Error('decode scheduler stalled (no work and nothing pending)');
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
  }

  ready(s: S): void {
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

  release(s: S): void {
    const i = this.waiting.indexOf(s);
    if (i >= 0) this.waiting.splice(i, 1);
    try {
      this.backend.release(s.slot);
    } finally {
      this.source.release(s, this.freeSlots);
      s.slot = -1;
    }
  }

  /** One backend call for every row with unfed tokens, and each row's tokens taken. */
  private async tick(): Promise<void> {
    const c = this.counters;
    const ticked = this.waiting.splice(0, this.waiting.length).sort((a, b) => a.slot - b.slot);
    const followers = this.o.sharePrefix ? sharedPrompts(ticked) : new Map<S, S[]>();
    const isFollower = new Set([...followers.values()].flat());
    const batch = ticked.filter((s) => !isFollower.has(s));
    const items = batch.map((s) => ({ slot: s.slot, tokens: followers.has(s) ? s.unfed.slice(0, -1) : s.unfed }));
    batch.forEach((s, i) => {
      const n = items[i]!.tokens.length;
      if (n > 1 || this.source.turnLength(s) === 0) {
        s.prefillTokens += n;
        c.prefill += n;
      }
    });
    const sampling = batch.map((s) => this.source.sampling(s));
    const backendSamples = !!this.backend.extendSample && sampling.every((r) => this.backendCanSample(r));
    // K > 1 only when every row samples (no shared prompt's lead row).
    const K = backendSamples && this.multiStep && followers.size === 0 ? this.stepsFor(batch) : 1;
    const t = performance.now();
    let out: CallResult;
    // Each sampling row's stream before this call's draws (to rewind when it leaves the batch early).
    const before: (RngState | null)[] = [];
    if (backendSamples) {
      const req = this.sampleRequest(batch, sampling, followers, K, before);
      const sampled = K > 1 ? await this.backend.extendSampleSteps!(items, req, K) : (await this.backend.extendSample!(items, req)).map((x) => [x]);
      out = { sampled, logits: null };
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
      else this.takeSteps(s, [this.sampleRow(s, out.logits[i]!, sampling[i]!)], 1, null);
    });
    c.sampleMs += performance.now() - ts;
    // Let background work that already completed (and HTTP handlers, for the endpoint) run before the next tick.
    if (this.pending.size || this.o.yieldEachTick) await new Promise<void>((r) => setImmediate(r));
  }

  /** The backend samples greedy rows and full-distribution rows (no top-k / top-p) that want no top logprobs. */
  private backendCanSample({ params, topLogprobs }: RowSampling): boolean {
    if (topLogprobs > 0) return false;
    if ((params.temperature ?? 1) === 0) return true;
    const topK = params.topK && params.topK > 0 && params.topK < this.backend.vocabSize;
    return !topK && (params.topP ?? 1) >= 1;
  }

  /**
   * Decode steps in this call: at most the cap and the tokens any row may generate before its
   * source must see them (the end of its turn, a branching sample's entropy window), then
   * chooseDecodeSteps where the backend's turn lengths are kept.
   */
  private stepsFor(batch: S[]): number {
    let K = this.o.stepCap;
    for (const s of batch) K = Math.min(K, this.source.room(s));
    K = Math.max(1, K);
    return this.o.lengths
      ? chooseDecodeSteps(
          batch.map((s) => this.source.turnLength(s)),
          K,
          this.o.lengths,
        )
      : K;
  }

  /**
   * The backend samples: one uniform per sampled row and step from the row's own stream, as
   * sampleToken would draw it (none when greedy, none for a shared prompt's lead row). Each row's
   * stream state before the draws goes to `before` when K > 1.
   */
  private sampleRequest(batch: S[], sampling: RowSampling[], followers: Map<S, S[]>, K: number, before: (RngState | null)[]): SampleRequest {
    const B = batch.length;
    const req = { u: new Float32Array(K * B), invTemp: new Float32Array(B), greedy: new Float32Array(B) };
    batch.forEach((s, i) => {
      const temperature = sampling[i]!.params.temperature ?? 1;
      const greedy = temperature === 0;
      req.greedy[i] = greedy ? 1 : 0;
      req.invTemp[i] = greedy ? 1 : 1 / temperature;
      if (greedy || followers.has(s)) return;
      before[i] = K > 1 ? s.rng.state() : null;
      for (let k = 0; k < K; k++) req.u[k * B + i] = s.rng.next();
    });
    return req;
  }

  /** A shared prompt's lead row fed all but the last token: its cache forked to the followers; all of them feed that token at the next tick. */
  private forkPrompt(lead: S, group: S[]): void {
    const last = lead.unfed[lead.unfed.length - 1]!;
    lead.unfed = [last];
    this.waiting.push(lead);
    for (const f of group) {
      this.backend.fork!(lead.slot, f.slot);
      f.unfed = [last];
      this.waiting.push(f);
    }
  }

  /** A logits row: the token drawn here from the row's stream (with its top logprobs when asked). */
  private sampleRow(s: S, row: Float32Array, { params, topLogprobs: k }: RowSampling): GenToken {
    if (row.length !== this.backend.vocabSize) throw new Error(`decode backend returned a logits row of ${row.length} for vocab ${this.backend.vocabSize}`);
    const tok: GenToken = sampleToken(row, params, s.rng);
    if (k > 0) tok.top = topLogprobs(row, params.temperature === 0 ? 1 : 1 / (params.temperature ?? 1), k);
    return tok;
  }

  /**
   * A row's K tokens, in order, through its source's take(); the row may leave the batch before
   * the last. The rest are discarded: the stream as if only the used uniforms were drawn, the
   * cache cut back to the last taken token (which is unfed, as after a one-step call).
   */
  private takeSteps(s: S, toks: GenToken[], K: number, before: RngState | null | undefined): void {
    if (toks.length !== K) throw new Error(`decode backend returned ${toks.length} steps for ${K}`);
    let used = 0;
    let leave: (() => void) | null = null;
    while (used < K && !leave) {
      const tok = toks[used++]!;
      if (!Number.isFinite(tok.logprob)) throw new Error('sampleToken: logits contain NaN or are all -Infinity');
      leave = this.source.take(s, tok);
      this.counters.generated++;
    }
    if (used < K) {
      this.counters.discarded += K - used;
      if (before) {
        s.rng.restore(before);
        for (let k = 0; k < used; k++) s.rng.next();
      }
      this.backend.truncate!(s.slot, s.length - s.unfed.length);
    }
    if (leave) leave();
    else this.waiting.push(s);
  }
}

/**
 * Prefix sharing: rows whose cache is empty and whose prompts are identical (a GRPO group)
 * prefill it once: the first one (the lead) feeds all but the prompt's last token, its cache is
 * forked to the others (its followers), and all of them feed that last token at the next tick
 * (where each samples from its own stream). Returns each lead's followers (leads with none left out).
 */
function sharedPrompts<S extends Row>(ticked: S[]): Map<S, S[]> {
  const followers = new Map<S, S[]>();
  const byPrompt = new Map<string, S>();
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
