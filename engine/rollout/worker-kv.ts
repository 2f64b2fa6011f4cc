/**
 * The KV cache kept where the decode graph runs: a KvSlotBackend inside the ORT worker thread.
 *
 * Before, every decode step structured-cloned the whole batch KV cache to the worker (the past
 * inputs) and moved the present back, and the engine's thread sampled from [B, V] logits in JS;
 * at batch 64 on a 25M model that was ~60% of a step (docs/BENCHMARKS.md, bench:rollout
 * breakdown). Now the worker hosts the slot caches (`KvHost`: the same KvSlotBackend, with the
 * decode graph's present fed straight back as the next past), a call carries only token ids and
 * per-row sampling inputs, and the graph's sampling head returns token, logprob and entropy
 * (logits only when asked, e.g. for top-k/top-p, which the engine still samples in JS).
 *
 * Main side: `WorkerKvBackend` (a DecodeBackend with `extendSample` and `fork`).
 * Worker side: `KvHost`, created on a `kvOpen` message by this module's attachWorkerHandler,
 * which the ORT worker loads on the first use (engine/tensor/ort-worker.ts knows no rollout code).
 */
import { KvSlotBackend, type DeviceKv, type KvDecodeFn, type KvShape, type KvTensor } from './kv-slots';
import type { DecodeBackend, SampleRequest } from './ports';
import type { HostTensor } from '../tensor/host';
import type { OrtRunner } from '../tensor/ort';
import type { WorkerApi, WorkerHandler, WorkerValue } from '../tensor/ort-worker';
import { buildAttentionBias, sampleFeeds } from '../model/graphs';

export interface KvHostSpec extends KvShape {
  maxBatch: number;
  maxLength: number;
  padId: number;
}

export interface KvExtendRequest {
  items: { slot: number; tokens: number[] }[];
  sample?: SampleRequest;
  logits: boolean;
  /**
   * Decode steps in this message (default 1): after the first, each item is fed the token it
   * just sampled and samples again (sample.u holds steps × B uniforms, step-major; no logits).
   */
  steps?: number;
}

/** Bytes that crossed between host and device during a call (WebGPU; zero on the CPU). */
export interface KvCrossing {
  /** Host → device in all (token ids, positions, attention bias, sampling inputs, any host KV cache, weights uploaded). */
  toDevice: number;
  /** Device → host in all (sampled ids, logprobs, entropies, logits when asked, KV cache brought back). */
  toHost: number;
  /** Of which KV cache, each way. */
  kvToDevice: number;
  kvToHost: number;
  /** Decode runs in the call, and of those the steady ones (the device cache fed back as it is). */
  runs: number;
  steadyRuns: number;
}

export const emptyCrossing = (): KvCrossing => ({ toDevice: 0, toHost: 0, kvToDevice: 0, kvToHost: 0, runs: 0, steadyRuns: 0 });

export interface KvExtendResult {
  /** [steps × B], step-major (as logprobs, entropy). */
  ids: Int32Array;
  logprobs: Float32Array;
  entropy: Float32Array;
  logits?: Float32Array;
  /** Worker-side time: packing inputs / the cache and building feeds, and session.run. */
  prepMs: number;
  runMs: number;
  crossing: KvCrossing;
}

/**
 * The cache extended by T new positions: past [R, P, hd] and fresh [R, T, hd] (R = batch × KV
 * heads) → [R, P + T, hd], each row's past followed by its new keys or values.
 */
export function appendKv(
  past: Float32Array | undefined,
  fresh: Float32Array,
  rows: number,
  P: number,
  T: number,
  hd: number,
  alloc: (n: number) => Float32Array = (n) => new Float32Array(n),
): Float32Array {
  if (!P || !past) return fresh;
  const out = alloc(rows * (P + T) * hd);
  const p = P * hd,
    t = T * hd;
  for (let r = 0; r < rows; r++) {
    out.set(past.subarray(r * p, (r + 1) * p), r * (p + t));
    out.set(fresh.subarray(r * t, (r + 1) * t), r * (p + t) + p);
  }
  return out;
}

