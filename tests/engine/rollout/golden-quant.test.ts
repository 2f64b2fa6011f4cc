/**
 * Quantized rollouts (rollout.quantize) are pinned like the float32 ones (golden.test.ts): the
 * tokens, logprobs and entropies sampled by the int8 / int4 decode session for fixed seeds, fixed
 * prompt ids and fixed weights were recorded (fixtures/golden-quant-rollouts.json, rewritten with
 * ARBOR_RECORD_GOLDEN=1). A change to the quantization, the MatMulNBits graph or the quantized
 * session's weight feeding must reproduce them. (MatMulNBits at accuracy level 4 quantizes the
 * activations in ONNX Runtime's CPU kernels: recorded on x86-64 with AVX2, onnxruntime-node 1.30.)
 */
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PolicyModel } from '../../../engine/model/runtime';
import { tinyConfig } from '../../../engine/model/config';
import type { QuantMode } from '../../../engine/model/quantize';
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
      const got = summarise((await rollout(backend, opts(c.temperature, c.maxBatch))).trajectories);
      await backend.close?.();
      if (record) {
        recorded[c.name] = got;
        writeFileSync(FIXTURE, JSON.stringify({ ...(existsSync(FIXTURE) ? JSON.parse(readFileSync(FIXTURE, 'utf8')) : {}), ...recorded }) + '\n');
        return;
      }
      const want = golden[c.name];
      expect(want, `fixture has no case '${c.name}' (record with ARBOR_RECORD_GOLDEN=1)`).toBeDefined();
      expect(got.tokens).toEqual(want!.tokens);
      // 1e-3, not golden.test.ts's 2e-4: ORT's int8 kernels sum in another order for another row count per call (2 sessions: 5e-4 seen).
      got.logprobs.flat().forEach((x, i) => expect(Math.abs(x - want!.logprobs.flat()[i]!)).toBeLessThan(1e-3));
      got.entropy.flat().forEach((x, i) => expect(Math.abs(x - want!.entropy.flat()[i]!)).toBeLessThan(1e-3));
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
