/**
 * The OpenAI-compatible endpoint's requests as a source of the decode scheduler
 * (engine/rollout/scheduler.ts, the one the rollout runs on): requests arrive at any time (HTTP
 * calls, external agents), each takes a KV slot when one is free and is one model turn. Every
 * tick runs ONE backend call for every live request (new prompts are prefilled in the same call
 * as other requests' decode steps); a request leaves the batch when it ends (stop token, stop
 * string, max tokens, context) or its client aborts, and its slot goes to the next queued one.
 * The scheduler runs while requests are queued or live and starts again with the next one.
 *
 * Sampling is the scheduler's (engine/rollout/sampling.ts: the logprob recorded is that of
 * softmax(logits/T), T = 1 when greedy), each request from its own stream seeded by its `seed`,
 * so what a request samples does not depend on what shares its batch (up to floating-point
 * differences between batch shapes). When every live request samples from the full distribution
 * (or greedily) and wants no top logprobs, the backend samples, up to DECODE_STEPS steps per call;
 * otherwise the call returns logits rows, one step per call.
 */
import { Rng } from '../base/rng';
import { DECODE_STEPS } from '../rollout/decode-steps';
import type { DecodeBackend } from '../rollout/ports';
import { Scheduler, type GenToken, type Row, type RowSampling, type SchedulerHost, type SequenceSource } from '../rollout/scheduler';

export type { GenToken } from '../rollout/scheduler';

export type FinishReason = 'stop' | 'length';

export interface GenRequest {
  promptIds: number[];
  /** Most tokens to generate (the stop token counts). */
  maxTokens: number;
  /** 0 = greedy. */
  temperature: number;
  topP: number;
  seed: number;
  /** A sampled id in this set ends the request (the id is kept in the completion). */
  stopTokenIds: number[];
  /** The request ends as soon as its decoded completion contains one of these (its tokens are kept). */
  stopStrings: string[];
  topLogprobs: number;
  /** Called with every sampled token, in order (streaming). */
  onToken?(t: GenToken, index: number): void;
  signal?: AbortSignal;
}

export interface GenResult {
  tokens: GenToken[];
  finish: FinishReason;
  /** What ended it: a stop token id, a stop string (index in the decoded completion text), or a limit. */
  stop: { kind: 'token'; id: number } | { kind: 'string'; value: string; at: number } | { kind: 'length' };
}

/** A request: queued, then a row of the scheduler. */
interface Live extends Row {
  req: GenRequest;
  sampling: RowSampling;
  tokens: GenToken[];
  resolve(r: GenResult): void;
  reject(e: unknown): void;
}

export interface SchedulerStats {
  calls: number;
  /** Sum over calls of the rows in the call (mean batch = rowSum / calls). */
  rowSum: number;
  generated: number;
  prefilled: number;
  /** Decode steps run (≥ calls: several per call when the backend samples). */
  steps: number;
  /** Tokens a multi-step call sampled after their request had ended (its stream and cache rewound before its slot was freed). */
  discarded: number;
  /** Wall time inside backend calls (the model's busy time; ticks never overlap). */
  busyMs: number;
}

export class RequestSource implements SequenceSource<Live> {
  private queue: Live[] = [];
  private live = new Set<Live>();
  private running = false;
  private closed = false;
  private readonly scheduler: Scheduler<Live>;
  private readonly host: SchedulerHost<Live>;

  constructor(
    readonly backend: DecodeBackend,
    private readonly decode: (ids: number[]) => string,
    /** Most requests decoded together (≤ backend.maxBatch). */
    maxBatch = backend.maxBatch,
  ) {
    const opts = { maxBatch: Math.min(maxBatch, backend.maxBatch), stepCap: DECODE_STEPS, lengths: null, sharePrefix: false, yieldEachTick: true };
    this.scheduler = new Scheduler<Live>(backend, opts, () => this);
    this.host = this.scheduler;
  }

  get maxLength(): number {
    return this.backend.maxLength;
  }

  /** Requests waiting for a slot and requests decoding. */
  get load(): { queued: number; live: number } {
    return { queued: this.queue.length, live: this.live.size };
  }

  /** What the scheduler counted since this source was made. */
  get stats(): SchedulerStats {
    const c = this.scheduler.counters;
    return { calls: c.calls, rowSum: c.batchSum, generated: c.generated, prefilled: c.prefill, steps: c.steps, discarded: c.discarded, busyMs: c.modelMs };
  }