/**
 * Cache arrays to reuse: a present grows by one position per step and the previous one is dropped
 * right after (KvSlotBackend.onDropHost), so two buffers per layer's keys and values alternate
 * instead of a fresh allocation per step, whose page faults cost more than the copy. Buffers are
 * made with a quarter of headroom so a few steps' growth fits; a request takes the smallest free
 * buffer that holds it and is at most twice its size.
 */
export class KvBufferPool {
  private free: ArrayBuffer[] = [];
  /** Buffers this pool made: only those come back (an output array of ORT's may share its buffer with others). */
  private readonly own = new WeakSet<ArrayBuffer>();
  constructor(private readonly max = 64) {}
  take(n: number): Float32Array {
    const need = n * 4;
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const b = this.free[i]!.byteLength;
      if (b >= need && b <= 2 * need && (best < 0 || b < this.free[best]!.byteLength)) best = i;
    }
    if (best >= 0) return new Float32Array(this.free.splice(best, 1)[0]!, 0, n);
    const buf = new ArrayBuffer(Math.ceil(n * 1.25) * 4);
    this.own.add(buf);
    return new Float32Array(buf, 0, n);
  }
  give(arrays: Float32Array[]): void {
    for (const a of arrays) {
      const buf = a.buffer as ArrayBuffer;
      if (!this.own.has(buf) || this.free.includes(buf)) continue;
      this.free.push(buf);
      if (this.free.length > this.max) this.free.shift();
    }
  }
}

/**
 * Worker side: slot caches next to the session. On the WebGPU provider the decode session's
 * `present` and `logits` outputs stay on the device: a steady step feeds the previous present
 * back as its past without a copy, so per step only token ids, positions, the attention bias
 * and sampling inputs go in and ids, logprobs and entropies come out. The cache comes to the host
 * only when the batch changes (a row joins or leaves, a fork, a truncation).
 */
