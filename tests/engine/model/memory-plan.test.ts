import { describe, expect, it } from 'vitest';
import { traceGraph } from '../../../engine/tensor/graph';
import { parameterCount } from '../../../engine/model/config';
import { resolveLora } from '../../../engine/model/lora';
import {
  adviseFit,
  decodeGraphBytes,
  fmtBytes,
  graphPeakBytes,
  memoryPlan,
  ORT_ARENA_FACTOR,
  parseBytes,
  trainGraphBytes,
  type MemoryPlanInput,
} from '../../../engine/model/memory-plan';
import { quantizedBytes } from '../../../engine/model/quantize';
import { ALL_SHAPES, SHAPES, shapeByName } from '../../../engine/model/shapes';

const lora16 = resolveLora({ rank: 16, alpha: 32, dropout: 0, target_modules: 'all-linear' });
const item = (p: ReturnType<typeof memoryPlan>, id: string) => p.items.find((i) => i.id === id);

describe('graphPeakBytes', () => {
  it('counts the tensors alive at once in execution order; views share their source; inputs are not counted', () => {
    // x [1000] → a = x·2 → b = a+1 → r = reshape(b) → c = exp(r); outputs c.
    // a (4000 B) and b (4000 B) are alive together at b; then a dies; c is alive with b (its view r's source) at c.
    const g = traceGraph([{ name: 'x', dtype: 'float32', shape: [1000] }], (o, x) => {
      const a = o.mul(x.x, o.scalar(2));
      const b = o.add(a, o.scalar(1));
      const r = o.reshape(b, [10, 100]);
      return { c: o.exp(r) };
    });
    // Scalars are 4 B each (2 of them, alive until their reader).
    const peak = graphPeakBytes(g);
    expect(peak).toBeGreaterThanOrEqual(8000);
    expect(peak).toBeLessThanOrEqual(8008);
  });
});

