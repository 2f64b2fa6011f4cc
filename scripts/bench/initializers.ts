/**
 * `npm run bench:initializers -- [--hidden 768 --layers 8 --vocab 32000 --threads 2]`
 *
 * Frozen weights as ONNX Runtime session *inputs* (Arbor today: one session serves every weight
 * version, the weights cross into ORT as input tensors on each run) versus as *initializers*
 * (baked into the model: ORT owns one copy, may pre-pack it for its CPU GEMM, and on a GPU
 * provider keeps it on the device). Each variant runs in its own child process with the same
 * decode graph (engine/model/graphs.ts) and random weights, and reports: session creation
 * seconds, peak RSS after creation and after the runs (minus the JS copy of the weights, which
 * the initializer variant drops before creating the session), prefill 128 tokens and KV decode
 * (batch 1, 16 steps) seconds, and a checksum of the logits (both variants must agree).
 */
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import onnxProto from 'onnx-proto';
import { tinyConfig, weightShapes } from '../../engine/model/config';
import { initWeights } from '../../engine/model/checkpoint';
import { decodeInputSpecs, decodeProgram } from '../../engine/model/graphs';
import { traceGraph } from '../../engine/tensor/graph';
import { toOnnx } from '../../engine/tensor/onnx';
import { ort, sessionOptions } from '../../engine/tensor/ort';
import { renderTable } from '../../engine/cli/progress';

const o = new Command('bench:initializers')
  .option('--hidden <n>', 'hidden size', Number, 768)
  .option('--layers <n>', 'layers', Number, 8)
  .option('--vocab <n>', 'vocabulary', Number, 32000)
  .option('--threads <n>', 'ORT intra-op threads', Number, 2)
  .option('--steps <n>', 'decode steps', Number, 16)
  .option('--json', 'print JSON')
  .option('--variant <v>', '(internal) inputs | initializers')
  .parse(process.argv.slice(2), { from: 'user' })
  .opts<{ hidden: number; layers: number; vocab: number; threads: number; steps: number; json?: boolean; variant?: string }>();

const cfg = tinyConfig({
  vocabSize: o.vocab,
  hiddenSize: o.hidden,
  layers: o.layers,
  heads: o.hidden / 64,
  kvHeads: o.hidden / 256,
  intermediateSize: Math.round((o.hidden * 8) / 3 / 64) * 64,
  architecture: 'LlamaForCausalLM',
  tieWordEmbeddings: false,
});
const rssMb = () => process.resourceUsage().maxRSS / 1024;

