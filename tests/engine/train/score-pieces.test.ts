// The loop's scoring passes in pieces of the update's micro-batch (engine/train/loop.ts
// scorePieceSize, inPieces, scoreInPieces): the piece size is the largest micro-batch the update
// cuts, and on the tiny transformer every episode's logprobs and entropy scored in pieces equal
// the one-call pass's (rows are independent; only the padding differs), each in its own
// episode's place.
import { afterAll, describe, expect, it } from 'vitest';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { validateConfig } from '../../../engine/config/experiment';
import { mulberry32 } from '../../../engine/base/rng';
import { chunks, type Episode } from '../../../engine/train/episode';
import { inPieces, scoreInPieces, scorePieceSize } from '../../../engine/train/loop';
import { ModelPolicyPort } from '../../../engine/train/model-port';
import { AdamW } from '../../../engine/rl/optimizer';
import { testEpisode } from './episode-fixture';

const episode = (tokens: number[]): Episode =>
  testEpisode(
    tokens,
    tokens.map((_, i) => (i === 0 ? 0 : 1)),
  );

describe('scorePieceSize', () => {
  it("is the largest micro-batch of the update's cut (chunks over mini_batches, then micro_batches)", () => {
    for (let n = 1; n <= 40; n++)
      for (const mini_batches of [1, 2, 3, 4, 7])
        for (const micro_batches of [1, 2, 3, 5, 8]) {
          const ids = Array.from({ length: n }, (_, i) => i);
          const largest = Math.max(...chunks(ids, mini_batches).flatMap((mb) => chunks(mb, micro_batches).map((m) => m.length)));
          expect(scorePieceSize({ mini_batches, micro_batches }, n), `${n} episodes, ${mini_batches} × ${micro_batches}`).toBe(largest);
        }
    expect(scorePieceSize({ mini_batches: 1, micro_batches: 8 }, 96)).toBe(12); // 12 prompts × 8 samples
    expect(scorePieceSize({ mini_batches: 1, micro_batches: 1 }, 0)).toBe(1);
  });
});

describe('inPieces', () => {
  it('calls the pass on consecutive pieces and returns its results in the episodes’ order', async () => {
    const eps = Array.from({ length: 7 }, (_, i) => episode([i + 1, i + 2]));
    const calls: number[][] = [];
    const out = await inPieces(eps, 3, async (piece) => {
      calls.push(piece.map((e) => e.tokens[0]!));
      return piece.map((e) => e.tokens[0]!);
    });
    expect(calls).toEqual([[1, 2, 3], [4, 5, 6], [7]]);
    expect(out).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it('refuses a pass that returns another number of results than its piece has episodes', async () => {
    const eps = Array.from({ length: 4 }, (_, i) => episode([i + 1, i + 2]));
    await expect(inPieces(eps, 2, async () => [1])).rejects.toThrow(/2 episodes returned 1 results/);
  });
});

describe('scoring in pieces on the tiny transformer', () => {
  const VOCAB = 40;
  const model = PolicyModel.init(tinyConfig({ vocabSize: VOCAB, hiddenSize: 32, layers: 2, heads: 2, maxPositionEmbeddings: 24 }), 5, { threads: 1 });
  afterAll(() => model.dispose());
  const cfg = validateConfig({ model: { init: 'tiny' }, rollout: { max_new_tokens: 6, max_total_length: 24 }, algorithm: { micro_batches: 3 } });
  const port = new ModelPolicyPort(model, cfg, new AdamW({ ...cfg.optim }));
  // Lengths 3…17 in no order, so every piece pads to another length than the one-call batch.
  const r = mulberry32(4);
  const episodes = [9, 3, 17, 6, 12, 4, 15, 8].map((n) => episode(Array.from({ length: n }, () => 1 + Math.floor(r() * (VOCAB - 1)))));

  it("gives every episode the one call's logprobs and entropy, in its own place", async () => {
    const whole = await port.score(episodes);
    // The episodes differ, so a result in another episode's place would not match.
    for (let i = 1; i < episodes.length; i++) expect(Array.from(whole.logprobs[i]!)).not.toEqual(Array.from(whole.logprobs[0]!));
    for (const size of [1, 2, 3, 5]) {
      const lp = await scoreInPieces(port, episodes, size);
      const ent = await inPieces(episodes, size, async (piece) => (await port.score(piece)).entropy);
      episodes.forEach((e, i) => {
        expect(lp[i]!.length, `piece ${size}, episode ${i}`).toBe(e.tokens.length);
        for (let t = 0; t < e.tokens.length; t++) {
          expect(Math.abs(lp[i]![t]! - whole.logprobs[i]![t]!), `piece ${size}, episode ${i}, token ${t}`).toBeLessThanOrEqual(1e-5);
          expect(Math.abs(ent[i]![t]! - whole.entropy[i]![t]!), `entropy: piece ${size}, episode ${i}, token ${t}`).toBeLessThanOrEqual(1e-5);
        }
      });
    }
  });

  it("the reference's frozen scorer in pieces gives its one call's logprobs too", async () => {
    const ref = port.frozen(model.cloneWeights());
    const whole = (await ref.score(episodes)).logprobs;
    const lp = await scoreInPieces(ref, episodes, scorePieceSize(cfg.algorithm, episodes.length));
    episodes.forEach((_, i) => {
      for (let t = 0; t < whole[i]!.length; t++) expect(Math.abs(lp[i]![t]! - whole[i]![t]!)).toBeLessThanOrEqual(1e-5);
    });
  });
});
