/**
 * Continuous batching on a stateless, HF-style KV-cache decode function.
 *
 * A decode graph of the Llama family takes, for a batch of B rows,
 *   input ids [B, T], attention mask [B, P + T], position ids [B, T],
 *   past keys/values per layer [B, Hkv, P, D]
 * and returns last-position logits [B, V] and present keys/values [B, Hkv, P + T, D].
 * `KvSlotBackend` keeps each slot's cache separately (per layer, [Hkv, len, D]) and, for each
 * `extend` call, left-pads the listed slots' caches to a common P and their new tokens to a
 * common T (mask 0 on padding), runs the function once, and keeps each row's unpadded present.
 * Sequences can therefore join and leave the batch at any step.
 */
import type { DecodeRows } from '../model/runtime';
import type { DecodeBackend } from './ports';

/**
 * A layer's keys or values: host values, or a tensor resident on the device (WebGPU: the decode
 * graph's `present` fed back as the next `past` without crossing; engine/rollout/worker-kv.ts).
 * Only the steady step passes device tensors along; everything that reads values (repacking,
 * forks, truncation) needs host arrays first (KvSlotBackend.materialize).
 */
export type KvTensor = Float32Array | DeviceKv;
/** An opaque device tensor (an ORT `gpu-buffer` tensor: never read from JS). */
export interface DeviceKv {
  readonly location: string;
  dispose(): void;
}

/** Host pasts of a decode input (the host-cache path never holds device tensors). */
export function hostPast(past: { k: KvTensor; v: KvTensor }[]): { k: Float32Array; v: Float32Array }[] {
  return past.map((l) => ({ k: hostKv(l.k), v: hostKv(l.v) }));
}

export function hostKv(a: KvTensor): Float32Array {
  if (a instanceof Float32Array) return a;
  throw new Error('KvSlotBackend: the batch KV cache is on the device; materialize() it before reading it');
}

/** A decode call's rows (input ids left-padded with `padId`), their pasts host or device tensors. */
export interface KvDecodeInput extends DecodeRows<KvTensor> {
  /** Passed through from `run` (e.g. sampling inputs). */
  extra?: unknown;
}

export interface KvDecodeOutput {
  /** Logits of each row's last position [B, V] (may be empty when the caller asked `run` for none). */
  logits: Float32Array;
  /** Tokens sampled by the decode function, if it samples. */
  sampled?: { ids: Int32Array; logprobs: Float32Array; entropy: Float32Array };
  /** Per layer: keys and values [B, Hkv, P + T, D]. */
  present: { k: KvTensor; v: KvTensor }[];
}

export type KvDecodeFn = (x: KvDecodeInput) => Promise<KvDecodeOutput>;

export interface KvShape {
  layers: number;
  kvHeads: number;
  headDim: number;
  vocabSize: number;
}

interface SlotCache {
  len: number;
  /** Per layer [Hkv, len, D]. */
  k: Float32Array[];
  v: Float32Array[];
}

interface Packed {
  /** Slot of each row (-1 once released). */
  slots: number[];
  /** Columns (S) of the batch cache and its mask [B, S]. */
  S: number;
  mask: Int32Array;
  /** Tokens in each row's cache. */
  lens: number[];
  present: { k: KvTensor; v: KvTensor }[];
}

export class KvSlotBackend implements DecodeBackend {
  readonly vocabSize: number;
  private readonly slots: (SlotCache | null)[];
  /**
   * The last call's batch cache, kept packed: when the next call decodes one token for exactly
   * the same slots (the steady state), its present is fed back as the past without unpacking
   * or repacking. Rows are unpacked into per-slot caches only when the batch changes.
   */
  private packed: Packed | null = null;
  /** Cumulative host-side time (ms): packing inputs, unpacking the batch cache, splitting logits rows; and call counts. */
  stats = { packMs: 0, unpackMs: 0, rowsMs: 0, steadyCalls: 0, repackCalls: 0 };
  constructor(
    private readonly decode: KvDecodeFn,
    private readonly shape: KvShape,
    readonly maxBatch: number,
    readonly maxLength: number,
    private readonly padId = 0,
    /** Keep the batch cache packed between calls (false: always unpack/repack, for measurements). */
    private readonly keepPacked = true,
  ) {
    this.vocabSize = shape.vocabSize;
    this.slots = new Array(maxBatch).fill(null);
  }

