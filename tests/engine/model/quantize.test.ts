/**
 * Quantized decoding (engine/model/quantize.ts): the block-wise codes against hand-computed ones,
 * the quantized decode session against float32 decoding of the dequantized weights, and the
 * session's rebuild when the weights change.
 */
import { afterAll, describe, expect, it } from 'vitest';
import onnxProto from 'onnx-proto';
import { PolicyModel, type DecodeInput } from '../../../engine/model/runtime';
import { tinyConfig } from '../../../engine/model/config';
import { dequantizeBlockwise, quantizeBlockwise, quantizedWeightNames } from '../../../engine/model/quantize';

const models: PolicyModel[] = [];
afterAll(async () => {
  for (const m of models) await m.dispose();
});

describe('quantizeBlockwise', () => {
  it('int8: one scale per block of 32 (max|w| / 127), codes round(w / s) + 128, padding past K is code 128', () => {
    // One row, K = 40: two blocks (32 + 8 values, the second padded to 32).
    const w = Float32Array.from({ length: 40 }, (_, k) => (k < 32 ? (k - 16) / 16 : (k - 36) * 0.5));
    const q = quantizeBlockwise(w, 1, 40, 8);
    expect(q.codes.length).toBe(2 * 32);
    expect(q.scales[0]).toBeCloseTo(1 / 127, 7); // max |w| of block 0 is 16/16 = 1
    expect(q.scales[1]).toBeCloseTo(2 / 127, 7); // block 1: max |(k − 36)·0.5| = 2
    expect(q.codes[0]).toBe(128 - 127); // w = −1
    expect(q.codes[16]).toBe(128); // w = 0
    expect(q.codes[24]).toBe(128 + Math.round(0.5 * 127)); // w = 0.5
    expect(q.codes[32]).toBe(128 - 127); // w = −2 (k = 32)
    expect([...q.codes.slice(40, 64)]).toEqual(new Array(24).fill(128)); // padding
    const back = dequantizeBlockwise(q);
    for (let k = 0; k < 40; k++) expect(Math.abs(back[k]! - w[k]!)).toBeLessThanOrEqual(q.scales[k < 32 ? 0 : 1]! / 2 + 1e-7);
  });

  it('int4: codes round(w / s) + 8 with s = max|w| / 7, two per byte, element 2j in the low nibble', () => {
    const w = Float32Array.from({ length: 32 }, (_, k) => [-7, 3, 0, 7][k % 4]! * 0.1);
    const q = quantizeBlockwise(w, 1, 32, 4);
    expect(q.codes.length).toBe(16);
    expect(q.scales[0]).toBeCloseTo(0.1, 7);
    // bytes: (k=0: −7 → 1) | (k=1: 3 → 11) << 4 ; (k=2: 0 → 8) | (k=3: 7 → 15) << 4
    expect(q.codes[0]).toBe(1 | (11 << 4));
    expect(q.codes[1]).toBe(8 | (15 << 4));
    const back = dequantizeBlockwise(q);
    for (let k = 0; k < 32; k++) expect(back[k]).toBeCloseTo(w[k]!, 6);
  });

  it('refuses a block size MatMulNBits cannot take', () => {
    expect(() => quantizeBlockwise(new Float32Array(24), 1, 24, 8, 24)).toThrow(/power of two/);
  });
});

const cfg = tinyConfig({ vocabSize: 300, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 128, padTokenId: 0 });

function prefill(ids: number[]): DecodeInput {
  const T = ids.length;
  return {
    batch: 1,
    newLength: T,
    pastLength: 0,
    inputIds: Int32Array.from(ids),
    attentionMask: new Int32Array(T).fill(1),
    positionIds: Int32Array.from({ length: T }, (_, i) => i),
    past: [],
  };
}

/** A float32 model holding the dequantized weights of `m`'s quantized copy. */
function dequantizedTwin(m: PolicyModel): PolicyModel {
  const w = new Map(m.weights);
  for (const [name, q] of m.quantizedWeights()) w.set(name, dequantizeBlockwise(q));
  const t = new PolicyModel(m.config, w, { threads: 1 });
  models.push(t);
  return t;
}

const maxAbs = (a: Float32Array) => a.reduce((p, v) => Math.max(p, Math.abs(v)), 0);
const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((p, v, i) => Math.max(p, Math.abs(v - b[i]!)), 0);

