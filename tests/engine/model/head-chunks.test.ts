/**
 * The LM head in row chunks (transformer.ts headLogprobs: logits → log-softmax → picked logprob
 * per chunk, recomputed chunk by chunk in the backward pass) gives the same logprobs, entropy,
 * loss and gradients as the unchunked head, for full and LoRA training, tied and untied heads,
 * and more chunks than tokens (empty chunks). Also: the recompute really happens (the train
 * graph's backward clones the chunk's matmul and log-softmax instead of reading the forward's).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { tinyConfig, weightShapes, type ModelConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { packSequences, programWeightShapes, trainInputSpecs, trainProgram } from '../../../engine/model/graphs';
import { resolveLora } from '../../../engine/model/lora';
import { traceGraph } from '../../../engine/tensor/graph';
import { withGradients } from '../../../engine/tensor/autodiff';
import { sessionOptions } from '../../../engine/tensor/ort';
// Masked NLL minus an entropy bonus: the entropy's gradient goes through the chunks too.
import { nllEntropyLoss as loss } from './entropy-loss';

const models: PolicyModel[] = [];
afterAll(async () => {
  for (const m of models) await m.dispose();
});

function maxRel(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0,
    den = 0;
  for (let i = 0; i < b.length; i++) {
    num = Math.max(num, Math.abs(a[i] - b[i]));
    den = Math.max(den, Math.abs(b[i]));
  }
  return num / Math.max(den, 1e-12);
}

const seqs = [
  [1, 5, 7, 3, 2, 9, 12, 4],
  [4, 4, 8],
  [2, 3, 11, 6, 1, 1, 5, 30, 17],
];

const configs: Record<string, ModelConfig> = {
  'tied (qwen2)': tinyConfig({ vocabSize: 37, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2 }),
  'untied (qwen3)': tinyConfig({ vocabSize: 41, hiddenSize: 32, layers: 1, heads: 4, kvHeads: 1, architecture: 'Qwen3ForCausalLM', tieWordEmbeddings: false }),
};

describe('LM head in row chunks = unchunked', () => {
  const cases: [string, boolean][] = [
    ['tied (qwen2)', true],
    ['untied (qwen3)', false],
  ];
  for (const [name, lora] of cases) {
    const cfg = configs[name];
    {
      it(`${name}${lora ? ', LoRA' : ', full'}`, async () => {
        const spec = lora ? resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: 'all-linear' }) : undefined;
        const base = PolicyModel.init(cfg, 5, { threads: 1, headChunks: 1, lora: spec });
        // Non-zero B so the adapters change the logits and get gradients through them.
        for (const [k, w] of base.weights) if (k.includes('lora_B')) for (let i = 0; i < w.length; i++) w[i] = 0.05 * Math.sin(i + k.length);
        models.push(base);
        const batch = packSequences(seqs);
        const ref = await base.score(batch, { entropy: true });
        const refStep = await base.trainStep(batch, loss, batch.valid);
        // 3 chunks of 8 rows; 40 > 24 rows (most chunks empty).
        for (const chunks of [3, 40]) {
          const m = new PolicyModel(cfg, base.weights, { threads: 1, headChunks: chunks, lora: spec });
          models.push(m);
          const s = await m.score(batch, { entropy: true });
          expect(maxRel(s.logprobs, ref.logprobs)).toBeLessThan(1e-6);
          expect(maxRel(s.entropy!, ref.entropy!)).toBeLessThan(1e-6);
          const st = await m.trainStep(batch, loss, batch.valid);
          expect(Math.abs(st.loss - refStep.loss)).toBeLessThan(1e-6 * Math.abs(refStep.loss));
          expect(st.metrics.entropy_mean).toBeCloseTo(refStep.metrics.entropy_mean, 6);
          expect([...st.grads.keys()].sort()).toEqual([...refStep.grads.keys()].sort());
          for (const [k, g] of refStep.grads) expect(maxRel(st.grads.get(k)!, g), `${k} (${chunks} chunks)`).toBeLessThan(1e-5);
        }
      });
    }
  }
});

describe('blocks recomputed in the backward pass (recomputeLayers) = stored activations', () => {
  it('same loss and gradients, LoRA and full', async () => {
    const cfg = configs['tied (qwen2)'];
    const batch = packSequences(seqs);
    for (const lora of [resolveLora({ rank: 4, alpha: 8, dropout: 0.1, target_modules: 'all-linear' }), undefined]) {
      const ref = PolicyModel.init(cfg, 6, { threads: 1, lora, loraSeed: 2 });
      for (const [k, w] of ref.weights) if (k.includes('lora_B')) for (let i = 0; i < w.length; i++) w[i] = 0.05 * Math.cos(i + k.length);
      const rc = new PolicyModel(cfg, ref.weights, { threads: 1, lora, loraSeed: 2, recomputeLayers: true, headChunks: 3 });
      models.push(ref, rc);
      // dropout > 0: the recomputed block must draw the same masks as its forward pass.
      const [a, b] = [await ref.trainStep(batch, loss, batch.valid), await rc.trainStep(batch, loss, batch.valid)];
      expect(Math.abs(a.loss - b.loss)).toBeLessThan(1e-6 * Math.abs(a.loss));
      for (const [k, g] of a.grads) expect(maxRel(b.grads.get(k)!, g), k).toBeLessThan(1e-5);
    }
  });
});

describe('a frozen head (LoRA) takes its gradient in closed form = the differentiated head', () => {
  for (const name of ['tied (qwen2)', 'untied (qwen3)']) {
    it(name, async () => {
      const cfg = configs[name];
      const headName = cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
      const spec = resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: 'all-linear' });
      const batch = packSequences(seqs);
      for (const chunks of [1, 3]) {
        const m = PolicyModel.init(cfg, 9, { threads: 1, headChunks: chunks, lora: spec });
        for (const [k, w] of m.weights) if (k.includes('lora_B')) for (let i = 0; i < w.length; i++) w[i] = 0.05 * Math.sin(3 * i + k.length);
        models.push(m);
        const adapters = m.trainableNames();
        const closed = await m.trainStep(batch, loss, batch.valid); // head frozen: closed form
        const diff = await m.trainStep(batch, loss, batch.valid, {}, [...adapters, headName]); // head differentiated: the autodiff's path
        expect(diff.grads.has(headName)).toBe(true);
        expect(closed.grads.has(headName)).toBe(false);
        expect(Math.abs(closed.loss - diff.loss)).toBeLessThan(1e-6 * Math.abs(diff.loss));
        expect(closed.metrics.entropy_mean).toBeCloseTo(diff.metrics.entropy_mean, 6);
        for (const k of adapters) expect(maxRel(closed.grads.get(k)!, diff.grads.get(k)!), `${k} (${chunks} chunks)`).toBeLessThan(1e-5);
      }
    });
  }
  it('has no head recompute and no [rows, V] tensor in the backward pass', () => {
    const cfg = configs['tied (qwen2)'];
    const spec = resolveLora({ rank: 4, alpha: 8, dropout: 0, target_modules: 'all-linear' });
    const adapters = Object.keys(programWeightShapes(cfg, spec)).filter((k) => k.includes('lora_'));
    const fwd = traceGraph(trainInputSpecs(cfg, loss, spec), trainProgram(cfg, loss, spec, 4, false, true));
    const g = withGradients(fwd, 'loss', adapters);
    const V = cfg.vocabSize;
    const backward = g.nodes.slice(fwd.nodes.length);
    expect(backward.filter((n) => n.shape[n.shape.length - 1] === V)).toEqual([]);
    expect(g.nodes.filter((n) => n.op === 'logSoftmax').length).toBe(4);
  });
});

describe('a recompute budget (recomputeLayers: k, the first k blocks)', () => {
  const cfg = tinyConfig({ vocabSize: 37, hiddenSize: 32, layers: 3, heads: 4, kvHeads: 2 });
  it('gives the loss and gradients of full recompute and of none', async () => {
    const batch = packSequences(seqs);
    const lora = resolveLora({ rank: 4, alpha: 8, dropout: 0.1, target_modules: 'all-linear' });
    const none = PolicyModel.init(cfg, 8, { threads: 1, lora, loraSeed: 3, headChunks: 3 });
    for (const [k, w] of none.weights) if (k.includes('lora_B')) for (let i = 0; i < w.length; i++) w[i] = 0.05 * Math.sin(2 * i + k.length);
    models.push(none);
    const ref = await none.trainStep(batch, loss, batch.valid);
    for (const budget of [1, 2] as const) {
      const m = new PolicyModel(cfg, none.weights, { threads: 1, lora, loraSeed: 3, headChunks: 3, recomputeLayers: budget });
      models.push(m);
      const r = await m.trainStep(batch, loss, batch.valid);
      expect(Math.abs(r.loss - ref.loss)).toBeLessThan(1e-6 * Math.abs(ref.loss));
      for (const [k, g] of ref.grads) expect(maxRel(r.grads.get(k)!, g), `${k} (budget ${budget})`).toBeLessThan(1e-5);
    }
  });
  it('recomputes exactly the first k blocks', () => {
    const names = Object.keys(weightShapes(cfg));
    for (const [budget, want] of [
      [0, []],
      [2, [0, 1]],
      [true, [0, 1, 2]],
      [false, []],
    ] as const) {
      const g = withGradients(traceGraph(trainInputSpecs(cfg, loss), trainProgram(cfg, loss, undefined, 1, budget)), 'loss', names);
      // A block's group holds its q_proj matmul: which blocks' q_proj weights feed a grouped node.
      const blocks = new Set<number>();
      for (const n of g.nodes)
        if (n.attrs.group !== undefined)
          for (const i of n.inputs) {
            const m = /^model\.layers\.(\d+)\.self_attn\.q_proj\.weight$/.exec(String(i.attrs.name ?? ''));
            if (i.op === 'input' && m) blocks.add(Number(m[1]));
          }
      expect([...blocks].sort(), `budget ${budget}`).toEqual([...want]);
    }
  });
  it('refuses a budget the model cannot take, naming the key', () => {
    for (const bad of [4, -1, 1.5])
      expect(() => PolicyModel.init(cfg, 1, { threads: 1, recomputeLayers: bad }), String(bad)).toThrow(/model\.recompute_layers.*3/);
  });
});

describe('the backward recomputes each chunk', () => {
  it('clones the chunk matmul and log-softmax, each after the previous chunk', () => {
    const cfg = configs['tied (qwen2)'];
    const names = Object.keys(weightShapes(cfg));
    const g = withGradients(traceGraph(trainInputSpecs(cfg, loss), trainProgram(cfg, loss, undefined, 4)), 'loss', names);
    const count = (op: string, grouped: boolean) => g.nodes.filter((n) => n.op === op && (n.attrs.group !== undefined) === grouped).length;
    // Forward: 4 grouped log-softmaxes; backward: 4 ungrouped clones (the first one processed
    // equals its forward node, and ONNX Runtime merges those two).
    expect(count('logSoftmax', true)).toBe(4);
    expect(count('logSoftmax', false)).toBe(4);
    // Ordering edges: 6 in the forward (chunk i after i−1's logprob and its entropy), 3 in the backward.
    expect(g.nodes.filter((n) => n.op === 'after').length).toBe(9);
  });
});

describe("ORT's memory pattern (RunnerOptions.memPattern)", () => {
  it('is off only when asked (train and score sessions ask)', () => {
    expect(sessionOptions({ memPattern: false }).enableMemPattern).toBe(false);
    expect(sessionOptions({}).enableMemPattern).toBeUndefined();
  });
});
