/**
 * The decode graph's sampling head (engine/model/graphs.ts sampleHead) picks the same token as
 * engine/rollout/sampling.ts's sampleToken given the same uniform, with the same logprob and
 * entropy, for sampled and greedy rows, over vocabularies of one block and of several padded
 * blocks.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { PolicyModel } from '../../../engine/model/runtime';
import { tinyConfig } from '../../../engine/model/config';
import { sampleToken } from '../../../engine/rollout/sampling';
import { Rng } from '../../../engine/base/rng';

const models = [23, 300, 1000].map((V) =>
  PolicyModel.init(tinyConfig({ vocabSize: V, hiddenSize: 32, layers: 1, heads: 2, kvHeads: 1, maxPositionEmbeddings: 64, padTokenId: 0 }), V, { threads: 1 }),
);
afterAll(async () => {
  for (const m of models) await m.dispose();
});

describe('decode graph sampling head', () => {
  for (const model of models)
    it(`matches sampleToken (vocab ${model.config.vocabSize})`, async () => {
      const V = model.config.vocabSize;
      const B = 12;
      const T = 5;
      const r = new Rng(V);
      const inputIds = Int32Array.from({ length: B * T }, () => 1 + Math.floor(r.next() * (V - 1)));
      const positionIds = Int32Array.from({ length: B * T }, (_, i) => i % T);
      const temps = Array.from({ length: B }, (_, b) => [0, 0.5, 1, 1.7][b % 4]!);
      const us = Array.from({ length: B }, () => r.next());
      const sample = {
        u: Float32Array.from(us),
        invTemp: Float32Array.from(temps, (t) => (t === 0 ? 1 : 1 / t)),
        greedy: Float32Array.from(temps, (t) => (t === 0 ? 1 : 0)),
      };
      const out = await model.decode({
        batch: B,
        newLength: T,
        pastLength: 0,
        inputIds,
        attentionMask: new Int32Array(B * T).fill(1),
        positionIds,
        past: [],
        sample,
      });
      const distinct = new Set<number>();
      for (let b = 0; b < B; b++) {
        const row = out.logits.slice(b * V, (b + 1) * V);
        const rng = { next: () => us[b]! } as unknown as Rng;
        const want = sampleToken(row, { temperature: temps[b] }, rng);
        expect(out.sampled.ids[b]).toBe(want.id);
        expect(out.sampled.logprobs[b]).toBeCloseTo(want.logprob, 4);
        expect(out.sampled.entropy[b]).toBeCloseTo(want.entropy, 4);
        distinct.add(want.id);
      }
      expect(distinct.size).toBeGreaterThan(3);
      // Uniforms at the extremes stay in range.
      const edge = await model.decode({
        batch: B,
        newLength: T,
        pastLength: 0,
        inputIds,
        attentionMask: new Int32Array(B * T).fill(1),
        positionIds,
        past: [],
        sample: { u: Float32Array.from({ length: B }, (_, b) => (b % 2 ? 0 : 0.9999999)), invTemp: new Float32Array(B).fill(1), greedy: new Float32Array(B) },
      });
      for (const id of edge.sampled.ids) expect(id >= 0 && id < V).toBe(true);
    });
});