async function variant(kind: string): Promise<void> {
  const O = ort();
  let weights: Map<string, Float32Array> | undefined = initWeights(cfg, 1);
  const graph = traceGraph(decodeInputSpecs(cfg), decodeProgram(cfg));
  let bytes = toOnnx(graph);
  const weightFeeds: Record<string, InstanceType<typeof O.Tensor>> = {};
  const shapes = weightShapes(cfg);
  if (kind === 'initializers') {
    const { onnx } = onnxProto;
    const m = onnx.ModelProto.decode(bytes);
    const g = m.graph!;
    g.input = (g.input ?? []).filter((i) => !(i.name! in shapes));
    g.initializer = [
      ...(g.initializer ?? []),
      ...Object.entries(shapes).map(([name, dims]) => {
        const w = weights!.get(name)!;
        return onnx.TensorProto.create({ name, dims, dataType: 1, rawData: new Uint8Array(w.buffer, w.byteOffset, w.byteLength) });
      }),
    ];
    bytes = onnx.ModelProto.encode(m).finish();
    weights = undefined; // ORT owns the only copy
  } else {
    for (const [name, dims] of Object.entries(shapes)) weightFeeds[name] = new O.Tensor('float32', weights!.get(name)!, dims);
  }
  const t0 = performance.now();
  const s = await O.InferenceSession.create(bytes, sessionOptions({ threads: o.threads }));
  // eslint-disable-next-line no-useless-assignment -- drops the model bytes so the GC can free them before the timed part
  bytes = new Uint8Array(0);
  const createS = (performance.now() - t0) / 1000;
  const rssCreate = rssMb();
  const L = cfg.numLayers,
    Hkv = cfg.numKvHeads,
    hd = cfg.headDim,
    V = cfg.vocabSize;
  const run = async (ids: number[], past: Record<string, InstanceType<typeof O.Tensor>>, P: number) => {
    const T = ids.length,
      S = P + T;
    const bias = new Float32Array(T * S);
    for (let i = 0; i < T; i++) for (let j = P + i + 1; j < S; j++) bias[i * S + j] = -1e9;
    const feeds: Record<string, InstanceType<typeof O.Tensor>> = {
      ...weightFeeds,
      ...past,
      input_ids: new O.Tensor('int32', Int32Array.from(ids), [1, T]),
      position_ids: new O.Tensor(
        'int32',
        Int32Array.from({ length: T }, (_, i) => P + i),
        [1, T],
      ),
      attn_bias: new O.Tensor('float32', bias, [1, 1, T, S]),
      sample_u: new O.Tensor('float32', new Float32Array(1), [1]),
      inv_temp: new O.Tensor('float32', new Float32Array(1).fill(1), [1]),
      greedy: new O.Tensor('float32', new Float32Array(1).fill(1), [1]),
    };
    const out = await s.run(feeds);
    const next: Record<string, InstanceType<typeof O.Tensor>> = {};
    for (let i = 0; i < L; i++) {
      next[`past_k_${i}`] = out[`present_k_${i}`];
      next[`past_v_${i}`] = out[`present_v_${i}`];
    }
    return { logits: out.logits.data as Float32Array, past: next };
  };
  const empty: Record<string, InstanceType<typeof O.Tensor>> = {};
  for (let i = 0; i < L; i++) {
    empty[`past_k_${i}`] = new O.Tensor('float32', new Float32Array(0), [1, Hkv, 0, hd]);
    empty[`past_v_${i}`] = new O.Tensor('float32', new Float32Array(0), [1, Hkv, 0, hd]);
  }
  const prompt = Array.from({ length: 128 }, (_, i) => (i * 7919 + 13) % V);
  await run(prompt.slice(0, 16), empty, 0); // warm-up
  let t1 = performance.now();
  let r = await run(prompt, empty, 0);
  const prefillS = (performance.now() - t1) / 1000;
  let sum = 0;
  for (const x of r.logits) sum += x;
  t1 = performance.now();
  for (let step = 0; step < o.steps; step++) {
    let best = 0;
    for (let j = 1; j < V; j++) if (r.logits[j] > r.logits[best]) best = j;
    r = await run([best], r.past, 128 + step);
  }
  const decodeS = (performance.now() - t1) / 1000;
  for (const x of r.logits) sum += x;
  const weightMb = (Object.values(shapes).reduce((a, d) => a + d.reduce((p, q) => p * q, 1), 0) * 4) / 2 ** 20;
  process.stdout.write(JSON.stringify({ kind, createS, rssCreate, prefillS, decodeS, rssEnd: rssMb(), weightMb, checksum: sum }) + '\n');
  await s.release();
}

if (o.variant) await variant(o.variant);
else {
  const here = dirname(fileURLToPath(import.meta.url));
  const res = ['inputs', 'initializers'].map((v) => {
    const r = spawnSync(
      process.execPath,
      [
        join(here, 'run.mjs'),
        'initializers',
        '--hidden',
        String(o.hidden),
        '--layers',
        String(o.layers),
        '--vocab',
        String(o.vocab),
        '--threads',
        String(o.threads),
        '--steps',
        String(o.steps),
        '--variant',
        v,
      ],
      { encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`${v} failed: ${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').pop()!) as {
      kind: string;
      createS: number;
      rssCreate: number;
      prefillS: number;
      decodeS: number;
      rssEnd: number;
      weightMb: number;
      checksum: number;
    };
  });
  const [a, b] = res;
  const rel = Math.abs(a.checksum - b.checksum) / Math.abs(a.checksum);
  if (o.json) console.log(JSON.stringify({ config: { hidden: o.hidden, layers: o.layers, vocab: o.vocab }, results: res, checksumRelDiff: rel }));
  else {
    console.log(
      `decode graph, ${o.layers} layers × hidden ${o.hidden}, vocab ${o.vocab}: ${a.weightMb.toFixed(0)} MB of float32 weights; logits checksum relative difference ${rel.toExponential(1)}`,
    );
    console.log(
      renderTable(
        ['measure', 'weights as inputs', 'weights as initializers', 'initializers / inputs'],
        [
          ['session creation (s)', a.createS, b.createS, b.createS / a.createS],
          ['peak RSS after creation (MB)', a.rssCreate, b.rssCreate, b.rssCreate / a.rssCreate],
          ['prefill 128 tokens (s)', a.prefillS, b.prefillS, b.prefillS / a.prefillS],
          [`decode ${o.steps} steps, batch 1 (s)`, a.decodeS, b.decodeS, b.decodeS / a.decodeS],
          ['peak RSS at the end (MB)', a.rssEnd, b.rssEnd, b.rssEnd / a.rssEnd],
        ],
      ),
    );
  }
}
