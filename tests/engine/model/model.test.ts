/**
 * The transformer through both interpreters, the KV-cache decode program against the full
 * forward, checkpoints, and a real optimisation test.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tinyConfig, type ModelConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { packSequences, type LossSpec } from '../../../engine/model/graphs';
import { loadCheckpoint } from '../../../engine/model/checkpoint';
import { readSafetensors } from '../../../engine/model/safetensors';
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

const configs: Record<string, ModelConfig> = {
  'qwen2 (qkv bias, tied, GQA)': tinyConfig({ vocabSize: 29, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2 }),
  'qwen3 (q/k norm, untied)': tinyConfig({
    vocabSize: 23,
    hiddenSize: 32,
    layers: 2,
    heads: 4,
    kvHeads: 1,
    architecture: 'Qwen3ForCausalLM',
    tieWordEmbeddings: false,
  }),
  'llama (MHA)': tinyConfig({ vocabSize: 19, hiddenSize: 16, layers: 1, heads: 2, kvHeads: 2, architecture: 'LlamaForCausalLM' }),
};

// Mean masked NLL with the mean logprob as a metric.
const nll: LossSpec = {
  key: 'nll',
  inputs: [],
  entropy: true,
  program: <T>(o: Ops<T>, t: { logprobs: T; entropy?: T; mask: T }) => {
    const n = o.sum(t.mask, [0, 1]);
    return {
      loss: o.div(o.neg(o.sum(o.mul(t.logprobs, t.mask), [0, 1])), n),
      entropy_mean: o.div(o.sum(o.mul(t.entropy!, t.mask), [0, 1]), n),
    };
  },
};

const seqs = [
  [1, 5, 7, 3, 2, 9],
  [4, 4, 8],
  [2, 3, 11, 6, 1, 1, 5],
];

describe('transformer: ORT and tfjs agree', () => {
  for (const [name, cfg] of Object.entries(configs)) {
    it(name, async () => {
      const ort = PolicyModel.init(cfg, 3, { threads: 2 });
      // Non-trivial norms and biases so every weight matters.
      for (const [k, w] of ort.weights) if (k.includes('norm') || k.endsWith('bias')) for (let i = 0; i < w.length; i++) w[i] += 0.1 * Math.sin(i + k.length);
      const tfm = new PolicyModel(cfg, ort.weights, { backend: 'tfjs' });
      models.push(ort, tfm);
      const batch = packSequences(seqs);
      const a = await ort.score(batch, { entropy: true });
      const b = await tfm.score(batch, { entropy: true });
      expect(relErr(a.logprobs, b.logprobs)).toBeLessThan(1e-4);
      expect(relErr(a.entropy!, b.entropy!)).toBeLessThan(1e-4);
      const ga = await ort.trainStep(batch, nll, batch.valid);
      const gb = await tfm.trainStep(batch, nll, batch.valid);
      expect(Math.abs(ga.loss - gb.loss) / Math.abs(gb.loss)).toBeLessThan(1e-4);
      expect(Math.abs(ga.metrics.entropy_mean - gb.metrics.entropy_mean) / gb.metrics.entropy_mean).toBeLessThan(1e-4);
      for (const [k, g] of gb.grads) expect(relErr(ga.grads.get(k)!, g), k).toBeLessThan(1e-3);
      expect(ga.grads.size).toBe(ort.weights.size);
    });
  }
});

describe('KV-cache decoding', () => {
  it('reproduces full-forward logits with left padding and chunked appends', async () => {
    const cfg = configs['qwen2 (qkv bias, tied, GQA)'];
    const m = PolicyModel.init(cfg, 5, { threads: 1 });
    models.push(m);
    const full = await m.lastLogits([
      [3, 4, 5, 6, 7, 8, 9],
      [10, 11, 12, 13, 14, 15, 16, 17, 18],
    ]);
    // Batch of two rows, left-padded prompts of length 4 and 6 (pad 0, masked).
    const L = cfg.numLayers,
      Hkv = cfg.numKvHeads,
      hd = cfg.headDim;
    const rows = [
      [3, 4, 5, 6, 7, 8, 9],
      [10, 11, 12, 13, 14, 15, 16, 17, 18],
    ];
    const chunks = [
      [4, 6],
      [1, 1],
      [2, 2],
    ]; // tokens per row per call
    let past: { k: Float32Array; v: Float32Array }[] = Array.from({ length: L }, () => ({ k: new Float32Array(0), v: new Float32Array(0) }));
    let P = 0;
    const mask: number[][] = [[], []];
    const consumed = [0, 0];
    let logits: Float32Array = new Float32Array(0);
    for (const chunk of chunks) {
      const T = Math.max(...chunk);
      const ids = new Int32Array(2 * T),
        pos = new Int32Array(2 * T);
      for (let b = 0; b < 2; b++) {
        const n = chunk[b],
          pad = T - n;
        for (let t = 0; t < pad; t++) mask[b].push(0);
        for (let t = 0; t < n; t++) {
          ids[b * T + pad + t] = rows[b][consumed[b] + t];
          pos[b * T + pad + t] = consumed[b] + t;
          mask[b].push(1);
        }
        consumed[b] += n;
      }
      const out = await m.decode({
        batch: 2,
        newLength: T,
        pastLength: P,
        inputIds: ids,
        positionIds: pos,
        attentionMask: Int32Array.from([...mask[0], ...mask[1]]),
        past,
      });
      past = out.present;
      P += T;
      logits = out.logits;
      expect(out.present[0].k.length).toBe(2 * Hkv * P * hd);
    }
    const V = cfg.vocabSize;
    expect(relErr(logits.subarray(0, V), full[0])).toBeLessThan(1e-5);
    expect(relErr(logits.subarray(V, 2 * V), full[1])).toBeLessThan(1e-5);
  });
});

describe('checkpoints', () => {
  it('save → load gives bit-identical logits', async () => {
    const cfg = configs['qwen3 (q/k norm, untied)'];
    const m = PolicyModel.init(cfg, 11, { threads: 1 });
    const dir = mkdtempSync(join(tmpdir(), 'arbor-ck-'));
    m.save(dir);
    const m2 = PolicyModel.load(dir, { threads: 1 });
    models.push(m, m2);
    const a = await m.score(seqs);
    const b = await m2.score(seqs);
    expect(Buffer.from(a.logprobs.buffer).equals(Buffer.from(b.logprobs.buffer))).toBe(true);
    expect(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')).architectures).toEqual(['Qwen3ForCausalLM']);
  });

  it('truncated and corrupted safetensors give clear errors naming the file', () => {
    const cfg = configs['llama (MHA)'];
    const dir = mkdtempSync(join(tmpdir(), 'arbor-ck-'));
    PolicyModel.init(cfg, 1).save(dir);
    const file = join(dir, 'model.safetensors');
    const bytes = readFileSync(file);
    writeFileSync(file, bytes.subarray(0, bytes.length - 100));
    expect(() => loadCheckpoint(dir)).toThrow(new RegExp(`${file}: truncated: tensor '.+' ends at byte`));
    const bad = Buffer.from(bytes);
    bad.writeBigUInt64LE(10n ** 12n, 0);
    writeFileSync(file, bad);
    expect(() => readSafetensors(file)).toThrow(/corrupted or truncated safetensors: header length/);
    writeFileSync(file, Buffer.concat([bytes.subarray(0, 8), Buffer.from('{not json'), bytes.subarray(17)]));
    expect(() => readSafetensors(file)).toThrow(/invalid JSON/);
  });

  it('unsupported architecture and wrong tensor shapes are named', () => {
    const cfg = configs['llama (MHA)'];
    const dir = mkdtempSync(join(tmpdir(), 'arbor-ck-'));
    PolicyModel.init(cfg, 1).save(dir);
    const cj = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...cj, hidden_size: 32, head_dim: 16 }));
    expect(() => loadCheckpoint(dir)).toThrow(/tensor 'model.embed_tokens.weight' has shape \[19,16\], expected \[19,32\]/);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...cj, architectures: ['GPT2LMHeadModel'] }));
    expect(() => loadCheckpoint(dir)).toThrow(/unsupported architecture "GPT2LMHeadModel"; supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM/);
  });
});

describe('optimisation', () => {
  it('AdamW on a fixed sequence-reversal task drives the loss below 40% of its start', async () => {
    const cfg = tinyConfig({ vocabSize: 12, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2 });
    const m = PolicyModel.init(cfg, 42, { threads: 2 });
    models.push(m);
    // Sequences: BOS(1) a b c d SEP(2) d c b a, with digits 3..11; loss only after SEP.
    let s = 7;
    const rnd = () => (s = (s * 48271) % 2147483647) / 2147483647;
    const data = Array.from({ length: 32 }, () => {
      const xs = Array.from({ length: 4 }, () => 3 + Math.floor(rnd() * 9));
      return [1, ...xs, 2, ...xs.slice().reverse()];
    });
    const batch = packSequences(data);
    const mask = new Float32Array(batch.valid.length);
    for (let b = 0; b < batch.batch; b++) for (let t = 5; t < 9; t++) mask[b * batch.length + t] = 1;
    const st = new Map<string, { m: Float32Array; v: Float32Array }>();
    const lr = 1e-2,
      b1 = 0.9,
      b2 = 0.999;
    let first = 0,
      last = 0;
    for (let step = 1; step <= 60; step++) {
      const r = await m.trainStep(batch, nll, mask);
      if (step === 1) first = r.loss;
      last = r.loss;
      for (const [k, g] of r.grads) {
        const w = m.weights.get(k)!;
        let e = st.get(k);
        if (!e) st.set(k, (e = { m: new Float32Array(w.length), v: new Float32Array(w.length) }));
        for (let i = 0; i < w.length; i++) {
          e.m[i] = b1 * e.m[i] + (1 - b1) * g[i];
          e.v[i] = b2 * e.v[i] + (1 - b2) * g[i] * g[i];
          w[i] -= lr * (e.m[i] / (1 - b1 ** step) / (Math.sqrt(e.v[i] / (1 - b2 ** step)) + 1e-8));
        }
      }
      m.markWeightsUpdated();
    }
    expect(first).toBeGreaterThan(1.5);
    expect(last).toBeLessThan(0.4 * first);
  });
});
