/**
 * A request-driven continuous-batching scheduler over a DecodeBackend (engine/rollout/ports.ts),
 * for the OpenAI-compatible endpoint: requests arrive at any time (HTTP calls, external agents),
 * each takes a KV slot when one is free, and every tick runs ONE backend call for every live
 * request (new prompts are prefilled in the same call as other requests' decode steps). A request
 * leaves the batch when it ends (stop token, stop string, max tokens, context) and its slot goes to
 * the next queued one. engine/rollout/engine.ts does the same for a fixed set of episodes; this is
 * its open-ended counterpart (no environment steps: a request is one model turn).
 *
 * Sampling follows engine/rollout/sampling.ts (the logprob recorded is that of softmax(logits/T),
 * T = 1 when greedy), each request from its own stream seeded by its `seed`, so what a request
 * samples does not depend on what shares its batch (up to floating-point differences between batch
 * shapes). When every live request samples from the full distribution (or greedily) and wants no
 * top logprobs, the backend samples (DecodeBackend.extendSample: only ids and logprobs cross from
 * the worker), up to DECODE_STEPS steps per call as the rollout engine does; otherwise the call
 * returns logits rows and sampling happens here, one step per call.
 */
import { Rng } from '../base/rng';
import type { DecodeBackend } from '../rollout/ports';
import { DECODE_STEPS } from '../rollout/engine';
import { sampleToken } from '../rollout/sampling';

export interface GenToken {
  id: number;
  logprob: number;
  entropy: number;
  /** The most likely tokens at this position (top_logprobs > 0 only), under softmax(logits/T). */
  top?: { id: number; logprob: number }[];
}

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

interface Live {
  req: GenRequest;
  rng: Rng;
  slot: number;
  tokens: GenToken[];
  unfed: number[];
  length: number;
  resolve(r: GenResult): void;
  reject(e: unknown): void;
}

export interface SchedulerStats {
  calls: number;
  /** Sum over calls of the rows in the call (mean batch = rowSum / calls). */
  rowSum: number;
  generated: number;
  prefilled: number;
  /** Wall time inside backend calls (the model's busy time; ticks never overlap). */
  busyMs: number;
}

export class DecodeScheduler {
  private queue: Live[] = [];
  private live = new Map<number, Live>();
  private free: number[];
  private running = false;
  private closed = false;
  readonly stats: SchedulerStats = { calls: 0, rowSum: 0, generated: 0, prefilled: 0, busyMs: 0 };

  constructor(
    readonly backend: DecodeBackend,
    private readonly decode: (ids: number[]) => string,
    /** Most requests decoded together (≤ backend.maxBatch). */
    maxBatch = backend.maxBatch,
  ) {
    const n = Math.min(maxBatch, backend.maxBatch);
    this.free = Array.from({ length: n }, (_, i) => n - 1 - i);
  }

  get maxLength(): number {
    return this.backend.maxLength;
  }

  /** Requests waiting for a slot and requests decoding. */
  get load(): { queued: number; live: number } {
    return { queued: this.queue.length, live: this.live.size };
  }

