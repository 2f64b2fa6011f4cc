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
import type { DecodeBackend } from './ports';

export interface KvDecodeInput {
  batch: number;
  /** New tokens per row (T); rows are left-padded with `padId`. */
  newLength: number;
  /** Past length per row (P); pasts are left-padded. */
  pastLength: number;
  inputIds: Int32Array; // [B, T]
  attentionMask: Int32Array; // [B, P + T]
  positionIds: Int32Array; // [B, T]
  /** Per layer: keys and values [B, Hkv, P, D]. */
  past: { k: Float32Array; v: Float32Array }[];
}

export interface KvDecodeOutput {
  /** Logits of each row's last position [B, V]. */
  logits: Float32Array;
  /** Per layer: keys and values [B, Hkv, P + T, D]. */
  present: { k: Float32Array; v: Float32Array }[];
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

export class KvSlotBackend implements DecodeBackend {
  readonly vocabSize: number;
  private readonly slots: (SlotCache | null)[];
  constructor(
    private readonly decode: KvDecodeFn,
    private readonly shape: KvShape,
    readonly maxBatch: number,
    readonly maxLength: number,
    private readonly padId = 0,
  ) {
    this.vocabSize = shape.vocabSize;
    this.slots = new Array(maxBatch).fill(null);
  }

  async extend(items: { slot: number; tokens: number[] }[]): Promise<Float32Array[]> {
    const { layers, kvHeads: Hk, headDim: D, vocabSize: V } = this.shape;
    const B = items.length;
    const caches = items.map(({ slot, tokens }) => {
      if (slot < 0 || slot >= this.maxBatch) throw new Error(`KvSlotBackend: slot ${slot} out of range (maxBatch ${this.maxBatch})`);
      if (tokens.length === 0) throw new Error(`KvSlotBackend: slot ${slot} extended with no tokens`);
      const c = this.slots[slot] ?? { len: 0, k: [], v: [] };
      if (c.len + tokens.length > this.maxLength) throw new Error(`KvSlotBackend: slot ${slot} would hold ${c.len + tokens.length} tokens > maxLength ${this.maxLength}`);
      return c;
    });
    const P = Math.max(...caches.map((c) => c.len));
    const T = Math.max(...items.map((i) => i.tokens.length));
    const inputIds = new Int32Array(B * T).fill(this.padId);
    const positionIds = new Int32Array(B * T);
    const attentionMask = new Int32Array(B * (P + T));
    items.forEach(({ tokens }, b) => {
      const c = caches[b]!;
      for (let j = 0; j < c.len; j++) attentionMask[b * (P + T) + (P - c.len) + j] = 1;
      const off = T - tokens.length;
      for (let j = 0; j < tokens.length; j++) {
        inputIds[b * T + off + j] = tokens[j]!;
        positionIds[b * T + off + j] = c.len + j;
        attentionMask[b * (P + T) + P + off + j] = 1;
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
    const out = await this.decode({ batch: B, newLength: T, pastLength: P, inputIds, attentionMask, positionIds, past });
    if (out.logits.length !== B * V) throw new Error(`decode graph returned logits of ${out.logits.length} values, expected [${B}, ${V}]`);
    const S = P + T;
    items.forEach(({ slot, tokens }, b) => {
      const c = caches[b]!;
      const len = c.len + tokens.length;
      const next: SlotCache = { len, k: [], v: [] };
      // Row b's real positions in the present are: its past at [P - c.len, P) and its tokens at [P + T - n, P + T).
      for (let l = 0; l < layers; l++) {
        const pk = out.present[l]!.k;
        const pv = out.present[l]!.v;
        const nk = new Float32Array(Hk * len * D);
        const nv = new Float32Array(Hk * len * D);
        for (let h = 0; h < Hk; h++) {
          const row = (b * Hk + h) * S * D;
          const dst = h * len * D;
          nk.set(pk.subarray(row + (P - c.len) * D, row + P * D), dst);
          nv.set(pv.subarray(row + (P - c.len) * D, row + P * D), dst);
          nk.set(pk.subarray(row + (S - tokens.length) * D, row + S * D), dst + c.len * D);
          nv.set(pv.subarray(row + (S - tokens.length) * D, row + S * D), dst + c.len * D);
        }
        next.k.push(nk);
        next.v.push(nv);
      }
      this.slots[slot] = next;
    });
    return items.map((_, b) => out.logits.slice(b * V, (b + 1) * V));
  }

  release(slot: number): void {
    this.slots[slot] = null;
  }
}
