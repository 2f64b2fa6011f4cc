/**
 * Quantized rollouts (rollout.quantize) are pinned like the float32 ones (golden.test.ts): the
 * tokens, logprobs and entropies sampled by the int8 / int4 decode session for fixed seeds, fixed
 * prompt ids and fixed weights were recorded (fixtures/golden-quant-rollouts.json, rewritten with
 * ARBOR_RECORD_GOLDEN=1). A change to the quantization, the MatMulNBits graph or the quantized
 * session's weight feeding must reproduce them. (MatMulNBits at accuracy level 4 quantizes the
 * activations in ONNX Runtime's CPU kernels: recorded on x86-64 with AVX2, onnxruntime-node 1.30.)
 *
 * The tolerance is derived from the numerics, not from one CPU: an int8 activation code is the
 * float activation rounded to a step of max|x|/127, and another kernel (AVX-512 or AVX2, other
 * threads, graph optimisations on or off: ARBOR_ORT_THREADS / ARBOR_ORT_GRAPH_OPT) may round an
 * activation that lies near a step boundary the other way. Each kernel's logprobs lie within ε of
 * the logprobs of unquantized activations (the same codes dequantized, float32 products), so two
 * kernels differ by at most 2ε; ε is measured here, on the sampled sequences, by scoring them with
 * the dequantized weights in float32.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PolicyModel } from '../../../engine/model/runtime';
import { tinyConfig } from '../../../engine/model/config';
import { dequantizeBlockwise, quantizeBlockwise, quantizedWeightNames, QUANT_BITS, type QuantMode } from '../../../engine/model/quantize';
import { rollout, type RolloutOptions } from '../../../engine/rollout/engine';
import { policyDecodeBackend } from '../../../engine/rollout/model-backend';
import type { Trajectory } from '../../../engine/rollout/types';
import { idTasks, idTok } from './helpers';

const FIXTURE = join(__dirname, 'fixtures', 'golden-quant-rollouts.json');
const record = process.env.ARBOR_RECORD_GOLDEN === '1';

const V = 300;
// hidden 64 and intermediate 172: two blocks of 32 per row, and a last block padded past K (172 = 5·32 + 12).
const cfg = tinyConfig({ vocabSize: V, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 256, padTokenId: 0 });
cfg.intermediateSize = 172;
const models = new Map<string, PolicyModel>();
const model = (q: QuantMode) => {
  let m = models.get(q);
  if (!m) models.set(q, (m = PolicyModel.init(cfg, 7, { threads: 1, quantize: q })));
  return m;
};
afterAll(async () => {
  for (const m of models.values()) await m.dispose();
});

/**
 * ε of the header: the largest distance between the quantized session's logprobs of the sampled
 * tokens and the float32 logprobs of the same sequences with the dequantized weights.
 */
async function activationRounding(q: Exclude<QuantMode, 'none'>, ts: Trajectory[]): Promise<number> {
  const src = model(q);
  const c = src.config;
  const weights = new Map(src.weights);
  const K = (name: string) => (name.endsWith('down_proj.weight') ? c.intermediateSize : name.endsWith('o_proj.weight') ? c.numHeads * c.headDim : c.hiddenSize);
  for (const name of quantizedWeightNames(c)) {
    const w = src.weights.get(name)!;
    const k = K(name);
    const deq = dequantizeBlockwise(quantizeBlockwise(w, w.length / k, k, QUANT_BITS[q]));
    // A tied table keeps its float32 lookup: the dequantized copy is the head only.
    weights.set(name === 'model.embed_tokens.weight' ? 'lm_head.weight' : name, deq);
  }
  const f32 = new PolicyModel({ ...c, tieWordEmbeddings: false }, weights, { threads: 1 });
  try {
    const seqs = ts.map((t) => [...t.promptIds, ...t.turns.flatMap((u) => u.tokenIds)]);
    const { batch, logprobs } = await f32.score(seqs);
    const L = batch.inputIds.length / seqs.length;
    let eps = 0;
    ts.forEach((t, b) => {
      let pos = t.promptIds.length;
      for (const u of t.turns) {
        if (u.role === 'model') u.logprobs.forEach((lp, i) => (eps = Math.max(eps, Math.abs(lp - logprobs[b * L + pos + i - 1]!))));
        pos += u.tokenIds.length;
      }
    });
    return eps;
  } finally {
    await f32.dispose();
  }
}