describe('quantized decode session', () => {
  for (const mode of ['int8', 'int4'] as const) {
    it(`${mode}: one MatMulNBits per linear weight; logits near float32 decoding of the dequantized weights, unlike the float32 weights'`, async () => {
      const m = PolicyModel.init(cfg, 3, { threads: 1, quantize: mode });
      models.push(m);
      const model = onnxProto.onnx.ModelProto.decode(m.quantizedDecodeModel());
      const nbits = model.graph!.node!.filter((n) => n.opType === 'MatMulNBits');
      expect(nbits.length).toBe(quantizedWeightNames(cfg).length);
      const ids = [5, 17, 42, 99, 7, 250, 3];
      const q = (await m.decode(prefill(ids), true)).logits;
      const f = (await m.decode(prefill(ids))).logits;
      const d = (await dequantizedTwin(m).decode(prefill(ids))).logits;
      const scale = maxAbs(f);
      // int8 activations (accuracy level 4) add their own rounding on top of the weights'.
      expect(maxDiff(q, d)).toBeLessThan((mode === 'int8' ? 0.02 : 0.1) * scale);
      expect(maxDiff(q, f)).toBeGreaterThan(0);
    });
  }

  it('is rebuilt when the weights change (markWeightsUpdated), keeping the runner', async () => {
    const m = PolicyModel.init(cfg, 4, { threads: 1, quantize: 'int8' });
    models.push(m);
    const ids = [9, 8, 7, 6];
    const r0 = await m.decodeRunner(0, undefined, true);
    const before = (await m.decode(prefill(ids), true)).logits;
    for (const name of quantizedWeightNames(cfg)) m.weights.get(name)!.forEach((v, i, a) => (a[i] = v * (i % 2 ? 1.5 : -0.5)));
    m.markWeightsUpdated();
    const after = (await m.decode(prefill(ids), true)).logits;
    expect(await m.decodeRunner(0, undefined, true)).toBe(r0);
    const d = (await dequantizedTwin(m).decode(prefill(ids))).logits;
    expect(maxDiff(after, before)).toBeGreaterThan(0.05 * maxAbs(before));
    expect(maxDiff(after, d)).toBeLessThan(0.02 * maxAbs(d));
  });

  it('under LoRA the base is quantized and the adapters stay float32 inputs: an adapter update needs no rebuild', async () => {
    const lora = { rank: 4, alpha: 8, dropout: 0, targets: ['q_proj', 'v_proj', 'down_proj'] as never };
    const m = PolicyModel.init(cfg, 5, { threads: 1, quantize: 'int8', lora });
    models.push(m);
    // Non-zero B so the adapters change the output.
    for (const name of m.trainableNames()) m.weights.get(name)!.forEach((_, i, a) => (a[i] = Math.sin(i * 0.37 + name.length) * 0.05));
    m.markWeightsUpdated();
    const ids = [3, 1, 4, 1, 5, 9];
    const q = (await m.decode(prefill(ids), true)).logits;
    const w = new Map(m.weights);
    for (const [name, qm] of m.quantizedWeights()) w.set(name, dequantizeBlockwise(qm));
    const twin = new PolicyModel(cfg, w, { threads: 1, lora });
    models.push(twin);
    const d = (await twin.decode(prefill(ids))).logits;
    expect(maxDiff(q, d)).toBeLessThan(0.02 * maxAbs(d));
    const built = m.quantizedWeights();
    for (const name of m.trainableNames().filter((n) => n.includes('lora_B'))) m.weights.get(name)!.forEach((v, i, a) => (a[i] = -v)); // ΔW = B·A flips
    m.markWeightsUpdated();
    const q2 = (await m.decode(prefill(ids), true)).logits;
    expect(m.quantizedWeights()).toBe(built); // the same quantized base
    for (const name of twin.trainableNames()) twin.weights.get(name)!.set(m.weights.get(name)!);
    twin.markWeightsUpdated();
    const d2 = (await twin.decode(prefill(ids))).logits;
    expect(maxDiff(q2, q)).toBeGreaterThan(0.01 * maxAbs(q));
    expect(maxDiff(q2, d2)).toBeLessThan(0.02 * maxAbs(d2));
  });

  it('is refused on the tfjs backend, naming rollout.quantize', () => {
    expect(() => PolicyModel.init(cfg, 1, { backend: 'tfjs', quantize: 'int8' })).toThrow(/rollout\.quantize.*backend "ort"/);
  });
});