  generate(req: GenRequest): Promise<GenResult> {
    if (this.closed) return Promise.reject(new Error('the model server is closing'));
    if (req.promptIds.length === 0) return Promise.reject(new Error('empty prompt'));
    if (req.promptIds.length >= this.backend.maxLength)
      return Promise.reject(new Error(`the prompt is ${req.promptIds.length} tokens; the context holds ${this.backend.maxLength}`));
    return new Promise<GenResult>((resolve, reject) => {
      this.queue.push({
        req,
        rng: new Rng(req.seed),
        slot: -1,
        tokens: [],
        unfed: req.promptIds.slice(),
        length: req.promptIds.length,
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

  private finish(s: Live, r: GenResult | Error): void {
    this.live.delete(s.slot);
    try {
      this.backend.release(s.slot);
    } catch {
      // A slot the backend never filled (the request failed before its first call).
    }
    this.free.push(s.slot);
    if (r instanceof Error) s.reject(r);
    else s.resolve(r);
  }

  private async loop(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length || this.live.size) {
        while (this.free.length && this.queue.length) {
          const s = this.queue.shift()!;
          if (s.req.signal?.aborted) {
            s.reject(new Error('request aborted'));
            continue;
          }
          s.slot = this.free.pop()!;
          this.live.set(s.slot, s);
        }
        for (const s of [...this.live.values()]) if (s.req.signal?.aborted) this.finish(s, new Error('request aborted'));
        const batch = [...this.live.values()].sort((a, b) => a.slot - b.slot);
        if (batch.length === 0) continue;
        await this.tick(batch);
        // Let HTTP handlers admit new requests between ticks.
        await new Promise<void>((r) => setImmediate(r));
      }
    } finally {
      this.running = false;
    }
  }

  private async tick(batch: Live[]): Promise<void> {
    const items = batch.map((s) => ({ slot: s.slot, tokens: s.unfed }));
    for (const it of items) if (it.tokens.length > 1) this.stats.prefilled += it.tokens.length;
    const fast = this.backend.extendSample && batch.every((s) => s.req.topLogprobs === 0 && (s.req.temperature === 0 || s.req.topP >= 1));
    let sampled: GenToken[][];
    const t0 = performance.now();
    try {
      if (fast) {
        // Several decode steps per call (one worker message) when the backend can: at most
        // DECODE_STEPS and the tokens any row may still generate. A row whose turn ends before the
        // call's last step leaves the batch (its slot is released), so nothing is rewound.
        let K = this.backend.extendSampleSteps ? DECODE_STEPS : 1;
        for (const s of batch) K = Math.min(K, s.req.maxTokens - s.tokens.length, this.backend.maxLength - s.length);
        K = Math.max(1, K);
        const B = batch.length;
        const req = { u: new Float32Array(K * B), invTemp: new Float32Array(B), greedy: new Float32Array(B) };
        batch.forEach((s, i) => {
          const greedy = s.req.temperature === 0;
          req.greedy[i] = greedy ? 1 : 0;
          req.invTemp[i] = greedy ? 1 : 1 / s.req.temperature;
          if (!greedy) for (let k = 0; k < K; k++) req.u[k * B + i] = s.rng.next();
        });
        sampled = K > 1 ? await this.backend.extendSampleSteps!(items, req, K) : (await this.backend.extendSample!(items, req)).map((t) => [t]);
      } else {
        const rows = await this.backend.extend(items);
        sampled = rows.map((row, i) => {
          const r = batch[i]!.req;
          const t: GenToken = sampleToken(row, { temperature: r.temperature, topP: r.topP }, batch[i]!.rng);
          if (r.topLogprobs > 0) t.top = topLogprobs(row, r.temperature === 0 ? 1 : 1 / r.temperature, r.topLogprobs);
          return [t];
        });
      }
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      for (const s of batch) this.finish(s, err);
      return;
    }
    this.stats.busyMs += performance.now() - t0;
    this.stats.calls++;
    this.stats.rowSum += batch.length;
    batch.forEach((s, i) => {
      for (const t of sampled[i]!) {
        s.tokens.push({ id: t.id, logprob: t.logprob, entropy: t.entropy, ...(t.top ? { top: t.top } : {}) });
        s.unfed = [t.id];
        s.length++;
        this.stats.generated++;
        try {
          s.req.onToken?.(t, s.tokens.length - 1);
        } catch {
          // A streaming client that went away; the request still completes (its ids are recorded).
        }
        const end = this.ended(s, t);
        if (end) {
          this.finish(s, { tokens: s.tokens, ...end });
          break;
        }
      }
    });
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

/** The k most likely ids of softmax(logits · invT), with their log-probabilities (ties to the lower id). */
export function topLogprobs(logits: Float32Array, invT: number, k: number): { id: number; logprob: number }[] {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! * invT > max) max = logits[i]! * invT;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! * invT - max);
  const lse = max + Math.log(sum);
  const best: number[] = [];
  for (let i = 0; i < logits.length; i++) {
    if (best.length < k) {
      best.push(i);
      best.sort((a, b) => logits[b]! - logits[a]! || a - b);
    } else if (logits[i]! > logits[best[k - 1]!]!) {
      best[k - 1] = i;
      best.sort((a, b) => logits[b]! - logits[a]! || a - b);
    }
  }
  return best.map((id) => ({ id, logprob: logits[id]! * invT - lse }));
}