  /** Called with device tensors no longer referenced (a steady step's past, a materialized cache). */
  onDrop: ((t: DeviceKv[]) => void) | null = null;

  /** Called with host cache arrays no longer referenced (their memory may be reused for a later present). */
  onDropHost: ((t: Float32Array[]) => void) | null = null;

  private drop(present: { k: KvTensor; v: KvTensor }[]): void {
    const all = present.flatMap((l) => [l.k, l.v]);
    const dev = all.filter((t): t is DeviceKv => !(t instanceof Float32Array));
    if (dev.length) this.onDrop?.(dev);
    if (this.onDropHost && dev.length < all.length) this.onDropHost(all.filter((t): t is Float32Array => t instanceof Float32Array));
  }

  /** Drop the packed batch cache's device tensors (the backend is closing: nothing reads them again). */
  disposeDevice(): void {
    const p = this.packed;
    if (!p || !this.onDevice) return;
    this.packed = null;
    this.drop(p.present);
  }

  /** Whether run(items) takes the steady path (the packed batch cache fed back as it is). */
  isSteady(items: { slot: number; tokens: number[] }[]): boolean {
    const p = this.packed;
    return !!p && this.keepPacked && items.length === p.slots.length && items.every((it, b) => it.slot === p.slots[b] && it.tokens.length === 1);
  }

  /** The packed batch cache is (partly) on the device. */
  get onDevice(): boolean {
    return !!this.packed?.present.some((l) => !(l.k instanceof Float32Array) || !(l.v instanceof Float32Array));
  }

  /**
   * Bring a device-resident packed cache to the host (before a repack, fork or truncation reads
   * it); `fetch` copies one tensor back. Returns the bytes fetched.
   */
  async materialize(fetch: (t: DeviceKv) => Promise<Float32Array>): Promise<number> {
    const p = this.packed;
    if (!p || !this.onDevice) return 0;
    let bytes = 0;
    const old = p.present;
    const get = async (t: KvTensor) => {
      const h = t instanceof Float32Array ? t : await fetch(t);
      bytes += h.byteLength;
      return h;
    };
    const present: { k: KvTensor; v: KvTensor }[] = [];
    for (const l of old) present.push({ k: await get(l.k), v: await get(l.v) });
    p.present = present;
    this.drop(old);
    return bytes;
  }

  private check(items: { slot: number; tokens: number[] }[]): void {
    const seen = new Set<number>();
    for (const { slot, tokens } of items) {
      if (!Number.isInteger(slot) || slot < 0 || slot >= this.maxBatch) throw new Error(`KvSlotBackend: slot ${slot} out of range (maxBatch ${this.maxBatch})`);
      if (seen.has(slot)) throw new Error(`KvSlotBackend: slot ${slot} listed twice in one call`);
      seen.add(slot);
      if (tokens.length === 0) throw new Error(`KvSlotBackend: slot ${slot} extended with no tokens`);
    }
  }

  private slotLen(slot: number): number {
    const p = this.packed;
    if (p) {
      const b = p.slots.indexOf(slot);
      if (b >= 0) return p.lens[b]!;
    }
    return this.slots[slot]?.len ?? 0;
  }

  async extend(items: { slot: number; tokens: number[] }[]): Promise<Float32Array[]> {
    const out = await this.run(items);
    return this.rows(out.logits, items.length);
  }

  /**
   * Extend the listed slots and return the decode function's raw output (rows in item order).
   * `extra` is handed to the decode function; with `logits: false` it may return no logits.
   */
  async run(items: { slot: number; tokens: number[] }[], extra?: unknown, logits = true): Promise<KvDecodeOutput> {
    this.check(items);
    for (const { slot, tokens } of items) {
      const len = this.slotLen(slot) + tokens.length;
      if (len > this.maxLength) throw new Error(`KvSlotBackend: slot ${slot} would hold ${len} tokens > maxLength ${this.maxLength}`);
    }
    const p = this.packed;
    const out = p && this.isSteady(items) ? await this.step(items, p, extra) : (this.unpack(), await this.general(items, extra));
    this.checkOut(out, items.length, logits);
    return out;
  }

