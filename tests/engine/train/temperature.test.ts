/**
 * The RL update scores and trains the policy the rollout sampled from: softmax(logits / T) at
 * rollout.temperature (verl's `logits.div_(temperature)`, TRL's `logits / self.temperature`).
 *  - the score graph at T gives the logprobs and entropy the sampler recorded at T (the decode
 *    graph's sampling head, logits × 1/T, is the independent reference), and not those at 1;
 *  - the train graph at T: its per-token logprobs are the score graph's at T; the frozen head's
 *    closed-form gradient (LoRA) equals the differentiated head's, and a central difference;
 *  - ModelPolicyPort scores, references and updates at rollout.temperature (the update's own
 *    ratio is 1 against old logprobs scored at T); SFT trains at 1;
 *  - algorithm.old_logprobs "rollout" and algorithm.tis are accepted at any temperature (the
 *    recorded logprobs and the learner's are the same policy's now).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { packSequences } from '../../../engine/model/graphs';
import { resolveLora } from '../../../engine/model/lora';
import { validateConfig } from '../../../engine/config/experiment';
import { rollout } from '../../../engine/rollout/engine';
import { policyDecodeBackend } from '../../../engine/rollout/model-backend';
import { flattenTrajectory } from '../../../engine/rollout/types';
import { ModelPolicyPort } from '../../../engine/train/model-port';
import { AdamW } from '../../../engine/rl/optimizer';
import { testEpisode } from './episode-fixture';
import { EOS, VOCAB, WordTokenizer, searchTasks } from '../rollout/helpers';
import { nllEntropyLoss as loss } from '../model/entropy-loss';

const models: PolicyModel[] = [];
afterAll(async () => {
  for (const m of models) await m.dispose();
});

const cfg = tinyConfig({
  vocabSize: VOCAB.length,
  hiddenSize: 32,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  maxPositionEmbeddings: 256,
  eosTokenId: EOS,
  padTokenId: 0,
});

describe('the policy at rollout.temperature', () => {
  it('score at T gives the logprobs and entropy the sampler recorded at T', async () => {
    const model = PolicyModel.init(cfg, 11, { threads: 1 });
    models.push(model);
    const tok = new WordTokenizer();
    for (const T of [0.5, 1.4]) {
      const { trajectories } = await rollout(policyDecodeBackend(model, { maxBatch: 6 }), {
        tasks: searchTasks(tok, 2),
        n: 3,
        seed: 4,
        sampling: { temperature: T },
        tokenizer: tok,
        limits: { maxNewTokens: 12, maxTurns: 3, maxTotalLength: 96 },
        stop: { strings: ['</search>', '</answer>'], tokenIds: [EOS] },
      });
      const flat = trajectories.map(flattenTrajectory);
      const seqs = flat.map((f) => Array.from(f.tokens));
      const at = await model.score(seqs, { entropy: true, temperature: T });
      const plain = await model.score(seqs, { entropy: true });
      const L = at.batch.length;
      let checked = 0,
        apart = 0;
      flat.forEach((f, b) => {
        for (let i = 1; i < f.tokens.length; i++) {
          if (!f.lossMask[i]) continue;
          expect(at.logprobs[b * L + i - 1], `T ${T}, episode ${b}, token ${i}`).toBeCloseTo(f.logprobs[i]!, 3);
          expect(at.entropy![b * L + i - 1], `T ${T} entropy`).toBeCloseTo(f.entropy[i]!, 3);
          apart = Math.max(apart, Math.abs(plain.logprobs[b * L + i - 1]! - f.logprobs[i]!));
          checked++;
        }
      });
      expect(checked).toBeGreaterThan(20);
      expect(apart, `T ${T}: the policy at 1 is another one`).toBeGreaterThan(0.01);
    }
  });

  it('trains at T: the frozen head’s closed-form gradient = the differentiated head’s = a central difference', async () => {
    const spec = resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: 'all-linear' });
    const batch = packSequences([
      [1, 5, 7, 3, 2, 9, 12, 4],
      [4, 4, 8],
      [2, 3, 11, 6, 1, 1, 5, 17],
    ]);
    const T = 0.6;
    for (const chunks of [1, 3]) {
      const m = PolicyModel.init(cfg, 9, { threads: 1, headChunks: chunks, lora: spec });
      models.push(m);
      for (const [k, w] of m.weights) if (k.includes('lora_B')) for (let i = 0; i < w.length; i++) w[i] = 0.05 * Math.sin(3 * i + k.length);
      const adapters = m.trainableNames();
      const closed = await m.trainStep(batch, loss, batch.valid, {}, undefined, T);
      const diff = await m.trainStep(batch, loss, batch.valid, {}, [...adapters, 'model.embed_tokens.weight'], T);
      const plain = await m.trainStep(batch, loss, batch.valid);
      // The train graph's own per-token logprobs are the score graph's at T (an independent program).
      const scored = await m.score(batch, { temperature: T });
      scored.logprobs.forEach((x, i) => batch.valid[i] && expect(closed.logprobs![i], `token ${i}`).toBeCloseTo(x, 4));
      expect(Math.abs(closed.loss - diff.loss)).toBeLessThan(1e-5 * Math.abs(diff.loss));
      expect(Math.abs(closed.loss - plain.loss), 'the loss at T is not the loss at 1').toBeGreaterThan(1e-3);
      for (const k of adapters) {
        const a = closed.grads.get(k)!,
          b = diff.grads.get(k)!;
        let num = 0,
          den = 0;
        for (let i = 0; i < b.length; i++) {
          num = Math.max(num, Math.abs(a[i]! - b[i]!));
          den = Math.max(den, Math.abs(b[i]!));
        }
        expect(num / Math.max(den, 1e-12), `${k} (${chunks} chunks)`).toBeLessThan(1e-4);
      }
      // Central difference on the adapter entry with the largest gradient.
      let best = { k: '', i: 0, g: 0 };
      for (const k of adapters) closed.grads.get(k)!.forEach((g, i) => Math.abs(g) > Math.abs(best.g) && (best = { k, i, g }));
      const w = m.weights.get(best.k)!;
      const h = 1e-2,
        w0 = w[best.i]!;
      w[best.i] = w0 + h;
      m.markWeightsUpdated();
      const up = (await m.trainStep(batch, loss, batch.valid, {}, undefined, T)).loss;
      w[best.i] = w0 - h;
      m.markWeightsUpdated();
      const down = (await m.trainStep(batch, loss, batch.valid, {}, undefined, T)).loss;
      w[best.i] = w0;
      m.markWeightsUpdated();
      expect(Math.abs(best.g), 'a gradient large enough to check').toBeGreaterThan(0.02);
      expect(Math.abs((up - down) / (2 * h) - best.g) / Math.abs(best.g), `${best.k}[${best.i}]`).toBeLessThan(0.02);
    }
  });

  it('ModelPolicyPort scores at rollout.temperature; old_logprobs "rollout" and tis are accepted below 1', async () => {
    const model = PolicyModel.init(cfg, 3, { threads: 1 });
    models.push(model);
    const exp = validateConfig({ model: { init: 'tiny' }, rollout: { temperature: 0.7 }, algorithm: { old_logprobs: 'rollout' } });
    expect(() => validateConfig({ model: { init: 'tiny' }, rollout: { temperature: 0.5 }, algorithm: { tis: { cap: 2 } } })).not.toThrow();
    const port = new ModelPolicyPort(model, exp, new AdamW({ ...exp.optim }));
    const tokens = [1, 5, 7, 3, 2, 9, 12, 4];
    const ep = testEpisode(
      tokens,
      tokens.map((_, i) => (i < 2 ? 0 : 1)),
    );
    const viaPort = await port.score([ep]);
    const direct = await model.score([tokens], { entropy: true, temperature: 0.7 });
    for (let t = 1; t < tokens.length; t++) expect(viaPort.logprobs[0]![t]).toBeCloseTo(direct.logprobs[t - 1]!, 5);
    const frozen = await port.frozen(model.cloneWeights()).score([ep]);
    for (let t = 1; t < tokens.length; t++) expect(frozen.logprobs[0]![t]).toBeCloseTo(direct.logprobs[t - 1]!, 5);
    // The update trains at 0.7: its train step's ratio against old logprobs scored at 0.7 is 1 (lr 0:
    // the weights do not move); SFT trains at 1.
    const temps: number[] = [];
    const trainStep = model.trainStep.bind(model);
    model.trainStep = (...a: Parameters<typeof model.trainStep>) => (temps.push(a[5] ?? 1), trainStep(...a));
    const adv = Float32Array.from(tokens, (_, i) => (i < 2 ? 0 : 1));
    const s = await port.update({
      microBatches: [[ep]],
      advantages: new Map([[ep, adv]]),
      oldLogprobs: new Map([[ep, viaPort.logprobs[0]!]]),
      lr: 0,
      fresh: false,
    });
    ep.lossMask.forEach((m, t) => m && expect(s.signals!.get(ep)!.ratio[t], `ratio at token ${t}`).toBeCloseTo(1, 4));
    await port.sftUpdate([{ tokens: ep.tokens, lossMask: ep.lossMask }], 0);
    expect(temps).toEqual([0.7, 1]);
  });
});