export class KvHost {
  private readonly backend: KvSlotBackend;
  private runMs = 0;
  private crossing = emptyCrossing();
  private readonly device: boolean;
  private readonly pool = new KvBufferPool();
  constructor(
    readonly spec: KvHostSpec,
    private readonly api: WorkerApi,
    sid: number,
  ) {
    const L = spec.layers;
    this.device = api.onDevice(sid);
    const decode: KvDecodeFn = async (x) => {
      const { batch: B, newLength: T, pastLength: P } = x;
      const S = P + T;
      const req = x.extra as { sample?: SampleRequest; logits: boolean };
      const feeds: Record<string, WorkerValue> = {
        input_ids: { dtype: 'int32', shape: [B, T], data: x.inputIds },
        position_ids: { dtype: 'int32', shape: [B, T], data: x.positionIds },
        attn_bias: { dtype: 'float32', shape: [B, 1, T, S], data: buildAttentionBias(x.attentionMask, B, T, S) },
        ...sampleFeeds(B, req.sample),
      };
      const kvShape = [B, spec.kvHeads, P, spec.headDim];
      // A session with device outputs must fetch the same outputs every run (ORT: "Output count mismatch").
      const outputs = ['token', 'token_logprob', 'token_entropy'];
      if (req.logits || this.device) outputs.push('logits');
      const kvFeed = (t: KvTensor | undefined): WorkerValue => {
        if (t === undefined) return { dtype: 'float32', shape: kvShape, data: new Float32Array(0) };
        if (t instanceof Float32Array) {
          if (this.device) this.crossing.kvToDevice += t.byteLength;
          return { dtype: 'float32', shape: kvShape, data: t };
        }
        return t as unknown as WorkerValue;
      };
      // On the CPU the session gives back only the new tokens' keys and values (DecodeVariant.kvOut
      // 'new') and the present is assembled here: fetching the whole present from ORT cost an
      // allocation and a copy of the cache per step in the binding, on top of the kernel's own.
      const kvOut = this.device ? 'present' : 'new';
      for (let i = 0; i < L; i++) {
        feeds[`past_k_${i}`] = kvFeed(x.past[i]?.k);
        feeds[`past_v_${i}`] = kvFeed(x.past[i]?.v);
        outputs.push(`${kvOut}_k_${i}`, `${kvOut}_v_${i}`);
      }
      const t = performance.now();
      const out = await api.run(sid, feeds, outputs, this.crossing);
      this.runMs += performance.now() - t;
      this.crossing.runs++;
      if (P > 0 && x.past.every((l) => !(l.k instanceof Float32Array))) this.crossing.steadyRuns++;
      let logits: Float32Array = new Float32Array(0);
      const lg = out.logits;
      if (lg && 'location' in lg && lg.location === 'gpu-buffer') {
        if (req.logits) logits = (await api.toHost(lg as never, this.crossing)).data as Float32Array;
        (lg as unknown as DeviceKv).dispose();
      } else if (lg) logits = (lg as HostTensor).data as Float32Array;
      const host = (name: string) => (out[name] as HostTensor).data;
      const kv = (i: number, kind: 'k' | 'v'): KvTensor => {
        if (kvOut === 'new') {
          const past = x.past[i]?.[kind] as Float32Array | undefined;
          return appendKv(past, host(`new_${kind}_${i}`) as Float32Array, B * spec.kvHeads, P, T, spec.headDim, (n) => this.pool.take(n));
        }
        const v = out[`present_${kind}_${i}`]!;
        return 'location' in v && v.location === 'gpu-buffer' ? (v as unknown as DeviceKv) : ((v as HostTensor).data as Float32Array);
      };
      return {
        logits,
        sampled: { ids: host('token') as Int32Array, logprobs: host('token_logprob') as Float32Array, entropy: host('token_entropy') as Float32Array },
        present: Array.from({ length: L }, (_, i) => ({ k: kv(i, 'k'), v: kv(i, 'v') })),
      };
    };
    this.backend = new KvSlotBackend(decode, spec, spec.maxBatch, spec.maxLength, spec.padId);
    this.backend.onDrop = (ts) => ts.forEach((t) => t.dispose());
    if (!this.device) this.backend.onDropHost = (ts) => this.pool.give(ts);
  }

  /** Bring a device-resident batch cache to the host (before a repack, fork or truncation). */
  private async materialize(): Promise<void> {
    if (!this.backend.onDevice) return;
    this.crossing.kvToHost += await this.backend.materialize(async (t) => (await this.api.toHost(t as never, this.crossing)).data as Float32Array);
  }

  async extend(req: KvExtendRequest): Promise<KvExtendResult> {
    const t = performance.now();
    this.runMs = 0;
    const steps = req.steps ?? 1;
    const B = req.items.length;
    if (!Number.isInteger(steps) || steps < 1) throw new Error(`KvHost: steps must be an integer ≥ 1 (got ${steps})`);
    if (req.sample && req.sample.u.length !== steps * B)
      throw new Error(`KvHost: ${req.sample.u.length} uniforms for ${steps} step(s) of ${B} rows (want ${steps * B})`);
    if (!this.backend.isSteady(req.items)) await this.materialize();
    if (steps > 1) {
      if (req.logits || !req.sample) throw new Error('KvHost: several decode steps per call need sampling in the graph (no logits)');
      // Steps 2..K: every row fed its own sampled token, in the same batch (KvSlotBackend's steady path).
      const ids = new Int32Array(steps * B);
      const logprobs = new Float32Array(steps * B);
      const entropy = new Float32Array(steps * B);
      let items = req.items;
      for (let k = 0; k < steps; k++) {
        const sample = { u: req.sample.u.slice(k * B, (k + 1) * B), invTemp: req.sample.invTemp, greedy: req.sample.greedy };
        const o = (await this.backend.run(items, { sample, logits: false }, false)).sampled!;
        ids.set(o.ids, k * B);
        logprobs.set(o.logprobs, k * B);
        entropy.set(o.entropy, k * B);
        items = req.items.map((it, b) => ({ slot: it.slot, tokens: [o.ids[b]!] }));
      }
      return { ids, logprobs, entropy, prepMs: performance.now() - t - this.runMs, runMs: this.runMs, crossing: this.takeCrossing() };
    }
    const out = await this.backend.run(req.items, { sample: req.sample, logits: req.logits }, req.logits);
    const s = out.sampled!;
    return {
      ids: s.ids,
      logprobs: s.logprobs,
      entropy: s.entropy,
      ...(req.logits ? { logits: out.logits } : {}),
      prepMs: performance.now() - t - this.runMs,
      runMs: this.runMs,
      crossing: this.takeCrossing(),
    };
  }

