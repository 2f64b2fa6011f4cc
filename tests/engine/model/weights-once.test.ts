/**
 * One copy of the weights: every ORT session of a PolicyModel (score, train, decode) lives in
 * one worker that holds the weights once; under LoRA with a base folder the frozen base's arrays
 * are moved there (nothing of the base stays on this thread) and the results are identical to a
 * model that keeps its host copy (keepHostBase).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tinyConfig, weightShapes } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { packSequences } from '../../../engine/model/graphs';
import { resolveLora } from '../../../engine/model/lora';
import { nllLoss } from '../../../engine/model/lora-step';

const models: PolicyModel[] = [];
afterAll(async () => {
  for (const m of models) await m.dispose();
});

const same = (a: Float32Array, b: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

describe('frozen base held once, in the model worker', () => {
  it('moves the base to the worker; score, train, decode and baseWeights() are unchanged', async () => {
    const cfg = tinyConfig({ vocabSize: 31, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2 });
    const dir = join(mkdtempSync(join(tmpdir(), 'arbor-once-')), 'base');
    PolicyModel.init(cfg, 4, { threads: 1 }).save(dir);
    const spec = resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: 'all-linear' });
    const moved = PolicyModel.load(dir, { threads: 1, lora: spec, loraSeed: 3 });
    const kept = PolicyModel.load(dir, { threads: 1, lora: spec, loraSeed: 3, keepHostBase: true });
    models.push(moved, kept);
    for (const m of [moved, kept])
      for (const [k, w] of m.weights) if (k.includes('lora_B')) for (let i = 0; i < w.length; i++) w[i] = 0.04 * Math.cos(i + k.length);
    const baseNames = Object.keys(weightShapes(cfg));
    const batch = packSequences([
      [1, 5, 7, 3, 2, 9],
      [4, 4, 8, 30],
    ]);
    const [sm, sk] = [await moved.score(batch, { entropy: true }), await kept.score(batch, { entropy: true })];
    // After the first run the base is in the worker only: no base tensor left on this thread.
    expect(baseNames.filter((n) => moved.weights.has(n))).toEqual([]);
    expect(baseNames.every((n) => kept.weights.has(n))).toBe(true);
    expect(same(sm.logprobs, sk.logprobs) && same(sm.entropy!, sk.entropy!)).toBe(true);
    // The other sessions of the model read the same worker-held base.
    const [tm, tk] = [await moved.trainStep(batch, nllLoss, batch.valid), await kept.trainStep(batch, nllLoss, batch.valid)];
    expect(tm.loss).toBe(tk.loss);
    for (const [k, g] of tk.grads) expect(same(tm.grads.get(k)!, g), k).toBe(true);
    // An adapter update reaches every session (only the adapters are sent again).
    for (const m of [moved, kept]) {
      for (const [k, g] of m === moved ? tm.grads : tk.grads) {
        const w = m.weights.get(k)!;
        for (let i = 0; i < w.length; i++) w[i] -= 0.5 * g[i];
      }
      m.markWeightsUpdated();
    }
    const seqs = [
      [1, 2, 3, 4],
      [9, 8, 7, 6, 5],
    ];
    const [lm, lk] = [await moved.lastLogits(seqs), await kept.lastLogits(seqs)];
    for (let i = 0; i < seqs.length; i++) expect(same(lm[i], lk[i])).toBe(true);
    const [s2m, s2k] = [await moved.score(batch), await kept.score(batch)];
    expect(same(s2m.logprobs, s2k.logprobs)).toBe(true);
    expect(same(s2m.logprobs, sm.logprobs)).toBe(false); // the update took effect
    // The base on demand (e.g. PPO's critic) comes from the folder, equal to the held copy.
    const bm = moved.baseWeights(),
      bk = kept.baseWeights();
    for (const n of baseNames) expect(same(bm.get(n)!, bk.get(n)!), n).toBe(true);
  });
});