  /**
   * Slot `to` gets slot `from`'s cache (shared arrays: caches are never written in place), or,
   * with `length`, a copy of its first `length` tokens (a branch leaving the sequence earlier).
   */
  fork(from: number, to: number, length?: number): void {
    if (from === to) throw new Error(`KvSlotBackend.fork: from and to are both slot ${from}`);
    for (const s of [from, to])
      if (!Number.isInteger(s) || s < 0 || s >= this.maxBatch) throw new Error(`KvSlotBackend.fork: slot ${s} out of range (maxBatch ${this.maxBatch})`);
    if (this.slotLen(to) !== 0) throw new Error(`KvSlotBackend.fork: slot ${to} is not empty`);
    this.unpack();
    const c = this.slots[from];
    if (!c) throw new Error(`KvSlotBackend.fork: slot ${from} is empty`);
    if (length === undefined || length === c.len) {
      this.slots[to] = { len: c.len, k: c.k.slice(), v: c.v.slice() };
      return;
    }
    if (!Number.isInteger(length) || length < 1 || length > c.len)
      throw new Error(`KvSlotBackend.fork: length ${length} out of range (slot ${from} holds ${c.len} tokens)`);
    this.slots[to] = this.cut(c, length);
  }

  /**
   * Keep only the first `length` cached tokens of `slot` (several decode steps per call: the
   * tokens after a turn's end are discarded, engine.ts). New arrays: a fork's shared ones stay intact.
   */
  truncate(slot: number, length: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.maxBatch)
      throw new Error(`KvSlotBackend.truncate: slot ${slot} out of range (maxBatch ${this.maxBatch})`);
    const len = this.slotLen(slot);
    if (!Number.isInteger(length) || length < 0 || length > len)
      throw new Error(`KvSlotBackend.truncate: length ${length} out of range (slot ${slot} holds ${len} tokens)`);
    if (length === len) return;
    this.unpack();
    const c = this.slots[slot]!;
    this.slots[slot] = length === 0 ? null : this.cut(c, length);
  }

  /** A copy of the first `length` tokens of a cache. */
  private cut(c: SlotCache, length: number): SlotCache {
    const { kvHeads: Hk, headDim: D } = this.shape;
    const cut = (a: Float32Array) => {
      const out = new Float32Array(Hk * length * D);
      for (let h = 0; h < Hk; h++) out.set(a.subarray(h * c.len * D, (h * c.len + length) * D), h * length * D);
      return out;
    };
    return { len: length, k: c.k.map(cut), v: c.v.map(cut) };
  }

  /** Steady state: one token for each row of the packed batch. */
  private async step(items: { slot: number; tokens: number[] }[], p: Packed, extra: unknown): Promise<KvDecodeOutput> {
    const t0 = performance.now();
    const B = items.length;
    const P = p.S;
    const S = P + 1;
    const inputIds = Int32Array.from(items, (it) => it.tokens[0]!);
    const positionIds = Int32Array.from(p.lens);
    const attentionMask = new Int32Array(B * S);
    for (let b = 0; b < B; b++) {
      attentionMask.set(p.mask.subarray(b * P, (b + 1) * P), b * S);
      attentionMask[b * S + P] = 1;
    }
    this.stats.packMs += performance.now() - t0;
    this.stats.steadyCalls++;
    const out = await this.decode({ batch: B, newLength: 1, pastLength: P, inputIds, attentionMask, positionIds, past: p.present, extra });
    this.checkPresent(out);
    this.drop(p.present);
    this.packed = { slots: p.slots, S, mask: attentionMask, lens: p.lens.map((l) => l + 1), present: out.present };
    return out;
  }

  private async general(items: { slot: number; tokens: number[] }[], extra: unknown): Promise<KvDecodeOutput> {
    const t0 = performance.now();
    const { layers, kvHeads: Hk, headDim: D } = this.shape;
    const B = items.length;
    const caches = items.map(({ slot }) => this.slots[slot] ?? { len: 0, k: [], v: [] });
    const P = Math.max(...caches.map((c) => c.len));
    const T = Math.max(...items.map((i) => i.tokens.length));
    const S = P + T;
    const inputIds = new Int32Array(B * T).fill(this.padId);
    const positionIds = new Int32Array(B * T);
    const attentionMask = new Int32Array(B * S);
    items.forEach(({ tokens }, b) => {
      const c = caches[b]!;
      for (let j = 0; j < c.len; j++) attentionMask[b * S + (P - c.len) + j] = 1;
      const off = T - tokens.length;
      for (let j = 0; j < tokens.length; j++) {
        inputIds[b * T + off + j] = tokens[j]!;
        positionIds[b * T + off + j] = c.len + j;
        attentionMask[b * S + P + off + j] = 1;
      }
    });
    const past = Array.from({ length: layers }, (_, l) => {
      const k = new Float32Array(B * Hk * P * D);
      const v = new Float32Array(B * Hk * P * D);
      if (P > 0)
        caches.forEach((c, b) => {
          if (c.len === 0) return;
          for (let h = 0; h < Hk; h++) {
            const dst = ((b * Hk + h) * P + (P - c.len)) * D;
            k.set(c.k[l]!.subarray(h * c.len * D, (h + 1) * c.len * D), dst);
            v.set(c.v[l]!.subarray(h * c.len * D, (h + 1) * c.len * D), dst);
          }
        });
      return { k, v };
    });
    this.stats.packMs += performance.now() - t0;
    this.stats.repackCalls++;
    const out = await this.decode({ batch: B, newLength: T, pastLength: P, inputIds, attentionMask, positionIds, past, extra });
    this.checkPresent(out);
    for (const { slot } of items) this.slots[slot] = null;
    this.packed = {
      slots: items.map((i) => i.slot),
      S,
      mask: attentionMask,
      lens: items.map((it, b) => caches[b]!.len + it.tokens.length),
      present: out.present,
    };
    return out;
  }

  /** Move every live row of the packed batch into its slot's own cache (gathering masked columns). */
  private unpack(): void {
    const p = this.packed;
    if (!p) return;
    const t0 = performance.now();
    this.packed = null;
    const { layers, kvHeads: Hk, headDim: D } = this.shape;
    const S = p.S;
    p.slots.forEach((slot, b) => {
      if (slot < 0) return;
      const cols: number[] = [];
      for (let j = 0; j < S; j++) if (p.mask[b * S + j]) cols.push(j);
      const len = cols.length;
      const c: SlotCache = { len, k: [], v: [] };
      for (let l = 0; l < layers; l++) {
        const pk = hostKv(p.present[l]!.k);
        const pv = hostKv(p.present[l]!.v);
        const nk = new Float32Array(Hk * len * D);
        const nv = new Float32Array(Hk * len * D);
        for (let h = 0; h < Hk; h++) {
          const row = (b * Hk + h) * S * D;
          // Copy runs of consecutive columns at once.
          let i = 0;
          while (i < len) {
            let j = i;
            while (j + 1 < len && cols[j + 1] === cols[j]! + 1) j++;
            const src = row + cols[i]! * D;
            const n = (j - i + 1) * D;
            nk.set(pk.subarray(src, src + n), (h * len + i) * D);
            nv.set(pv.subarray(src, src + n), (h * len + i) * D);
            i = j + 1;
          }
        }
        c.k.push(nk);
        c.v.push(nv);
      }
      this.slots[slot] = c;
    });
    this.drop(p.present); // every live row was copied out
    this.stats.unpackMs += performance.now() - t0;
  }

  private checkPresent(out: KvDecodeOutput): void {
    if (out.present.length !== this.shape.layers) throw new Error(`decode graph returned ${out.present.length} present layers, expected ${this.shape.layers}`);
  }

  private checkOut(out: KvDecodeOutput, B: number, logits: boolean): void {
    if (logits && out.logits.length !== B * this.shape.vocabSize)
      throw new Error(`decode graph returned logits of ${out.logits.length} values, expected [${B}, ${this.shape.vocabSize}]`);
    if (out.sampled && out.sampled.ids.length !== B) throw new Error(`decode graph sampled ${out.sampled.ids.length} tokens for ${B} rows`);
  }

  private rows(logits: Float32Array, B: number): Float32Array[] {
    const t0 = performance.now();
    const V = this.shape.vocabSize;
    const rows = Array.from({ length: B }, (_, b) => logits.slice(b * V, (b + 1) * V));
    this.stats.rowsMs += performance.now() - t0;
    return rows;
  }

  release(slot: number): void {
    this.slots[slot] = null;
    const p = this.packed;
    if (p) {
      const b = p.slots.indexOf(slot);
      if (b >= 0) p.slots = p.slots.map((s, i) => (i === b ? -1 : s));
    }
  }
}