  /** Bytes crossed since the last call returned (a fork's or truncation's fetch counts with the next call). */
  private takeCrossing(): KvCrossing {
    const c = this.crossing;
    this.crossing = emptyCrossing();
    return c;
  }

  release(slot: number): void {
    this.backend.release(slot);
  }

  async fork(from: number, to: number, length?: number): Promise<void> {
    await this.materialize();
    this.backend.fork(from, to, length);
  }

  async truncate(slot: number, length: number): Promise<void> {
    await this.materialize();
    this.backend.truncate(slot, length);
  }

  /**
   * Dispose the device tensors, without a device run: the model may terminate the worker right
   * after (kvClose has no reply), and terminating a worker during an ORT run aborts the process.
   */
  close(): void {
    this.backend.disposeDevice();
  }
}

/**
 * The worker side's message handler (loaded into the ORT worker by WorkerKvBackend through
 * OrtWorker.loadHandler; engine/tensor/ort-worker.ts runs its messages one at a time, in order).
 */
export function attachWorkerHandler(api: WorkerApi): WorkerHandler {
  const hosts = new Map<number, KvHost>();
  /** Errors of fire-and-forget messages (release, fork, truncate), reported at the next extend. */
  const errors = new Map<number, Error>();
  let next = 1;
  const now = () => performance.timeOrigin + performance.now();
  return {
    prefix: 'kv',
    async handle(m: { type: string; id?: number; session: number } & Record<string, unknown>) {
      const r0 = now();
      const handle = m.handle as number | undefined;
      try {
        if (m.type === 'kvOpen') {
          const h = next++;
          hosts.set(h, new KvHost(m.spec as KvHostSpec, api, m.session));
          return api.reply(m.id, { handle: h });
        }
        const host = hosts.get(handle!);
        if (!host) throw new Error(`KV host ${handle} is not open in this worker`);
        if (m.type === 'kvRelease') return host.release(m.slot as number);
        if (m.type === 'kvFork') return await host.fork(m.from as number, m.to as number, m.length as number | undefined);
        if (m.type === 'kvTruncate') return await host.truncate(m.slot as number, m.length as number);
        if (m.type === 'kvClose') {
          hosts.delete(handle!);
          return host.close();
        }
        if (m.type === 'kvExtend') {
          const pendingErr = errors.get(handle!);
          if (pendingErr) {
            errors.delete(handle!);
            throw pendingErr;
          }
          const res = await host.extend(m.req as KvExtendRequest);
          const r3 = now();
          const transfer = [res.ids.buffer, res.logprobs.buffer, res.entropy.buffer, ...(res.logits ? [res.logits.buffer] : [])].filter(
            (b): b is ArrayBuffer => b instanceof ArrayBuffer,
          );
          return api.reply(m.id, res, [...new Set(transfer)], {
            received: r0,
            feedsMs: res.prepMs,
            runMs: res.runMs,
            outputsMs: r3 - r0 - res.prepMs - res.runMs,
            sent: r3,
            toDevice: res.crossing.toDevice,
            toHost: res.crossing.toHost,
          });
        }
        throw new Error(`unknown worker message ${m.type}`);
      } catch (e) {
        const err = e instanceof Error ? e : new Error(String(e));
        if (m.id !== undefined) api.replyError(m.id, err);
        else if (handle !== undefined) errors.set(handle, err);
      }
    },
  };
}

