/**
 * A DecodeBackend that "samples" scripted turns: each request (a slot's first extend) takes the
 * next script, and every logits row puts its mass on the script's next id, so greedy decoding
 * writes exactly the scripted ids (a stand-in for a trained model in the token-exactness tests).
 */
import type { DecodeBackend } from '../../../engine/rollout/ports';

export class ScriptedBackend implements DecodeBackend {
  readonly maxBatch = 8;
  readonly maxLength = 4096;
  private at = new Map<number, { script: number[]; pos: number }>();
  /** The prompt each request was prefilled with, in order. */
  readonly prompts: number[][] = [];
  constructor(
    readonly vocabSize: number,
    private readonly scripts: number[][],
  ) {}
  async extend(items: { slot: number; tokens: number[] }[]): Promise<Float32Array[]> {
    return items.map(({ slot, tokens }) => {
      let s = this.at.get(slot);
      if (!s) {
        const script = this.scripts.shift();
        if (!script) throw new Error('ScriptedBackend: no script left');
        s = { script, pos: 0 };
        this.at.set(slot, s);
        this.prompts.push(tokens.slice());
      }
      const row = new Float32Array(this.vocabSize);
      row[s.script[Math.min(s.pos++, s.script.length - 1)]!] = 30;
      return row;
    });
  }
  release(slot: number): void {
    this.at.delete(slot);
  }
}
