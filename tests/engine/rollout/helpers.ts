/**
 * Test fixtures for the scheduler that do not depend on engine/model or engine/env:
 *  - a small recurrent language model (Elman RNN with seeded random weights) as a
 *    DecodeBackend: its per-slot hidden state plays the KV cache's role, so feeding a slot the
 *    wrong tokens (or forgetting to reset it) changes the logits;
 *  - a word-level tokenizer over a fixed vocabulary;
 *  - a Search-R1-style environment: every <search> q </search> in a model turn is a tool call
 *    (several per turn), answered by looking q up in a small dictionary; <answer> ends the episode.
 */
import { Rng } from '../../../engine/base/rng';
import type { DecodeBackend, EpisodeEnv, RolloutTask, TokenizerPort } from '../../../engine/rollout/ports';
import type { ToolCall } from '../../../engine/rollout/types';

export const VOCAB = [
  '<pad>',
  '<eos>',
  '<search>',
  '</search>',
  '<answer>',
  '</answer>',
  '<information>',
  '</information>',
  'paris',
  'rome',
  'berlin',
  'france',
  'italy',
  'germany',
  'capital',
  'of',
  'the',
  'is',
  'what',
  '?',
  'unknown',
  'user',
  'assistant',
];
export const EOS = 1;

export class WordTokenizer implements TokenizerPort {
  private readonly index = new Map(VOCAB.map((w, i) => [w, i] as const));
  encode(text: string): number[] {
    return text
      .split(/\s+/)
      .filter(Boolean)
      .map((w) => {
        const id = this.index.get(w);
        if (id === undefined) throw new Error(`word not in vocab: ${w}`);
        return id;
      });
  }
  decode(ids: number[]): string {
    return ids.map((i) => VOCAB[i]).join(' ');
  }
}

export class RnnBackend implements DecodeBackend {
  readonly vocabSize = VOCAB.length;
  protected readonly H = 12;
  private readonly E: Float32Array;
  private readonly W: Float32Array;
  private readonly U: Float32Array;
  private readonly state: (Float32Array | null)[];
  calls: { slot: number; tokens: number }[][] = [];
  constructor(
    readonly maxBatch: number,
    readonly maxLength = 512,
    seed = 7,
    readonly scale = 2.5,
    private readonly bias: Record<number, number> = { 1: -1, 2: 2, 3: 2, 4: -1, 5: -1 },
  ) {
    const r = new Rng(seed);
    const g = (n: number, s: number) => Float32Array.from({ length: n }, () => (r.next() * 2 - 1) * s);
    this.E = g(this.vocabSize * this.H, 1.5);
    this.W = g(this.H * this.H, 0.6);
    this.U = g(this.H * this.vocabSize, scale);
    this.state = new Array(maxBatch).fill(null);
  }
  async extend(items: { slot: number; tokens: number[] }[]): Promise<Float32Array[]> {
    this.calls.push(items.map((i) => ({ slot: i.slot, tokens: i.tokens.length })));
    return items.map(({ slot, tokens }) => {
      if (slot < 0 || slot >= this.maxBatch) throw new Error(`bad slot ${slot}`);
      if (tokens.length === 0) throw new Error('extend with no tokens');
      let h = this.state[slot] ?? new Float32Array(this.H);
      for (const t of tokens) h = this.step(h, t);
      this.state[slot] = h;
      return this.logits(h);
    });
  }
  /** The next hidden state after token t. */
  protected step(h: Float32Array, t: number): Float32Array {
    const H = this.H;
    const n = new Float32Array(H);
    for (let i = 0; i < H; i++) {
      let a = this.E[t * H + i]!;
      for (let j = 0; j < H; j++) a += this.W[i * H + j]! * h[j]!;
      n[i] = Math.tanh(a);
    }
    return n;
  }
  /** Next-token logits from a hidden state. */
  protected logits(h: Float32Array): Float32Array {
    const { H, vocabSize: V } = this;
    const logits = new Float32Array(V);
    for (let v = 0; v < V; v++) {
      let a = 0;
      for (let i = 0; i < H; i++) a += h[i]! * this.U[i * V + v]!;
      logits[v] = a + (this.bias[v] ?? 0);
    }
    return logits;
  }
  release(slot: number): void {
    this.state[slot] = null;
  }
}