const HANDLER_MODULE = new URL(import.meta.url).href;

/** Main side: a DecodeBackend whose caches live in the decode session's worker. */
export class WorkerKvBackend implements DecodeBackend {
  readonly vocabSize: number;
  readonly maxBatch: number;
  readonly maxLength: number;
  private runner: OrtRunner | null = null;
  private handle = -1;
  private opening: Promise<void> | null = null;
  /** Calls that failed in the worker leave it as it was; a release/fork error surfaces at the next call. */
  private deferred: Error | null = null;
  /** extend / extendSample calls so far. */
  calls = 0;
  /** Bytes that crossed between host and device, summed over calls (WebGPU; see KvCrossing). */
  crossing: KvCrossing = emptyCrossing();

  constructor(
    /** The decode session's runner with the current weights sent (called before every call). */
    private readonly prepare: () => Promise<OrtRunner>,
    private readonly spec: KvHostSpec,
  ) {
    this.vocabSize = spec.vocabSize;
    this.maxBatch = spec.maxBatch;
    this.maxLength = spec.maxLength;
  }

  private async ready(): Promise<OrtRunner> {
    const r = await this.prepare();
    if (r !== this.runner) {
      this.runner = r;
      this.opening = r
        .loadHandler(HANDLER_MODULE)
        .then(() => r.request<{ handle: number }>({ type: 'kvOpen', spec: this.spec }))
        .then((x) => {
          this.handle = x.handle;
        });
    }
    await this.opening;
    if (this.deferred) {
      const e = this.deferred;
      this.deferred = null;
      throw e;
    }
    return r;
  }

  private count(res: KvExtendResult): KvExtendResult {
    for (const k of Object.keys(this.crossing) as (keyof KvCrossing)[]) this.crossing[k] += res.crossing[k];
    return res;
  }

  private check(items: { slot: number; tokens: number[] }[]): void {
    for (const { slot, tokens } of items) {
      if (!Number.isInteger(slot) || slot < 0 || slot >= this.maxBatch)
        throw new Error(`WorkerKvBackend: slot ${slot} out of range (maxBatch ${this.maxBatch})`);
      if (tokens.length === 0) throw new Error(`WorkerKvBackend: slot ${slot} extended with no tokens`);
    }
  }

  async extend(items: { slot: number; tokens: number[] }[]): Promise<Float32Array[]> {
    this.check(items);
    const r = await this.ready();
    this.calls++;
    const res = this.count(await r.request<KvExtendResult>({ type: 'kvExtend', handle: this.handle, req: { items, logits: true } satisfies KvExtendRequest }));
    const V = this.vocabSize;
    return items.map((_, b) => res.logits!.slice(b * V, (b + 1) * V));
  }

  async extendSample(items: { slot: number; tokens: number[] }[], sample: SampleRequest): Promise<{ id: number; logprob: number; entropy: number }[]> {
    this.check(items);
    const r = await this.ready();
    this.calls++;
    const res = this.count(
      await r.request<KvExtendResult>({ type: 'kvExtend', handle: this.handle, req: { items, sample, logits: false } satisfies KvExtendRequest }),
    );
    return items.map((_, b) => ({ id: res.ids[b]!, logprob: res.logprobs[b]!, entropy: res.entropy[b]! }));
  }

  async extendSampleSteps(
    items: { slot: number; tokens: number[] }[],
    sample: SampleRequest,
    steps: number,
  ): Promise<{ id: number; logprob: number; entropy: number }[][]> {
    this.check(items);
    const r = await this.ready();
    this.calls++;
    const res = this.count(
      await r.request<KvExtendResult>({
        type: 'kvExtend',
        handle: this.handle,
        req: { items, sample, logits: false, steps } satisfies KvExtendRequest,
      }),
    );
    const B = items.length;
    return items.map((_, b) =>
      Array.from({ length: steps }, (_, k) => ({ id: res.ids[k * B + b]!, logprob: res.logprobs[k * B + b]!, entropy: res.entropy[k * B + b]! })),
    );
  }

