/**
 * The quantized frozen base (model.quantize_base, engine/model/quantize.ts) on the CPU: every
 * program reads the base's linear weights as codes + scales. Against a float32 twin holding the
 * dequantized weights (the reference the quantized programs compute): scoring and the LoRA
 * training step's adapter gradients agree to float32 rounding (the CPU dequantizes each weight, then
 * MatMul; the backward pass dequantizes them per layer); decoding on the CPU (MatMulNBits with int8
 * activations over pre-packed codes) within its pinned bound. A checkpoint holds only
 * the adapters (and the quantization it was trained with) and reloads to the same logits.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import onnxProto from 'onnx-proto';
import { PolicyModel, type DecodeInput } from '../../../engine/model/runtime';
import { tinyConfig } from '../../../engine/model/config';
import { saveCheckpoint, type Weights } from '../../../engine/model/checkpoint';
import { baseQuantLayout, baseQuantNames, dequantizeBlockwise, headWeightName, quantPieces } from '../../../engine/model/quantize';
import { resolveLora } from '../../../engine/model/lora';
import { nllLoss, randomTokenBatch } from '../../../engine/model/lora-step';
// Masked NLL minus an entropy bonus: the entropy's gradient goes through the LM head too.
import { nllEntropyLoss as entropyLoss } from './entropy-loss';

const models: PolicyModel[] = [];
const keep = (m: PolicyModel) => (models.push(m), m);
afterAll(async () => {
  for (const m of models) await m.dispose();
});

const cfg = tinyConfig({ vocabSize: 300, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 128, padTokenId: 0 });
/** Its own LM head: the embedding table is quantized too (its lookup reads the rows' codes, gatherNBits). */
const untied = { ...cfg, tieWordEmbeddings: false };
const lora = resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: 'all-linear' });

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

/** Non-zero adapters (B = 0 at init would hide the adapters' path through the base). */
function perturbAdapters(m: PolicyModel): void {
  for (const [k, v] of m.weights) if (k.includes('lora_B')) v.forEach((_, i, a) => (a[i] = Math.sin(i * 0.7 + k.length) * 0.05));
  m.markWeightsUpdated();
}

/** A float32 LoRA model whose base holds `m`'s dequantized weights and whose adapters are `m`'s. */
function dequantizedTwin(m: PolicyModel, base: Weights): PolicyModel {
  const w: Weights = new Map();
  for (const [k, v] of base) w.set(k, v);
  for (const [name, q] of m.quantizedBase()) w.set(name, dequantizeBlockwise(q));
  for (const k of m.trainableNames()) w.set(k, Float32Array.from(m.weights.get(k)!));
  return keep(new PolicyModel(m.config, w, { threads: 1, lora: m.lora }));
}

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((p, v, i) => Math.max(p, Math.abs(v - b[i]!)), 0);
const maxAbs = (a: Float32Array) => a.reduce((p, v) => Math.max(p, Math.abs(v)), 0);
const seqs = [
  [1, 5, 9, 33, 7, 250, 12, 4],
  [1, 77, 3, 18, 91, 6],
];

