/**
 * The quantized base's quality, pinned per model (model.quantize_base; engine/model/quant-quality.ts):
 * the next-token logits of each model with its base block-quantized (block 32) against the same
 * model in float32, at the last position of each fixture sequence and of its first half, decoded
 * as the sampler decodes (the CPU session: MatMulNBits over pre-packed codes with int8
 * activations; int4 in float32 products before 2026-11-28, KL within 10% of these pins). The tiny model is
 * the trained multihop SFT checkpoint; the parity fixtures (random weights, F32 / BF16 / F16
 * safetensors) are the worst case for quantization. Bounds are the values measured on this
 * machine (docs/areas/model.md) × 1.5: the error is the weights' rounding (deterministic), not
 * the machine's.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PolicyModel } from '../../../engine/model/runtime';
import { quantizationQuality } from '../../../engine/model/quant-quality';
import { tinyConfig } from '../../../engine/model/config';

const FIXTURES = join(__dirname, '..', '..', 'fixtures', 'models');
const TINY = join(__dirname, 'fixtures', 'multihop-tiny-sft');

const models: PolicyModel[] = [];
const keep = (m: PolicyModel) => (models.push(m), m);
afterAll(async () => {
  for (const m of models) await m.dispose();
});

/** The sequences compared: each fixture row (reference.json) and its first half; fixed token lists for the tiny model. */
function sequences(dir: string): number[][] {
  let rows: number[][];
  try {
    rows = (JSON.parse(readFileSync(join(dir, 'reference.json'), 'utf8')) as { input_ids: number[][] }).input_ids;
  } catch {
    rows = [
      [1, 5, 9, 33, 7, 25, 12, 4],
      [1, 17, 3, 18, 21, 6],
      [2, 40, 41, 42],
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
    ];
  }
  return rows.flatMap((s) => [s, s.slice(0, Math.ceil(s.length / 2))]);
}

// Measured (this machine, block 32): KL mean / max abs logit. int4 | int8. The untied fixtures
// (qwen3-bf16, llama) have their embedding table quantized too (baseQuantNames, 2026-11-27): with one
// layer of hidden 32 it is one of 8 quantized matrices, a whole row per block, so it moves these
// more than it would an 8B model's 253 (llama int4 KL 0.193 → 0.738, max 1.69 → 3.30; qwen3-bf16
// 0.060 → 0.049, 1.40 → 1.75). The LM head at 8 bits (HEAD_QUANT_BITS, 2026-11-27; float32 before):
// int4 tiny 0.0176 → 0.0185, the fixtures within 1%; int8 tiny 0.00017 → 0.00035, qwen2-f32 0.0005 →
// 0.00094 (an int4 head instead: tiny int4 0.0463, 2.6× the float head's).
const CASES: { name: string; dir: string; int4: { kl: number; maxAbs: number }; int8: { kl: number; maxAbs: number } }[] = [
  { name: 'tiny multihop SFT', dir: TINY, int4: { kl: 0.0185, maxAbs: 0.98 }, int8: { kl: 0.00035, maxAbs: 0.147 } },
  { name: 'qwen2-f32', dir: join(FIXTURES, 'qwen2-f32'), int4: { kl: 0.162, maxAbs: 2.59 }, int8: { kl: 0.00094, maxAbs: 0.133 } },
  { name: 'qwen3-bf16', dir: join(FIXTURES, 'qwen3-bf16'), int4: { kl: 0.0487, maxAbs: 1.74 }, int8: { kl: 0.00052, maxAbs: 0.108 } },
  { name: 'llama-llama3rope-f16', dir: join(FIXTURES, 'llama-llama3rope-f16'), int4: { kl: 0.734, maxAbs: 3.29 }, int8: { kl: 0.00063, maxAbs: 0.132 } },
];

describe('quantized base: next-token logits against the float32 base, pinned per model', () => {
  for (const c of CASES)
    it(c.name, async () => {
      const seqs = sequences(c.dir);
      const float = keep(PolicyModel.load(c.dir, { threads: 1 }));
      for (const mode of ['int4', 'int8'] as const) {
        const q = keep(PolicyModel.load(c.dir, { threads: 1, quantizeBase: { bits: mode === 'int4' ? 4 : 8, blockSize: 32 } }));
        const r = await quantizationQuality(q, float, seqs);
        expect(r.prompts).toBe(seqs.length);
        expect(r.klMean).toBeLessThanOrEqual(c[mode].kl * 1.5);
        expect(r.maxAbsLogit).toBeLessThanOrEqual(c[mode].maxAbs * 1.5);
        expect(r.maxAbsLogit).toBeGreaterThan(0); // the quantized base is in use
      }
    });

  it('arbor generate --quantize-base int4 --json reports the quality over the fixed prompt set and the prompt; none runs the float32 base', async () => {
    const { generate } = await import('../../../engine/cli/commands/generate');
    const q = await generate(TINY, { prompt: 'who founded', greedy: true, maxNew: 3, quantizeBase: 'int4', quality: true });
    expect(q.quantization).toMatchObject({ mode: 'int4', block: 32 });
    expect(q.quantization!.quality!.prompts).toBe(5);
    expect(q.quantization!.quality!.klMean).toBeGreaterThan(0);
    expect(q.quantization!.quality!.klMean).toBeLessThan(1);
    const f = await generate(TINY, { prompt: 'who founded', greedy: true, maxNew: 3 });
    expect(f.quantization).toBeUndefined();
    await expect(generate(TINY, { prompt: 'x', quantizeBlock: 64 })).rejects.toThrow(/--quantize-block: applies with a quantized base/);
  });

  it('the float32 model against itself: 0', async () => {
    const m = keep(PolicyModel.init(tinyConfig({ vocabSize: 50, hiddenSize: 32, layers: 1, heads: 2, kvHeads: 1 }), 1, { threads: 1 }));
    const r = await quantizationQuality(m, m, [[1, 2, 3]]);
    expect(r).toEqual({ prompts: 1, maxAbsLogit: 0, klMean: 0, klMax: 0, argmaxChanged: 0 });
  });
});