describe('memoryPlan', () => {
  const tiny = shapeByName('tiny');
  const base: MemoryPlanInput = { config: tiny, lora: lora16, train: { batch: 4, seq: 64 }, baseline: 0 };

  it('the rollout KV cache is batch × length × layers × KV heads × head dim × 2 × 4 bytes (plus one decode step)', () => {
    const c = { ...shapeByName('qwen2.5-1.5b'), numLayers: 3 };
    const p = memoryPlan({ ...base, config: c, train: { batch: 1, seq: 16 }, rollout: { batch: 8, maxLength: 512 } });
    const kv = 8 * 512 * c.numLayers * c.numKvHeads * c.headDim * 2 * 4;
    const it = item(p, 'kv_cache')!;
    // The cache, plus one decode step's own tensors (traced; logits of 8 rows over 151,936 ids among them).
    const step = decodeGraphBytes(c, { batch: 8, past: 511, lora: lora16 }) * ORT_ARENA_FACTOR;
    expect(step).toBeGreaterThan(8 * 151936 * 4);
    expect(it.bytes).toBeCloseTo(kv + step, 0);
    expect(it.key).toBe('rollout.max_total_length');
    expect(p.total).toBe(p.items.reduce((a, i) => a + i.bytes, 0));
  });

  it('a 4-bit base holds the linear layers in codes and scales, once (in the worker); the LM head (a tied table) at 8 bits, an untied embedding table at 4', () => {
    const c = shapeByName('qwen2.5-0.5b');
    const f = item(memoryPlan({ ...base, config: c }), 'base')!.bytes;
    const q = item(memoryPlan({ ...base, config: c, quantizeBase: 'int4' }), 'base')!.bytes;
    // 4 bits + a float32 scale per 32 values = 5 bits per linear weight; the tied head 8 + 1 bits; held once (moved to the worker) for a bare step.
    const embed = (c.vocabSize * c.hiddenSize * 9) / 8;
    const linear = parameterCount(c) - c.vocabSize * c.hiddenSize;
    expect(q).toBeGreaterThan(embed + (linear * 5) / 8 - 1e6);
    expect(q).toBeLessThan(embed + (linear * 5) / 8 + 2e6);
    expect(q).toBeLessThan(f * 0.2);
    // With rollouts on the CPU the decode session's pre-packed copy counts too.
    const r = item(memoryPlan({ ...base, config: c, quantizeBase: 'int4', rollout: { batch: 1, maxLength: 64 } }), 'base')!.bytes;
    expect(r - q).toBeGreaterThan(embed + (linear * 5) / 8 - 1e6);
    // Qwen3-8B: its own LM head at 8 bits (V × D × 9 / 8), the embedding table codes like the linear layers.
    const e = shapeByName('qwen3-8b');
    const q8 = item(memoryPlan({ ...base, config: e, quantizeBase: 'int4' }), 'base')!.bytes;
    const head = (e.vocabSize * e.hiddenSize * 9) / 8;
    const codes = ((parameterCount(e) - e.vocabSize * e.hiddenSize) * 5) / 8;
    expect(q8).toBeGreaterThan(head + codes - 1e6);
    expect(q8).toBeLessThan(head + codes + 3e6);
    expect(quantizedBytes(64, 64, 4, 32)).toBe(64 * 2 * 16 + 64 * 2 * 4);
    expect(() => memoryPlan({ ...base, lora: undefined, quantizeBase: 'int4' })).toThrow(/model\.quantize_base.*model\.lora/);
  });

  it('block recompute and smaller micro-batches lower the traced activations; a budget beyond the model is refused naming the key', () => {
    const c = { ...shapeByName('25m'), numLayers: 3 };
    const none = trainGraphBytes(c, { batch: 2, seq: 128, lora: lora16 });
    const all = trainGraphBytes(c, { batch: 2, seq: 128, lora: lora16, recomputeLayers: true });
    const half = trainGraphBytes(c, { batch: 1, seq: 128, lora: lora16 });
    expect(all).toBeLessThan(none);
    expect(half).toBeLessThan(none);
    expect(() => memoryPlan({ ...base, recomputeLayers: 9 })).toThrow(/model\.recompute_layers/);
  });

  it('full fine-tuning holds three copies of the weights, AdamW moments and gradients of every weight', () => {
    const p = memoryPlan({ ...base, lora: undefined });
    const n = parameterCount(tiny);
    expect(item(p, 'base')!.bytes).toBe(n * 4 * 3);
    expect(item(p, 'optimizer')!.bytes).toBe(n * 8);
    expect(item(p, 'adapters')).toBeUndefined();
    const l = memoryPlan(base);
    expect(item(l, 'base')!.bytes).toBe(n * 4); // held once, in the worker
    expect(l.trainable).toBeLessThan(n);
  });

  it('a plan over the budget is told the key that makes it fit', () => {
    const input: MemoryPlanInput = { ...base, config: shapeByName('qwen2.5-0.5b'), train: { batch: 8, seq: 512 }, recomputeLayers: false };
    const p = memoryPlan(input);
    const fit = adviseFit(input, p.total - 1);
    expect(fit.fits).toBe(false);
    expect(fit.advice.length).toBeGreaterThan(0);
    for (const a of fit.advice) expect(a.total).toBeLessThan(p.total);
    expect(fit.advice.map((a) => a.key)).toContain('model.recompute_layers');
    expect(adviseFit(input, p.total + 1).fits).toBe(true);
  });
});

describe('sizes and shapes', () => {
  it('parses memory sizes, refusing others naming the flag', () => {
    expect(parseBytes('24GiB')).toBe(24 * 2 ** 30);
    expect(parseBytes('16 GB')).toBe(16e9);
    expect(parseBytes('512MiB')).toBe(512 * 2 ** 20);
    expect(parseBytes('8e9')).toBe(8e9);
    expect(() => parseBytes('lots')).toThrow(/--memory: 'lots'/);
    expect(() => parseBytes('3 parsecs', '--x')).toThrow(/--x/);
    expect(fmtBytes(3 * 2 ** 30)).toBe('3.00 GiB');
  });

  it("the released shapes have their config.json's parameter counts", () => {
    const billions = (n: string) => Math.round(parameterCount(SHAPES[n]!) / 1e7) / 100;
    expect(billions('qwen2.5-0.5b')).toBe(0.49);
    expect(billions('qwen2.5-1.5b')).toBe(1.54);
    expect(billions('qwen3-4b')).toBe(4.02);
    expect(billions('qwen3-8b')).toBe(8.19);
    expect(billions('llama3.1-8b')).toBe(8.03);
    expect(Object.keys(ALL_SHAPES)).toEqual(expect.arrayContaining(['tiny', '25m', 'qwen3-8b']));
    expect(() => shapeByName('gpt-9')).toThrow(/--shape: unknown shape 'gpt-9' \(known: tiny, 25m/);
  });
});