const FACTS: Record<string, string> = { france: 'paris', italy: 'rome', germany: 'berlin' };

/** A multi-call-per-turn search environment over FACTS; records every call. Tool latency is real (setTimeout). */
export class SearchEnv implements EpisodeEnv {
  calls = 0;
  answer: string | undefined;
  constructor(
    private readonly tok: WordTokenizer,
    private readonly question: string,
    private readonly gold: string,
    private readonly delayMs = 0,
  ) {}
  async prompt() {
    const text = `user what is the capital of ${this.question} ? assistant`;
    return { ids: this.tok.encode(text), text };
  }
  async step(turn: { text: string }) {
    const ans = /<answer>(.*?)<\/answer>/.exec(turn.text);
    const calls: ToolCall[] = [];
    const results: string[] = [];
    for (const m of turn.text.matchAll(/<search>(.*?)<\/search>/g)) {
      const t0 = performance.now();
      const q = m[1]!.trim();
      if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs * (1 + (q.length % 3))));
      const hit = q
        .split(' ')
        .map((w) => FACTS[w])
        .find(Boolean);
      calls.push(
        hit
          ? { name: 'search', args: { query: q }, result: hit, latencyMs: performance.now() - t0 }
          : { name: 'search', args: { query: q }, result: 'unknown', error: 'no result', latencyMs: performance.now() - t0 },
      );
      results.push(hit ?? 'unknown');
      this.calls++;
    }
    if (ans) {
      this.answer = ans[1]!.trim();
      return { done: true, toolCalls: calls, stepReward: 0 };
    }
    if (calls.length === 0) return { done: true, stepReward: -0.1 };
    return {
      done: false,
      toolCalls: calls,
      stepReward: calls.some((c) => !c.error) ? 0.1 : 0,
      observation: { text: `<information> ${results.join(' ')} </information>`, role: 'tool' as const },
    };
  }
  async outcome() {
    const em = this.answer === this.gold ? 1 : 0;
    return {
      reward: em,
      components: { exact_match: em, answered: this.answer === undefined ? 0 : 1 },
      exactMatch: em === 1,
      formatOk: this.answer !== undefined,
      ...(this.answer !== undefined ? { answer: this.answer } : {}),
    };
  }
}

export function searchTasks(tok: WordTokenizer, delayMs = 0): RolloutTask[] {
  return Object.entries(FACTS).map(([q, a]) => ({ id: `capital-${q}`, createEnv: () => new SearchEnv(tok, q, a, delayMs) }));
}

/** Token ids as space-separated numbers (the "ids" rollout cases). */
export const idTok: TokenizerPort = { encode: (t) => t.split(' ').filter(Boolean).map(Number), decode: (ids) => ids.join(' ') };

/**
 * Random prompts of ids below `vocab`; after each of the first two turns a tool observation of
 * random ids arrives (after a short real delay when `delayed`, so episodes rejoin the batch at
 * different steps).
 */
export function idTasks(count: number, seed: number, vocab: number, delayed = false): RolloutTask[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `t${i}`,
    createEnv(): EpisodeEnv {
      const r = new Rng(seed * 100 + i);
      const rand = (n: number) => Array.from({ length: n }, () => 1 + Math.floor(r.next() * (vocab - 1)));
      let turns = 0;
      return {
        prompt: async () => ({ ids: rand(5 + i) }),
        step: async () => {
          turns++;
          if (turns >= 3) return { done: true };
          if (delayed) await new Promise((res) => setTimeout(res, 1 + ((i * 3 + turns) % 4)));
          return { done: false, observation: { ids: rand(3 + turns), role: 'tool' } };
        },
        outcome: async () => ({ reward: 0, components: {} }),
      };
    },
  }));
}
