import { afterAll, describe, expect, it } from 'vitest';
import { PolicyModel } from '../../../engine/model/runtime';
import { tinyConfig } from '../../../engine/model/config';
import { rollout, type RolloutOptions } from '../../../engine/rollout/engine';
import { policyDecodeBackend, policyRecomputeBackend } from '../../../engine/rollout/model-backend';
import { flattenTrajectory } from '../../../engine/rollout/types';
import { EOS, VOCAB, WordTokenizer, searchTasks } from './helpers';

const tok = new WordTokenizer();
const model = PolicyModel.init(
  tinyConfig({ vocabSize: VOCAB.length, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 256, eosTokenId: EOS, padTokenId: 0 }),
  11,
  { threads: 1 },
);
afterAll(() => model.dispose());

function opts(over: Partial<RolloutOptions> = {}): RolloutOptions {
  return {
    tasks: searchTasks(tok, 2),
    n: 3,
    seed: 9,
    sampling: { temperature: 0 },
    tokenizer: tok,
    limits: { maxNewTokens: 12, maxTurns: 3, maxTotalLength: 96 },
    stop: { strings: ['</search>', '</answer>'], tokenIds: [EOS] },
    ...over,
  };
}
const ids = (ts: { turns: { tokenIds: number[] }[] }[]) => ts.map((t) => t.turns.map((u) => u.tokenIds));

describe('rollout on the real transformer (ORT decode graph with KV cache)', () => {
  it('batched generation with tools equals one-at-a-time generation at temperature 0, and the no-cache recompute', async () => {
    const batched = await rollout(policyDecodeBackend(model, { maxBatch: 9 }), opts());
    const single = await rollout(policyDecodeBackend(model, { maxBatch: 1 }), opts({ maxBatch: 1 }));
    const full = await rollout(policyRecomputeBackend(model, { maxBatch: 4 }), opts());
    expect(ids(batched.trajectories)).toEqual(ids(single.trajectories));
    expect(ids(batched.trajectories)).toEqual(ids(full.trajectories));
    expect(batched.stats.meanBatch).toBeGreaterThan(1);
    const a = batched.trajectories.flatMap((t) => t.turns.flatMap((u) => u.logprobs));
    const b = single.trajectories.flatMap((t) => t.turns.flatMap((u) => u.logprobs));
    a.forEach((x, i) => expect(x).toBeCloseTo(b[i]!, 4));
  });

  it('rollout logprobs equal the score graph on the flattened trajectory (model tokens)', async () => {
    const { trajectories } = await rollout(policyDecodeBackend(model, { maxBatch: 9 }), opts({ sampling: { temperature: 1 }, n: 2 }));
    const flat = trajectories.map(flattenTrajectory);
    const scored = await model.score(flat.map((f) => Array.from(f.tokens)));
    const L = scored.batch.length;
    let checked = 0;
    flat.forEach((f, b) => {
      for (let i = 1; i < f.tokens.length; i++) {
        if (!f.lossMask[i]) continue;
        // score's logprobs[b, t] is log p(token t + 1 | tokens ≤ t).
        expect(scored.logprobs[b * L + i - 1]).toBeCloseTo(f.logprobs[i]!, 3);
        checked++;
      }
    });
    expect(checked).toBeGreaterThan(20);
  });
});