describe('quantized base on the CPU', () => {
  // The last two read the LM head in row pieces (quantPieceBytes 12,000 of its 76,800 float32 bytes: 7 pieces of 43
  // rows, the last 42), as Qwen's 151,936-row heads are read.
  // The last two with an entropy term and the rows in chunks too (the online head's running sums: onlineHeadLogprobs).
  for (const [mode, mc, pieceBytes, headChunks] of [
    ['int4', cfg, undefined, undefined],
    ['int8', cfg, undefined, undefined],
    ['int4', untied, undefined, undefined],
    ['int4', cfg, 12_000, undefined],
    ['int8', untied, 12_000, undefined],
    ['int4', cfg, 12_000, 20],
    ['int8', cfg, undefined, 3],
  ] as const) {
    const bits = mode === 'int4' ? 4 : 8;
    const loss = headChunks ? entropyLoss : nllLoss;
    it(`${mode}${mc.tieWordEmbeddings ? '' : ', untied head (quantized embeddings)'}${pieceBytes ? ', the head in 7 row pieces' : ''}${headChunks ? `, ${headChunks} head chunks, with entropy` : ''}: score and the LoRA step's adapter gradients equal the float32 model of the dequantized weights (rel ≤ 1e-4)`, async () => {
      const cfg = mc;
      if (!cfg.tieWordEmbeddings) expect(baseQuantNames(cfg)).toContain('model.embed_tokens.weight');
      if (pieceBytes) expect(quantPieces(cfg.vocabSize, cfg.hiddenSize, pieceBytes).length).toBe(7);
      const init = PolicyModel.init(cfg, 3, { threads: 1, lora });
      const base = init.baseWeights();
      const m = keep(
        new PolicyModel(cfg, new Map(init.weights), { threads: 1, lora, quantizeBase: { bits, blockSize: 32 }, quantPieceBytes: pieceBytes, headChunks }),
      );
      await init.dispose();
      perturbAdapters(m);
      const ref = dequantizedTwin(m, base);
      const [a, b] = [await m.score(seqs, { entropy: !!headChunks }), await ref.score(seqs, { entropy: !!headChunks })];
      expect(maxDiff(a.logprobs, b.logprobs)).toBeLessThan(1e-4 * maxAbs(b.logprobs));
      if (headChunks) expect(maxDiff(a.entropy!, b.entropy!)).toBeLessThan(1e-4 * maxAbs(b.entropy!));
      const batch = randomTokenBatch(cfg.vocabSize, 3, 12, 5);
      const [ga, gb] = [await m.trainStep(batch, loss, batch.valid), await ref.trainStep(batch, loss, batch.valid)];
      expect(Math.abs(ga.loss - gb.loss)).toBeLessThan(1e-5 * Math.abs(gb.loss));
      let num = 0,
        den = 0;
      for (const [k, g] of gb.grads) {
        const q = ga.grads.get(k)!;
        for (let i = 0; i < g.length; i++) {
          num = Math.max(num, Math.abs(q[i]! - g[i]!));
          den = Math.max(den, Math.abs(g[i]!));
        }
      }
      expect(den).toBeGreaterThan(0);
      expect(num / den).toBeLessThanOrEqual(1e-4);
      // Nothing float32 of the quantized weights is kept or fed: the train graph reads codes (uint8) and scales.
      for (const [name, spec] of baseQuantLayout(cfg, { bits, blockSize: 32 })) expect(m.quantizedBase().get(name)!.bits).toBe(spec.bits);
      expect(m.quantizedBase().get(headWeightName(cfg))!.bits).toBe(8); // the LM head: 8 bits whatever the base's
    });
  }

  // Int8 activations everywhere (accuracy level 4; with float32 products in an int4 body and the 8-bit head at level 4
  // the gap was 0.25% of the largest logit, 1e-5 when the head was float32).
  for (const [mode, bound, mc] of [
    ['int4', 0.01, cfg],
    ['int8', 0.02, cfg],
    ['int4', 0.01, untied],
  ] as const)
    it(`${mode}${mc.tieWordEmbeddings ? '' : ', untied head (quantized embeddings)'}: the CPU decode session (MatMulNBits over baked codes, int8 activations) against the dequantized float32 decode: within ${bound} of the largest logit`, async () => {
      const cfg = mc;
      const init = PolicyModel.init(cfg, 4, { threads: 1, lora });
      const base = init.baseWeights();
      const m = keep(new PolicyModel(cfg, new Map(init.weights), { threads: 1, lora, quantizeBase: { bits: mode === 'int4' ? 4 : 8, blockSize: 32 } }));
      await init.dispose();
      perturbAdapters(m);
      const ref = dequantizedTwin(m, base);
      const ids = [1, 5, 9, 33, 7, 250, 12, 4, 8, 100];
      const [q, d] = [(await m.decode(prefill(ids))).logits, (await ref.decode(prefill(ids))).logits];
      expect(maxDiff(q, d)).toBeLessThan(bound * maxAbs(d));
    });
});

