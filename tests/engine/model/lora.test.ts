/**
 * LoRA on the tiny transformer: fresh adapters leave the model bit-identical, a training step
 * changes only adapter tensors (base bitwise unchanged), ORT and tfjs agree on the adapters'
 * gradients, the adapted model equals the merged one, dropout acts in training only, and the
 * PEFT folder has PEFT's names and config and reads back exactly.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { packSequences, type LossSpec } from '../../../engine/model/graphs';
import { readSafetensors } from '../../../engine/model/safetensors';
import { adapterShapes, isAdapterName, loraDropoutScale, mergeAdapters, resolveLora } from '../../../engine/model/lora';
import { traceGraph } from '../../../engine/tensor/graph';
import { OrtRunner } from '../../../engine/tensor/ort';
import { readPeftAdapter } from '../../../engine/model/peft';
import { AdamW } from '../../../engine/rl/optimizer';
import type { Ops } from '../../../engine/tensor/ops';

const models: PolicyModel[] = [];
afterAll(async () => {
  for (const m of models) await m.dispose();
});

function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-12);
}

const cfg = tinyConfig({ vocabSize: 29, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2 });
const spec = resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: 'all-linear' });
const nll: LossSpec = {
  key: 'nll',
  inputs: [],
  program: <T>(o: Ops<T>, t: { logprobs: T; mask: T }) => ({ loss: o.div(o.neg(o.sum(o.mul(t.logprobs, t.mask), [0, 1])), o.sum(t.mask, [0, 1])) }),
};
const seqs = [
  [1, 5, 7, 3, 2, 9],
  [4, 4, 8],
  [2, 3, 11, 6, 1, 1, 5],
];

/** Give B non-zero values so the adapters change the outputs. */
function perturbB(m: PolicyModel): void {
  for (const [k, w] of m.weights) if (k.endsWith('lora_B.weight')) for (let i = 0; i < w.length; i++) w[i] = 0.05 * Math.sin(3 * i + k.length);
  m.markWeightsUpdated();
}

