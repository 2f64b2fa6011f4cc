/**
 * Ops.attention (the decode graph's attention over the KV cache as one ONNX Attention node on
 * ORT's CPU provider) against the unfused MatMul/Softmax form: the same logits, sampled tokens
 * and present caches for left-padded rows with holes (a prefill of several tokens per row after a
 * past, rows of different lengths), GQA, MHA and q/k-norm models; the WebGPU lowering of the op
 * (MatMul/Softmax nodes) run on the CPU; and tfjs, which has no fused op, through PolicyModel.decode.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { onnx } from 'onnx-proto';
import { tinyConfig, weightShapes, type ModelConfig } from '../../../engine/model/config';
import { buildAttentionBias, decodeInputSpecs, decodeProgram, sampleFeeds } from '../../../engine/model/graphs';
import { initWeights } from '../../../engine/model/checkpoint';
import { PolicyModel } from '../../../engine/model/runtime';
import { traceGraph } from '../../../engine/tensor/graph';
import { toOnnx } from '../../../engine/tensor/onnx';
import { ort } from '../../../engine/tensor/ort';

const configs: Record<string, ModelConfig> = {
  'GQA, qkv bias': tinyConfig({ vocabSize: 29, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2 }),
  'q/k norm, 1 KV head': tinyConfig({
    vocabSize: 23,
    hiddenSize: 32,
    layers: 2,
    heads: 4,
    kvHeads: 1,
    architecture: 'Qwen3ForCausalLM',
    tieWordEmbeddings: false,
  }),
  MHA: tinyConfig({ vocabSize: 19, hiddenSize: 16, layers: 1, heads: 2, kvHeads: 2, architecture: 'LlamaForCausalLM' }),
};

const models: PolicyModel[] = [];
afterAll(async () => {
  for (const m of models) await m.dispose();
});

/** Three rows, past P = 4 and T = 3 new tokens: row 0 full, row 1 left-padded past and one new token, row 2 an empty past. */
function inputs(c: ModelConfig) {
  const B = 3,
    P = 4,
    T = 3,
    S = P + T;
  const mask = Int32Array.from([1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1]);
  const ids = Int32Array.from([3, 4, 5, 0, 0, 6, 7, 8, 9].map((t) => t % c.vocabSize));
  const pos = Int32Array.from([4, 5, 6, 0, 0, 2, 0, 1, 2]);
  let seed = 7;
  const rnd = () => ((seed = (seed * 48271) % 2147483647) / 2147483647) * 2 - 1;
  const past = Array.from({ length: c.numLayers }, () => ({
    k: Float32Array.from({ length: B * c.numKvHeads * P * c.headDim }, rnd),
    v: Float32Array.from({ length: B * c.numKvHeads * P * c.headDim }, rnd),
  }));
  return { B, P, T, S, mask, ids, pos, past };
}

function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (a[i]! - b[i]!) ** 2;
    den += b[i]! ** 2;
  }
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-12);
}

const opTypes = (bytes: Uint8Array) => new Set(onnx.ModelProto.decode(bytes).graph!.node!.map((n) => n.opType));

describe('fused attention in the decode graph', () => {
  for (const [name, c] of Object.entries(configs)) {
    it(`${name}: fused, its WebGPU lowering and the unfused graph agree`, async () => {
      const O = ort();
      const x = inputs(c);
      const W = initWeights(c, 3);
      const feeds: Record<string, import('onnxruntime-node').Tensor> = {};
      for (const [k, shape] of Object.entries(weightShapes(c))) feeds[k] = new O.Tensor('float32', W.get(k)!, shape);
      feeds.input_ids = new O.Tensor('int32', x.ids, [x.B, x.T]);
      feeds.position_ids = new O.Tensor('int32', x.pos, [x.B, x.T]);
      feeds.attn_bias = new O.Tensor('float32', buildAttentionBias(x.mask, x.B, x.T, x.S), [x.B, 1, x.T, x.S]);
      x.past.forEach((l, i) => {
        feeds[`past_k_${i}`] = new O.Tensor('float32', l.k, [x.B, c.numKvHeads, x.P, c.headDim]);
        feeds[`past_v_${i}`] = new O.Tensor('float32', l.v, [x.B, c.numKvHeads, x.P, c.headDim]);
      });
      const u = Float32Array.from([0.2, 0.5, 0.9]);
      for (const [k, t] of Object.entries(sampleFeeds(x.B, { u, invTemp: new Float32Array(3).fill(1), greedy: new Float32Array(3) })))
        feeds[k] = new O.Tensor('float32', t.data as Float32Array, t.shape);
      const graph = (fusedAttention: boolean) => traceGraph(decodeInputSpecs(c), decodeProgram(c, undefined, { fusedAttention }));
      const fused = toOnnx(graph(true));
      const lowered = toOnnx(graph(true), { webgpu: true });
      const unfused = toOnnx(graph(false));
      expect(opTypes(fused).has('Attention')).toBe(true);
      expect(opTypes(fused).has('Softmax')).toBe(false);
      expect(opTypes(lowered).has('Attention')).toBe(false);
      expect(opTypes(unfused).has('Attention')).toBe(false);
      const run = async (bytes: Uint8Array) => (await O.InferenceSession.create(bytes, { intraOpNumThreads: 1 })).run(feeds);
      const [a, b, r] = [await run(fused), await run(lowered), await run(unfused)];
      for (const other of [b, a]) {
        expect(relErr(other.logits!.data as Float32Array, r.logits!.data as Float32Array)).toBeLessThan(1e-5);
        expect(Array.from(other.token!.data as Int32Array)).toEqual(Array.from(r.token!.data as Int32Array));
        for (let i = 0; i < c.numLayers; i++)
          for (const kv of ['k', 'v']) {
            expect(other[`present_${kv}_${i}`]!.dims).toEqual([x.B, c.numKvHeads, x.S, c.headDim]);
            expect(relErr(other[`present_${kv}_${i}`]!.data as Float32Array, r[`present_${kv}_${i}`]!.data as Float32Array)).toBeLessThan(1e-6);
          }
      }
      // The past is carried into the present unchanged (row 1's padded columns too).
      const pk = a.present_k_0!.data as Float32Array;
      const hd = c.headDim;
      for (let h = 0; h < x.B * c.numKvHeads; h++)
        expect(Array.from(pk.subarray(h * x.S * hd, (h * x.S + x.P) * hd))).toEqual(Array.from(x.past[0]!.k.subarray(h * x.P * hd, (h + 1) * x.P * hd)));
    });
  }

  it('tfjs (no fused op) decodes the same as ORT', async () => {
    const c = configs['GQA, qkv bias']!;
    const x = inputs(c);
    const o = PolicyModel.init(c, 3, { threads: 1 });
    const t = new PolicyModel(c, o.weights, { backend: 'tfjs' });
    models.push(o, t);
    const call = { batch: x.B, newLength: x.T, pastLength: x.P, inputIds: x.ids, positionIds: x.pos, attentionMask: x.mask, past: x.past };
    const [a, b] = [await o.decode(call), await t.decode(call)];
    expect(relErr(a.logits, b.logits)).toBeLessThan(1e-5);
    a.present.forEach((l, i) => {
      expect(relErr(l.k, b.present[i]!.k)).toBeLessThan(1e-5);
      expect(relErr(l.v, b.present[i]!.v)).toBeLessThan(1e-5);
    });
  });
});
