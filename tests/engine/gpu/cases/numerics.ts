/**
 * Child side of numerics.test.ts: score (logprobs, entropy) and a training step (loss, metrics,
 * every gradient) on the CPU and on WebGPU, for the tiny model (full and LoRA) and the parity
 * fixtures (rope scaling, BF16 shards, Qwen3). Prints both sides per case.
 */
import { join } from 'node:path';
import { PolicyModel } from '../../../../engine/model/runtime';
import { tinyConfig } from '../../../../engine/model/config';
import { packSequences, type LossSpec } from '../../../../engine/model/graphs';
import { resolveLora } from '../../../../engine/model/lora';
import type { Ops } from '../../../../engine/tensor/ops';

const FIXTURES = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'models');
const nll: LossSpec = {
  key: 'nll',
  inputs: [],
  entropy: true,
  program: <T>(o: Ops<T>, t: { logprobs: T; entropy?: T; mask: T }) => {
    const n = o.sum(t.mask, [0, 1]);
    return { loss: o.div(o.neg(o.sum(o.mul(t.logprobs, t.mask), [0, 1])), n), entropy_mean: o.div(o.sum(o.mul(t.entropy!, t.mask), [0, 1]), n) };
  },
};

type Make = (providers: string[]) => PolicyModel;
const tiny = tinyConfig({ vocabSize: 40, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 64, padTokenId: 0 });
const cases: [string, Make, number][] = [
  // Three LM-head chunks: the chunked head's slices and zeros run on the device too (engine/tensor/onnx.ts webgpu).
  ['tiny', (p) => PolicyModel.init(tiny, 3, { threads: 1, providers: p, headChunks: 3 }), 40],
  [
    'tiny LoRA',
    (p) =>
      PolicyModel.init(tiny, 3, {
        threads: 1,
        providers: p,
        lora: resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: 'all-linear' } as never),
        loraSeed: 5,
      }),
    40,
  ],
  ...['qwen2-yarn-f32', 'llama-sharded-f32', 'qwen3-bf16'].map((f): [string, Make, number] => [
    f,
    (p) => PolicyModel.load(join(FIXTURES, f), { threads: 1, providers: p }),
    0,
  ]),
];
const only = process.argv[2];

const out: Record<string, unknown> = {};
for (const [name, make, vocab] of cases) {
  if (only && !name.startsWith(only)) continue;
  const res: Record<string, unknown> = {};
  for (const dev of ['cpu', 'webgpu']) {
    const m = make(dev === 'cpu' ? ['cpu'] : ['webgpu', 'cpu']);
    const V = vocab || m.config.vocabSize;
    const seqs = [
      [1, 5, 9, 3, 7, 2, 11],
      [4, 8, 1, 6],
      [2, 3, 5, 7, 11, 13, 17, 19, 23],
    ].map((s) => s.map((x) => x % V));
    const batch = packSequences(seqs, m.config.padTokenId ?? 0);
    // The LoRA case scores and trains at temperature 0.7 (the RL update's tempered head, frozen-head path).
    const temperature = name === 'tiny LoRA' ? 0.7 : 1;
    const s = await m.score(batch, { entropy: true, temperature });
    const t = await m.trainStep(batch, nll, batch.valid, {}, undefined, temperature);
    res[dev] = {
      logprobs: Array.from(s.logprobs),
      entropy: Array.from(s.entropy!),
      loss: t.loss,
      metrics: t.metrics,
      grads: Object.fromEntries([...t.grads].map(([k, v]) => [k, Array.from(v)])),
    };
    await m.dispose();
  }
  out[name] = res;
  console.error(`done ${name}`);
}
console.log(JSON.stringify(out));