  truncate(slot: number, length: number): void {
    if (!this.runner || this.handle < 0) throw new Error(`WorkerKvBackend.truncate: slot ${slot} is empty (nothing decoded yet)`);
    this.runner.post({ type: 'kvTruncate', handle: this.handle, slot, length });
  }

  release(slot: number): void {
    // Posted synchronously so it reaches the worker before any later call reuses the slot.
    if (this.runner && this.handle >= 0) this.runner.post({ type: 'kvRelease', handle: this.handle, slot });
  }

  fork(from: number, to: number, length?: number): void {
    if (!this.runner || this.handle < 0) throw new Error(`WorkerKvBackend.fork: slot ${from} is empty (nothing decoded yet)`);
    this.runner.post({ type: 'kvFork', handle: this.handle, from, to, ...(length !== undefined ? { length } : {}) });
  }

  async close(): Promise<void> {
    if (this.runner && this.handle >= 0) this.runner.post({ type: 'kvClose', handle: this.handle });
    this.handle = -1;
    this.runner = null;
  }
}

/**
 * Data-parallel decoding: several decode sessions, each in its own worker with its own slot
 * caches (a WorkerKvBackend per shard), behind one DecodeBackend. A slot is placed on a shard
 * when it is first extended (the shard with the fewest live slots) or forked (the source's
 * shard, so a fork never crosses workers) and stays there until released. Each call splits its
 * items by shard and runs the shards at the same time.
 *
 * Why: on a small model a decode step is hundreds of tiny ops, and splitting each op over
 * threads costs more in synchronisation than it gains (bench:rollout, docs/BENCHMARKS.md); one
 * thread per session and one session per core keeps every core busy without that. Each row's
 * result does not depend on which rows share its batch, so tokens and logprobs are those of one
 * session (tested in golden.test.ts).
 */
export class ShardedKvBackend implements DecodeBackend {
  readonly vocabSize: number;
  readonly maxBatch: number;
  readonly maxLength: number;
  /** Per slot: its shard and the shard-local slot, or null when empty. */
  private readonly where: ({ shard: number; local: number } | null)[];
  private readonly used: boolean[][];
  private readonly live: number[];

  constructor(private readonly shards: WorkerKvBackend[]) {
    if (shards.length < 1) throw new Error('ShardedKvBackend: no shards');
    const s0 = shards[0]!;
    this.vocabSize = s0.vocabSize;
    this.maxBatch = s0.maxBatch;
    this.maxLength = s0.maxLength;
    this.where = new Array(this.maxBatch).fill(null);
    this.used = shards.map(() => new Array(this.maxBatch).fill(false));
    this.live = shards.map(() => 0);
  }

  /** Calls each shard has served. */
  get shardCalls(): number[] {
    return this.shards.map((s) => s.calls);
  }

