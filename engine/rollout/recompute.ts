/**
 * A DecodeBackend without a KV cache: every call recomputes the full forward pass of each
 * slot's whole sequence and keeps only the last position's logits. It is the baseline the
 * benchmark measures the KV-cache decoder against, and a reference for decoder tests.
 */
import type { DecodeBackend } from './ports';

/** Full forward over a batch of sequences → logits of each sequence's last position. */
export type LastLogitsForward = (sequences: number[][]) => Promise<Float32Array[]>;

export class RecomputeBackend implements DecodeBackend {
  private readonly seqs: number[][];
  constructor(
    private readonly forward: LastLogitsForward,
    readonly vocabSize: number,
    readonly maxBatch: number,
    readonly maxLength: number,
  ) {
    this.seqs = Array.from({ length: maxBatch }, () => []);
  }
  async extend(items: { slot: number; tokens: number[] }[]): Promise<Float32Array[]> {
    for (const { slot, tokens } of items) {
      const s = this.seqs[slot];
      if (!s) throw new Error(`RecomputeBackend: slot ${slot} out of range (maxBatch ${this.maxBatch})`);
      if (s.length + tokens.length > this.maxLength)
        throw new Error(`RecomputeBackend: slot ${slot} would hold ${s.length + tokens.length} tokens > maxLength ${this.maxLength}`);
      s.push(...tokens);
    }
    return this.forward(items.map((i) => this.seqs[i.slot]!));
  }
  release(slot: number): void {
    this.seqs[slot] = [];
  }
}