describe('LoRA adapters', () => {
  it('fresh adapters (B = 0) give the base model bit for bit', async () => {
    const base = PolicyModel.init(cfg, 3, { threads: 1 });
    const lora = new PolicyModel(cfg, new Map(base.weights), { threads: 1, lora: spec, loraSeed: 1 });
    models.push(base, lora);
    const a = await base.score(seqs);
    const b = await lora.score(seqs);
    expect(Buffer.from(b.logprobs.buffer).equals(Buffer.from(a.logprobs.buffer))).toBe(true);
    expect(lora.trainableNames().every(isAdapterName)).toBe(true);
    expect(lora.trainableNames().length).toBe(cfg.numLayers * 7 * 2);
  });

  it('a training step changes only adapters; the base stays bitwise unchanged', async () => {
    const m = PolicyModel.init(cfg, 4, { threads: 1, lora: spec, loraSeed: 2 });
    models.push(m);
    perturbB(m);
    const before = new Map([...m.weights].map(([k, v]) => [k, Float32Array.from(v)]));
    const batch = packSequences(seqs);
    const opt = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: 0.01 });
    const r = await m.trainStep(batch, nll, batch.valid);
    expect([...r.grads.keys()].sort()).toEqual(Object.keys(adapterShapes(cfg, spec)).sort());
    opt.step(m.weights, r.grads, 1e-2);
    m.markWeightsUpdated();
    let changedAdapters = 0;
    for (const [k, v] of m.weights) {
      const same = Buffer.from(v.buffer, v.byteOffset, v.byteLength).equals(Buffer.from(before.get(k)!.buffer));
      if (isAdapterName(k)) changedAdapters += same ? 0 : 1;
      else expect(same, k).toBe(true);
    }
    expect(changedAdapters).toBe(m.trainableNames().length);
    // The new adapters reach the worker: the loss moves.
    const r2 = await m.trainStep(batch, nll, batch.valid);
    expect(r2.loss).not.toBe(r.loss);
  });

  it('ORT and tfjs agree on the loss and the adapter gradients', async () => {
    const ort = PolicyModel.init(cfg, 5, {
      threads: 1,
      lora: resolveLora({ rank: 3, alpha: 6, dropout: 0, target_modules: ['q_proj', 'v_proj', 'down_proj'] }),
      loraSeed: 3,
    });
    perturbB(ort);
    const tfm = new PolicyModel(cfg, ort.weights, { backend: 'tfjs', lora: ort.lora });
    models.push(ort, tfm);
    const batch = packSequences(seqs);
    const ga = await ort.trainStep(batch, nll, batch.valid);
    const gb = await tfm.trainStep(batch, nll, batch.valid);
    expect(Math.abs(ga.loss - gb.loss) / gb.loss).toBeLessThan(1e-4);
    expect(ga.grads.size).toBe(cfg.numLayers * 3 * 2);
    for (const [k, g] of gb.grads) expect(relErr(ga.grads.get(k)!, g), k).toBeLessThan(1e-3);
  });

  it('base + adapters equals the merged weights', async () => {
    const m = PolicyModel.init(cfg, 6, { threads: 1, lora: spec, loraSeed: 4 });
    perturbB(m);
    const merged = new PolicyModel(cfg, mergeAdapters(cfg, spec, m.baseWeights(), m.weights), { threads: 1 });
    models.push(m, merged);
    const a = await m.score(seqs);
    const b = await merged.score(seqs);
    expect(relErr(a.logprobs, b.logprobs)).toBeLessThan(1e-5);
    const plain = PolicyModel.init(cfg, 6, { threads: 1 });
    models.push(plain);
    expect(relErr((await plain.score(seqs)).logprobs, b.logprobs)).toBeGreaterThan(1e-3); // the adapters matter
    // Decode (KV cache) sees the adapters too.
    const [la] = await m.lastLogits([seqs[0]]);
    const [lb] = await merged.lastLogits([seqs[0]]);
    expect(relErr(la, lb)).toBeLessThan(1e-5);
  });

  it('dropout: fresh masks on every training call, none when scoring', async () => {
    const d = resolveLora({ rank: 4, alpha: 8, dropout: 0.5, target_modules: 'all-linear' });
    const m = PolicyModel.init(cfg, 7, { threads: 1, lora: d, loraSeed: 5 });
    const ref = new PolicyModel(cfg, m.weights, { threads: 1, lora: spec });
    models.push(m, ref);
    perturbB(m);
    const batch = packSequences(seqs);
    const l1 = (await m.trainStep(batch, nll, batch.valid)).loss;
    const l2 = (await m.trainStep(batch, nll, batch.valid)).loss;
    const noDrop = (await ref.trainStep(batch, nll, batch.valid)).loss;
    expect(l1).not.toBe(l2);
    expect(l1).not.toBe(noDrop);
    // Scoring has no dropout: identical to the same weights scored without it.
    ref.markWeightsUpdated();
    expect(relErr((await m.score(seqs)).logprobs, (await ref.score(seqs)).logprobs)).toBe(0);
  });

  it('saves a PEFT folder with PEFT names and config, and reads it back exactly', async () => {
    const m = PolicyModel.init(cfg, 8, { threads: 1, lora: spec, loraSeed: 6 });
    models.push(m);
    perturbB(m);
    const dir = join(mkdtempSync(join(tmpdir(), 'arbor-lora-')), 'adapter');
    m.save(dir);
    const conf = JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8'));
    expect(conf).toMatchObject({
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r: 4,
      lora_alpha: 8,
      lora_dropout: 0,
      bias: 'none',
      use_dora: false,
      use_rslora: false,
      fan_in_fan_out: false,
      base_model_name_or_path: 'base',
    });
    expect(conf.target_modules).toEqual(['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']);
    const t = readSafetensors(join(dir, 'adapter_model.safetensors'));
    expect(t.get('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight')!.shape).toEqual([4, 32]);
    expect(t.get('base_model.model.model.layers.1.mlp.down_proj.lora_A.weight')!.shape).toEqual([4, 96]);
    expect(t.get('base_model.model.model.layers.1.mlp.down_proj.lora_B.weight')!.shape).toEqual([32, 4]);
    expect(t.size).toBe(cfg.numLayers * 7 * 2);
    // The built-in base has no folder: it is saved under base/ and the adapter names it.
    expect(existsSync(join(dir, 'base', 'model.safetensors'))).toBe(true);
    const back = readPeftAdapter(dir, cfg);
    for (const [k, v] of back.adapters) expect(Buffer.from(v.buffer).equals(Buffer.from(Float32Array.from(m.weights.get(k)!).buffer)), k).toBe(true);
    // PolicyModel.load on the adapter folder puts it on its base: same logprobs.
    const loaded = PolicyModel.load(dir, { threads: 1 });
    models.push(loaded);
    expect(loaded.lora).toEqual(spec);
    expect(relErr((await loaded.score(seqs)).logprobs, (await m.score(seqs)).logprobs)).toBe(0);
  });

  it('dropout masks in ORT: keep rate 1 − p, scaled by 1/(1 − p), independent across seeds and modules', async () => {
    const p = 0.3;
    const prog = <T>(o: Ops<T>, x: Record<string, T>) => ({
      a: loraDropoutScale(o, x.x!, { p, seed: x.seed!, salt: 3 }),
      b: loraDropoutScale(o, x.x!, { p, seed: x.seed2!, salt: 3 }),
      c: loraDropoutScale(o, x.x!, { p, seed: x.seed!, salt: 4 }),
    });
    const g = traceGraph(
      [
        { name: 'x', dtype: 'float32', shape: ['batch', 'seq', 96] },
        { name: 'seed', dtype: 'float32', shape: [] },
        { name: 'seed2', dtype: 'float32', shape: [] },
      ],
      prog,
    );
    const r = await OrtRunner.create(g, { inWorker: false });
    const n = 4 * 64 * 96;
    const out = await r.run({
      x: { dtype: 'float32', shape: [4, 64, 96], data: new Float32Array(n) },
      seed: { dtype: 'float32', shape: [], data: Float32Array.of(104729) },
      seed2: { dtype: 'float32', shape: [], data: Float32Array.of(209458) },
    });
    const keep = (k: string) => Array.from(out[k]!.data as Float32Array, (v) => (v > 0 ? 1 : 0));
    const [a, b, c] = [keep('a'), keep('b'), keep('c')];
    const mean = (xs: number[]) => xs.reduce((s, v) => s + v, 0) / xs.length;
    expect(Math.abs(mean(a) - (1 - p))).toBeLessThan(0.02);
    expect(new Set(Array.from(out.a!.data as Float32Array)).size).toBe(2); // 0 and 1/(1−p)
    expect(Math.max(...Array.from(out.a!.data as Float32Array))).toBeCloseTo(1 / (1 - p), 5);
    // Independent masks keep a position in both with probability (1 − p)².
    expect(Math.abs(mean(a.map((v, i) => v * b[i]!)) - (1 - p) ** 2)).toBeLessThan(0.02);
    expect(Math.abs(mean(a.map((v, i) => v * c[i]!)) - (1 - p) ** 2)).toBeLessThan(0.02);
    // No structure along rows or features: keep rates per token row and per feature stay near 1 − p.
    const rowRates = Array.from({ length: 4 * 64 }, (_, t) => mean(a.slice(t * 96, (t + 1) * 96)));
    const colRates = Array.from({ length: 96 }, (_, f) => mean(Array.from({ length: 256 }, (_, t) => a[t * 96 + f]!)));
    expect(Math.max(...rowRates.map((x) => Math.abs(x - (1 - p))))).toBeLessThan(0.25);
    expect(Math.max(...colRates.map((x) => Math.abs(x - (1 - p))))).toBeLessThan(0.15);
    await r.dispose();
  });

  it('refuses adapter layouts it cannot represent, naming the field', () => {
    expect(() => resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: ['q_proj', 'lm_head'] })).toThrow(/target_modules: unknown module "lm_head"/);
  });
});