describe('quantized base: graphs and checkpoints', () => {
  it('the train graph reads codes (uint8) and scales, one MatMulNBits per base weight forward, a per-layer dequantization backward; no float32 base input', async () => {
    const { traceGraph } = await import('../../../engine/tensor/graph');
    const { withGradients } = await import('../../../engine/tensor/autodiff');
    const { toOnnx } = await import('../../../engine/tensor/onnx');
    const { trainInputSpecs, trainProgram } = await import('../../../engine/model/graphs');
    const { quantizedBaseSpecs, withQuantizedBase, baseQuantLayout } = await import('../../../engine/model/quantize');
    const { weightShapes } = await import('../../../engine/model/config');
    const { adapterShapes } = await import('../../../engine/model/lora');
    const layout = baseQuantLayout(cfg, { bits: 4, blockSize: 32 });
    const names = new Set(layout.keys());
    const g = traceGraph(
      quantizedBaseSpecs(trainInputSpecs(cfg, nllLoss, lora), layout),
      withQuantizedBase(trainProgram(cfg, nllLoss, lora, 1, false, true), layout, weightShapes(cfg), 'input', 0),
    );
    const grad = withGradients(g, 'loss', Object.keys(adapterShapes(cfg, lora)));
    // WebGPU: MatMulNBits (its shader) forward; the CPU: the weight dequantized, then MatMul (MatMulNBits over codes
    // that are an input dequantizes per call in a slow path), and no MatMulNBits.
    // The LM head (8 bits) is read once, dequantized (onlineHeadLogprobs): its products are plain MatMuls.
    const head = headWeightName(cfg);
    expect(grad.nodes.filter((n) => n.op === 'dequantNBits' && n.attrs.weight === head && n.attrs.plain).length).toBe(1);
    const cpu = onnxProto.onnx.ModelProto.decode(toOnnx(grad)).graph!.node!.map((n) => n.opType!);
    expect(cpu.filter((o) => o === 'MatMulNBits').length).toBe(0);
    // Each 4-bit weight dequantized (one BitShift: the nibble split) for its forward product and again for dX = dY · W
    // in the backward pass, but the first layer's q/k/v projections (their input has no trainable ancestor).
    const fourBitCpu = [...layout.values()].filter((q) => q.bits === 4).length;
    expect(cpu.filter((o) => o === 'BitShift').length).toBe(2 * fourBitCpu - 3);
    const model = onnxProto.onnx.ModelProto.decode(toOnnx(grad, { webgpu: true }));
    const inputs = model.graph!.input!.map((i) => i.name!);
    for (const n of names) {
      expect(inputs).not.toContain(n);
      expect(inputs).toContain(`${n}::qcodes`);
    }
    const ops = model.graph!.node!.map((n) => n.opType!);
    expect(ops.filter((o) => o === 'MatMulNBits').length).toBe(names.size - 1);
    // The backward pass dequantizes each 4-bit base weight once (one Floor per weight) for dX = dY · W, except the first
    // layer's q/k/v projections, whose input (the normed embeddings) needs no gradient; the 8-bit LM head is dequantized
    // once (no Floor) for its logits and the frozen head's closed-form gradient p·W.
    const fourBit = [...layout.values()].filter((q) => q.bits === 4).length;
    expect(fourBit).toBe(names.size - 1);
    expect(ops.filter((o) => o === 'Floor').length).toBe(fourBit - 3);
  });

  it('the online LM head holds one [rows, piece] tile at a time: the train and score graphs of a head in 8 pieces peak lower than of the head whole', async () => {
    const { traceGraph } = await import('../../../engine/tensor/graph');
    const { withGradients } = await import('../../../engine/tensor/autodiff');
    const { trainInputSpecs, trainProgram, scoreInputSpecs, scoreProgram } = await import('../../../engine/model/graphs');
    const { quantizedBaseSpecs, withQuantizedBase } = await import('../../../engine/model/quantize');
    const { graphPeakBytes } = await import('../../../engine/model/memory-plan');
    const { weightShapes } = await import('../../../engine/model/config');
    const { adapterShapes } = await import('../../../engine/model/lora');
    // A head that dominates: 4,000 words × 32; 3 × 64 rows; 8 head chunks. Whole: tiles [24, 4000]; in 8 pieces of
    // 500 words: tiles [192, 500], the same size. A sum that ran late kept every tile's exp(l − m) alive (8 here).
    const big = tinyConfig({ vocabSize: 4000, hiddenSize: 32, layers: 1, heads: 4, kvHeads: 2, maxPositionEmbeddings: 128, padTokenId: 0 });
    const layout = baseQuantLayout(big, { bits: 4, blockSize: 32 });
    const dims = (specs: { shape: (number | string)[] }[]) =>
      specs.map((x) => ({ ...x, shape: x.shape.map((d) => (d === 'batch' ? 3 : d === 'seq' ? 64 : d)) }));
    const peak = (pieceBytes: number, train: boolean) => {
      const specs = quantizedBaseSpecs(dims(train ? trainInputSpecs(big, entropyLoss, lora) : scoreInputSpecs(big, lora)) as never, layout);
      const program = train ? trainProgram(big, entropyLoss, lora, 8, false, true) : scoreProgram(big, true, lora, 8);
      const g = traceGraph(specs, withQuantizedBase(program, layout, weightShapes(big), 'input', 0, pieceBytes));
      return graphPeakBytes(train ? withGradients(g, 'loss', Object.keys(adapterShapes(big, lora)), { weightsFirst: true }) : g);
    };
    const tile = 192 * 500 * 4;
    for (const train of [true, false]) expect(peak(64_000, train)).toBeLessThan(peak(1e9, train) + tile);
  });

  it("the CPU train graph: ONNX Runtime's optimizer keeps each product's dequantization its own (no float32 weight kept from the forward pass to the backward)", async () => {
    const { traceGraph } = await import('../../../engine/tensor/graph');
    const { withGradients } = await import('../../../engine/tensor/autodiff');
    const { toOnnx } = await import('../../../engine/tensor/onnx');
    const { trainInputSpecs, trainProgram } = await import('../../../engine/model/graphs');
    const { quantizedBaseSpecs, withQuantizedBase } = await import('../../../engine/model/quantize');
    const { weightShapes } = await import('../../../engine/model/config');
    const { adapterShapes } = await import('../../../engine/model/lora');
    const { createRequire } = await import('node:module');
    const ort = createRequire(import.meta.url)('onnxruntime-node') as typeof import('onnxruntime-node');
    const layout = baseQuantLayout(cfg, { bits: 4, blockSize: 32 });
    const g = traceGraph(
      quantizedBaseSpecs(trainInputSpecs(cfg, nllLoss, lora), layout),
      withQuantizedBase(trainProgram(cfg, nllLoss, lora, 1, false, true), layout, weightShapes(cfg), 'input', 0),
    );
    const bytes = toOnnx(withGradients(g, 'loss', Object.keys(adapterShapes(cfg, lora))));
    // One BitShift per 4-bit dequantization on the CPU (the high nibble): the forward's and the backward's. Before the
    // codes waited for the gated scales, common-subexpression elimination merged a weight's two chains into one (25 →
    // 14 here), whose float32 output lived from the forward pass to the backward: the float32 base.
    const nibbleSplits = (m: Uint8Array) => onnxProto.onnx.ModelProto.decode(m).graph!.node!.filter((n) => n.opType === 'BitShift').length;
    const path = join(mkdtempSync(join(tmpdir(), 'arbor-qbase-opt-')), 'train.onnx');
    const s = await ort.InferenceSession.create(bytes, { graphOptimizationLevel: 'all', optimizedModelFilePath: path, logSeverityLevel: 3 });
    await s.release();
    const fourBit = [...layout.values()].filter((q) => q.bits === 4).length;
    expect(nibbleSplits(bytes)).toBe(fourBit + fourBit - 3);
    expect(nibbleSplits(readFileSync(path))).toBe(nibbleSplits(bytes));
  });

  it('a folder is quantized tensor by tensor as it is read (BF16 safetensors): the same codes as quantizing the float32 load', async () => {
    const { loadCheckpoint } = await import('../../../engine/model/checkpoint');
    const { quantizeBlockwise } = await import('../../../engine/model/quantize');
    const dir = join(__dirname, '..', '..', 'fixtures', 'models', 'qwen3-bf16');
    const full = loadCheckpoint(dir);
    const layout = baseQuantLayout(full.config, { bits: 4, blockSize: 32 });
    const q = loadCheckpoint(dir, { quantize: layout });
    expect([...q.quantized!.keys()].sort()).toEqual([...layout.keys()].sort());
    for (const [n, spec] of layout) {
      expect(q.weights.has(n)).toBe(false);
      const m = q.quantized!.get(n)!;
      expect(m.bits).toBe(spec.bits);
      const ref = quantizeBlockwise(full.weights.get(n)!, m.N, m.K, spec.bits, 32);
      expect(Buffer.from(m.codes).equals(Buffer.from(ref.codes))).toBe(true);
      expect([...m.scales]).toEqual([...ref.scales]);
    }
  });

  it('a tied model whose folder also stores lm_head.weight loads with the head quantized (checked against the stored embedding); a different head is refused', async () => {
    const { readSafetensors, writeSafetensors } = await import('../../../engine/model/safetensors');
    const dir = mkdtempSync(join(tmpdir(), 'arbor-qbase-tied-'));
    const init = PolicyModel.init(cfg, 8, { threads: 1 });
    saveCheckpoint(dir, cfg, init.weights);
    await init.dispose();
    const file = join(dir, 'model.safetensors');
    const t = readSafetensors(file);
    const emb = t.get('model.embed_tokens.weight')!;
    t.set('lm_head.weight', { shape: emb.shape, data: Float32Array.from(emb.data) });
    writeSafetensors(file, t);
    const m = keep(PolicyModel.load(dir, { threads: 1, lora, quantizeBase: { bits: 4, blockSize: 32 } }));
    expect(m.quantizedBase().get(headWeightName(cfg))!.bits).toBe(8);
    expect((await m.score(seqs)).logprobs.length).toBeGreaterThan(0);
    t.get('lm_head.weight')!.data[5] += 1;
    writeSafetensors(file, t);
    expect(() => PolicyModel.load(dir, { threads: 1, lora, quantizeBase: { bits: 4, blockSize: 32 } })).toThrow(
      /lm_head\.weight' differs from 'model\.embed_tokens\.weight'/,
    );
  });

  it('a checkpoint holds only the adapters (and the quantization) and reloads to the same logits', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-qbase-'));
    const init = PolicyModel.init(cfg, 6, { threads: 1 });
    saveCheckpoint(join(dir, 'base'), cfg, init.weights);
    await init.dispose();
    const m = keep(PolicyModel.load(join(dir, 'base'), { threads: 1, lora, quantizeBase: { bits: 4, blockSize: 32 } }));
    // Loaded from a folder: the float32 arrays of the quantized weights are dropped.
    for (const n of baseQuantNames(cfg)) expect(m.weights.has(n)).toBe(false);
    perturbAdapters(m);
    const name0 = baseQuantNames(cfg)[0]!;
    const codes0 = Uint8Array.from(m.quantizedBase().get(name0)!.codes);
    const batch = randomTokenBatch(cfg.vocabSize, 2, 8, 9);
    const step = await m.trainStep(batch, nllLoss, batch.valid);
    // The codes were moved to the model's ORT worker (the only copy; the CPU decode session reads them there as
    // external initializers); asked for, they are quantized again from the base folder: the same codes.
    expect((m as unknown as { baseMats: Map<string, { codes: Uint8Array }> }).baseMats.get(name0)!.codes.length).toBe(0);
    expect(Buffer.from(m.quantizedBase().get(name0)!.codes).equals(Buffer.from(codes0))).toBe(true);
    for (const [k, g] of step.grads) m.weights.get(k)!.forEach((v, i, a) => (a[i] = v - 0.1 * g[i]!));
    m.markWeightsUpdated();
    const before = await m.score(seqs);
    m.save(join(dir, 'ck'));
    const files = readdirSync(join(dir, 'ck')).sort();
    expect(files).toEqual(['adapter_config.json', 'adapter_model.safetensors', 'arbor_lora_state.json']);
    expect(JSON.parse(readFileSync(join(dir, 'ck', 'arbor_lora_state.json'), 'utf8'))).toMatchObject({ quantize_base: 'int4', quantize_block: 32 });
    const back = keep(PolicyModel.load(join(dir, 'ck'), { threads: 1 }));
    expect(back.baseQuant).toEqual({ bits: 4, blockSize: 32 });
    const after = await back.score(seqs);
    expect(maxDiff(after.logprobs, before.logprobs)).toBe(0);
    const [d1, d2] = [(await m.decode(prefill(seqs[0]!))).logits, (await back.decode(prefill(seqs[0]!))).logits];
    expect(maxDiff(d1, d2)).toBe(0);
    // The float32 base on request (quantizeBase: null) is another model.
    const float = keep(PolicyModel.load(join(dir, 'ck'), { threads: 1, quantizeBase: null }));
    expect(float.baseQuant).toBeUndefined();
    expect(maxDiff((await float.score(seqs)).logprobs, before.logprobs)).toBeGreaterThan(0);
  });
});