  private checkSlot(slot: number, what: string): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.maxBatch)
      throw new Error(`ShardedKvBackend${what}: slot ${slot} out of range (maxBatch ${this.maxBatch})`);
  }

  private place(slot: number, shard: number): { shard: number; local: number } {
    const local = this.used[shard]!.indexOf(false);
    this.used[shard]![local] = true;
    this.live[shard]!++;
    const w = { shard, local };
    this.where[slot] = w;
    return w;
  }

  /** Items grouped by shard (placing slots seen for the first time on the least-loaded shard). */
  private split(items: { slot: number; tokens: number[] }[]): { shard: number; idx: number[]; items: { slot: number; tokens: number[] }[] }[] {
    const groups = this.shards.map((_, shard) => ({ shard, idx: [] as number[], items: [] as { slot: number; tokens: number[] }[] }));
    items.forEach(({ slot, tokens }, i) => {
      this.checkSlot(slot, '');
      let w = this.where[slot];
      if (!w) {
        let best = 0;
        for (let k = 1; k < this.shards.length; k++) if (this.live[k]! < this.live[best]!) best = k;
        w = this.place(slot, best);
      }
      groups[w.shard]!.idx.push(i);
      groups[w.shard]!.items.push({ slot: w.local, tokens });
    });
    return groups.filter((g) => g.items.length > 0);
  }

  async extend(items: { slot: number; tokens: number[] }[]): Promise<Float32Array[]> {
    const groups = this.split(items);
    const out: Float32Array[] = new Array(items.length);
    await Promise.all(
      groups.map(async (g) => {
        const rows = await this.shards[g.shard]!.extend(g.items);
        g.idx.forEach((i, j) => (out[i] = rows[j]!));
      }),
    );
    return out;
  }

  async extendSample(items: { slot: number; tokens: number[] }[], sample: SampleRequest): Promise<{ id: number; logprob: number; entropy: number }[]> {
    const groups = this.split(items);
    const out: { id: number; logprob: number; entropy: number }[] = new Array(items.length);
    const pick = (a: Float32Array, idx: number[]) => Float32Array.from(idx, (i) => a[i]!);
    await Promise.all(
      groups.map(async (g) => {
        const req = { u: pick(sample.u, g.idx), invTemp: pick(sample.invTemp, g.idx), greedy: pick(sample.greedy, g.idx) };
        const rows = await this.shards[g.shard]!.extendSample(g.items, req);
        g.idx.forEach((i, j) => (out[i] = rows[j]!));
      }),
    );
    return out;
  }

  async extendSampleSteps(
    items: { slot: number; tokens: number[] }[],
    sample: SampleRequest,
    steps: number,
  ): Promise<{ id: number; logprob: number; entropy: number }[][]> {
    const groups = this.split(items);
    const B = items.length;
    const out: { id: number; logprob: number; entropy: number }[][] = new Array(items.length);
    const pick = (a: Float32Array, idx: number[]) => Float32Array.from(idx, (i) => a[i]!);
    await Promise.all(
      groups.map(async (g) => {
        // Uniforms stay step-major within the shard: u[k·b_g + j] = u[k·B + idx[j]].
        const u = new Float32Array(steps * g.idx.length);
        for (let k = 0; k < steps; k++) g.idx.forEach((i, j) => (u[k * g.idx.length + j] = sample.u[k * B + i]!));
        const rows = await this.shards[g.shard]!.extendSampleSteps(
          g.items,
          { u, invTemp: pick(sample.invTemp, g.idx), greedy: pick(sample.greedy, g.idx) },
          steps,
        );
        g.idx.forEach((i, j) => (out[i] = rows[j]!));
      }),
    );
    return out;
  }

  truncate(slot: number, length: number): void {
    this.checkSlot(slot, '.truncate');
    const w = this.where[slot];
    if (!w) throw new Error(`ShardedKvBackend.truncate: slot ${slot} is empty`);
    this.shards[w.shard]!.truncate(w.local, length);
  }

  release(slot: number): void {
    this.checkSlot(slot, '.release');
    const w = this.where[slot];
    if (!w) return;
    this.shards[w.shard]!.release(w.local);
    this.used[w.shard]![w.local] = false;
    this.live[w.shard]!--;
    this.where[slot] = null;
  }

  fork(from: number, to: number, length?: number): void {
    this.checkSlot(from, '.fork');
    this.checkSlot(to, '.fork');
    const src = this.where[from];
    if (!src) throw new Error(`ShardedKvBackend.fork: slot ${from} is empty`);
    if (this.where[to]) throw new Error(`ShardedKvBackend.fork: slot ${to} is not empty`);
    const dst = this.place(to, src.shard);
    this.shards[src.shard]!.fork(src.local, dst.local, length);
  }

  async close(): Promise<void> {
    await Promise.all(this.shards.map((s) => s.close()));
  }
}