  generate(req: GenRequest): Promise<GenResult> {
    if (this.closed) return Promise.reject(new Error('the model server is closing'));
    if (req.promptIds.length === 0) return Promise.reject(new Error('empty prompt'));
    if (req.promptIds.length >= this.backend.maxLength)
      return Promise.reject(new Error(`the prompt is ${req.promptIds.length} tokens; the context holds ${this.backend.maxLength}`));
    return new Promise<GenResult>((resolve, reject) => {
      this.queue.push({
        req,
        sampling: { params: { temperature: req.temperature, topP: req.topP }, topLogprobs: req.topLogprobs },
        rng: new Rng(req.seed),
        slot: -1,
        tokens: [],
        unfed: req.promptIds.slice(),
        length: req.promptIds.length,
        prefillTokens: 0,
        modelMs: 0,
        resolve,
        reject,
      });
      if (!this.running) void this.loop();
    });
  }

  /** Refuse new requests and wait for the live ones to end. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.running) await new Promise((r) => setTimeout(r, 5));
  }

  /** Run the scheduler while requests are queued or live; a failed backend call fails the requests it served. */
  private async loop(): Promise<void> {
    this.running = true;
    try {
      while (!this.done()) {
        try {
          await this.scheduler.run();
        } catch (e) {
          const err = e instanceof Error ? e : new Error(String(e));
          for (const s of [...this.live]) this.finish(s, err);
        }
      }
    } finally {
      this.running = false;
    }
  }

  interrupted(): null {
    return null;
  }

  /** Queued requests into free slots (an aborted one is refused), then aborted live ones leave. */
  admit(free: number[]): void {
    while (free.length && this.queue.length) {
      const s = this.queue.shift()!;
      if (s.req.signal?.aborted) {
        s.reject(new Error('request aborted'));
        continue;
      }
      s.slot = free.pop()!;
      this.live.add(s);
      this.host.ready(s);
    }
    for (const s of [...this.live]) if (s.req.signal?.aborted) this.finish(s, new Error('request aborted'));
  }

  release(s: Live, free: number[]): void {
    free.push(s.slot);
  }
  done(): boolean {
    return this.queue.length === 0 && this.live.size === 0;
  }
  hasWork(): boolean {
    return this.queue.length > 0;
  }
  sampling(s: Live): RowSampling {
    return s.sampling;
  }
  turnLength(s: Live): number {
    return s.tokens.length;
  }
  room(s: Live): number {
    return Math.min(s.req.maxTokens - s.tokens.length, this.backend.maxLength - s.length);
  }

  /** The token joins the completion (streamed to the client); the request ends at a stop or a limit. */
  take(s: Live, t: GenToken): (() => void) | null {
    s.tokens.push({ id: t.id, logprob: t.logprob, entropy: t.entropy, ...(t.top ? { top: t.top } : {}) });
    s.unfed = [t.id];
    s.length++;
    try {
      s.req.onToken?.(t, s.tokens.length - 1);
    } catch {
      // A streaming client that went away; the request still completes (its ids are recorded).
    }
    const end = this.ended(s, t);
    return end ? () => this.finish(s, { tokens: s.tokens, ...end }) : null;
  }

  private finish(s: Live, r: GenResult | Error): void {
    this.live.delete(s);
    try {
      this.host.release(s);
    } catch {
      // A slot the backend never filled (the request failed before its first call).
    }
    if (r instanceof Error) s.reject(r);
    else s.resolve(r);
  }

  private ended(s: Live, t: GenToken): Pick<GenResult, 'finish' | 'stop'> | null {
    const r = s.req;
    if (r.stopTokenIds.includes(t.id)) return { finish: 'stop', stop: { kind: 'token', id: t.id } };
    if (r.stopStrings.length) {
      const text = this.decode(s.tokens.map((x) => x.id));
      let best: { value: string; at: number } | null = null;
      for (const v of r.stopStrings) {
        const at = text.indexOf(v);
        if (at >= 0 && (!best || at < best.at)) best = { value: v, at };
      }
      if (best) return { finish: 'stop', stop: { kind: 'string', ...best } };
    }
    if (s.tokens.length >= r.maxTokens || s.length >= this.backend.maxLength) return { finish: 'length', stop: { kind: 'length' } };
    return null;
  }
}
