/**
 * Child side of quant-base.test.ts, on WebGPU (the CPU side of the same comparison is
 * tests/engine/model/quantize-base.test.ts): the tiny LoRA model with its base quantized to 4 bits
 * (model.quantize_base; an untied head, so the embedding table is codes too) against its float32
 * twin holding the dequantized weights on the same device: score, a LoRA training step's loss and
 * adapter gradients, and the decode session's logits. Then `generate` (what `arbor generate`
 * runs) on the tiny multihop checkpoint with --quantize-base int4, sampling on the CPU and on
 * WebGPU with the same seed. Prints one JSON line.
 */
import { PolicyModel } from '../../../../engine/model/runtime';
import { tinyConfig } from '../../../../engine/model/config';
import { packSequences } from '../../../../engine/model/graphs';
import { resolveLora } from '../../../../engine/model/lora';
import { nllLoss } from '../../../../engine/model/lora-step';
import { dequantizeBlockwise } from '../../../../engine/model/quantize';
import type { Weights } from '../../../../engine/model/checkpoint';
import { generate } from '../../../../engine/cli/commands/generate';
import { join } from 'node:path';

const TINY = join(process.cwd(), 'tests', 'engine', 'model', 'fixtures', 'multihop-tiny-sft'); // runCase runs it in the repository root

// Its own LM head, so the embedding table is quantized too (the lookup reads the rows' codes: gatherNBits).
const cfg = tinyConfig({ vocabSize: 40, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 64, padTokenId: 0, tieWordEmbeddings: false });
const lora = resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: 'all-linear' });
const seqs = [
  [1, 5, 9, 3, 7, 2, 11],
  [4, 8, 1, 6],
  [2, 3, 5, 7, 11, 13, 17, 19, 23],
];

const out: Record<string, unknown> = {};
for (const dev of ['webgpu']) {
  const providers = ['webgpu', 'cpu'];
  const init = PolicyModel.init(cfg, 3, { threads: 1, lora, loraSeed: 5 });
  for (const [k, v] of init.weights) if (k.includes('lora_B')) v.forEach((_, i, a) => (a[i] = Math.sin(i * 0.7 + k.length) * 0.05));
  const q = new PolicyModel(cfg, new Map(init.weights), { threads: 1, providers, lora, quantizeBase: { bits: 4, blockSize: 32 } });
  const w: Weights = new Map(init.weights);
  for (const [name, m] of q.quantizedBase()) w.set(name, dequantizeBlockwise(m));
  const f = new PolicyModel(cfg, w, { threads: 1, providers, lora });
  const side: Record<string, unknown> = {};
  for (const [name, m] of [
    ['quant', q],
    ['twin', f],
  ] as const) {
    const batch = packSequences(seqs, 0);
    const s = await m.score(batch);
    const t = await m.trainStep(batch, nllLoss, batch.valid);
    const logits = await m.lastLogits(seqs);
    side[name] = {
      logprobs: Array.from(s.logprobs),
      loss: t.loss,
      grads: Object.fromEntries([...t.grads].map(([k, v]) => [k, Array.from(v)])),
      logits: logits.map((l) => Array.from(l)),
      onDevice: m.onDevice,
    };
    await m.dispose();
  }
  await init.dispose();
  out[dev] = side;
  console.error(`done ${dev}`);
}
// generate (arbor generate's function) with the 4-bit base, sampled (temperature 1, no top-k), on each device.
const prompt = 'who directed the film';
const args = { prompt, maxNew: 8, threads: 1, seed: 7, temperature: 1, topK: 0, quantizeBase: 'int4' as const };
const cpu = await generate(TINY, args);
const gpu = await generate(TINY, { ...args, device: 'webgpu' });
out.generate = {
  cpu: cpu.generatedIds,
  webgpu: gpu.generatedIds,
  quantization: gpu.quantization?.mode,
  kvCacheBytes: gpu.deviceBytes?.kvCache,
};
console.log(JSON.stringify(out));