const opts = (temperature: number, maxBatch: number): RolloutOptions => ({
  tasks: idTasks(3, 4, V),
  n: 2,
  seed: 21,
  sampling: { temperature },
  tokenizer: idTok,
  maxBatch,
  limits: { maxNewTokens: 9, maxTurns: 3, maxTotalLength: 80 },
  stop: { strings: [], tokenIds: [] },
});

const cases: { name: string; quantize: QuantMode; temperature: number; maxBatch: number }[] = [
  { name: 'int8 T=1 batch 8', quantize: 'int8', temperature: 1, maxBatch: 8 },
  { name: 'int8 greedy batch 3', quantize: 'int8', temperature: 0, maxBatch: 3 },
  { name: 'int4 T=1 batch 8', quantize: 'int4', temperature: 1, maxBatch: 8 },
];

type Golden = Record<string, { tokens: number[][]; logprobs: number[][]; entropy: number[][] }>;
const summarise = (ts: Trajectory[]) => ({
  tokens: ts.map((t) => t.turns.filter((u) => u.role === 'model').flatMap((u) => u.tokenIds)),
  logprobs: ts.map((t) => t.turns.filter((u) => u.role === 'model').flatMap((u) => u.logprobs)),
  entropy: ts.map((t) => t.turns.filter((u) => u.role === 'model').flatMap((u) => u.entropy)),
});

describe('quantized rollouts reproduce the recorded ones', () => {
  const golden: Golden = !record && existsSync(FIXTURE) ? (JSON.parse(readFileSync(FIXTURE, 'utf8')) as Golden) : {};
  const recorded: Golden = {};
  const runs = record ? cases.map((c) => ({ ...c, shards: 1 })) : [...cases.map((c) => ({ ...c, shards: 1 })), ...cases.map((c) => ({ ...c, shards: 2 }))];
  for (const c of runs)
    it(`${c.name}${c.shards > 1 ? `, ${c.shards} decode sessions` : ''}`, async () => {
      const backend = policyDecodeBackend(model(c.quantize), { maxBatch: c.maxBatch, shards: c.shards, quantized: true });
      const res = await rollout(backend, opts(c.temperature, c.maxBatch));
      const got = summarise(res.trajectories);
      await backend.close?.();
      if (record) {
        recorded[c.name] = got;
        writeFileSync(FIXTURE, JSON.stringify({ ...(existsSync(FIXTURE) ? JSON.parse(readFileSync(FIXTURE, 'utf8')) : {}), ...recorded }) + '\n');
        return;
      }
      const want = golden[c.name];
      expect(want, `fixture has no case '${c.name}' (record with ARBOR_RECORD_GOLDEN=1)`).toBeDefined();
      expect(got.tokens).toEqual(want!.tokens);
      // 2ε (the header), and never under 1e-4 (float32 sums in another order; golden.test.ts).
      const eps = await activationRounding(c.quantize as Exclude<QuantMode, 'none'>, res.trajectories);
      const tol = Math.max(2 * eps, 1e-4);
      expect(eps).toBeLessThan(0.05); // the dequantized float32 model is the model the quantized session approximates
      got.logprobs.flat().forEach((x, i) => expect(Math.abs(x - want!.logprobs.flat()[i]!)).toBeLessThan(tol));
      got.entropy.flat().forEach((x, i) => expect(Math.abs(x - want!.entropy.flat()[i]!)).toBeLessThan(tol));
      expect(got.tokens.flat().length).toBeGreaterThan(20);
    });

  it('the quantized sampler is not the float32 one: the same seeds give other logprobs (and the float32 backend of the same model stays float32)', async () => {
    const m = model('int8');
    const f32 = summarise((await rollout(policyDecodeBackend(m, { maxBatch: 8 }), opts(0, 8))).trajectories);
    const q = summarise((await rollout(policyDecodeBackend(m, { maxBatch: 8, quantized: true }), opts(0, 8))).trajectories);
    const plain = PolicyModel.init(cfg, 7, { threads: 1 });
    const ref = summarise((await rollout(policyDecodeBackend(plain, { maxBatch: 8 }), opts(0, 8))).trajectories);
    await plain.dispose();
    expect(f32).toEqual(ref);
    const n = Math.min(q.logprobs.flat().length, f32.logprobs.flat().length);
    let differ = 0;
    for (let i = 0; i < n; i++) if (Math.abs(q.logprobs.flat()[i]! - f32.logprobs.flat()[i]!) > 1e-4) differ++;
    expect(differ).toBeGreaterThan(n / 4);
  });
});
