/**
 * `npm run bench:decode-graph -- [--model tiny|25M] [--batch 64] [--past 40] [--threads 1,2] [--runs 200] [--json] [--profile]`
 *
 * ONNX Runtime's own time for one steady decode step (one new token per row after `--past`
 * cached tokens) of the rollout's decode graph, in this thread (no worker, no KV bookkeeping):
 * session.run on fixed feeds, repeated `--runs` times with every variant interleaved, so all
 * variants share the machine's background load; min, lower quartile and median per variant.
 * Variants: `now` (the decode graph as the rollout runs it), `x·x norm` (RMSNorm squares as x·x,
 * which ORT does not fuse: the graph before the SimplifiedLayerNormalization change), `block 128`
 * (the sampling head's prefix sums in blocks of 128 ids, before sampleBlock(V)), `no sampling`
 * (logits and present only), `trunk` (the transformer only: no LM head, no sampling).
 * For each thread count in `--threads` (intra-op threads of every session). `--profile`: the
 * `now` and `matmul attn` graphs again under ORT's profiler (`--runs` runs each, after 3 warm-up
 * runs): kernel ms per run by op type, and the node count of ORT's optimised graph.
 */
import { availableParallelism, tmpdir } from 'node:os';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { traceGraph, type Program } from '../../engine/tensor/graph';
import { toOnnx } from '../../engine/tensor/onnx';
import { ort } from '../../engine/tensor/ort';
import { buildAttentionBias, decodeInputSpecs, decodeProgram, sampleFeeds } from '../../engine/model/graphs';
import { tinyConfig, weightShapes, type ModelConfig } from '../../engine/model/config';
import { initWeights } from '../../engine/model/checkpoint';
import { transformer } from '../../engine/model/transformer';
import type { GNode } from '../../engine/tensor/graph';
import type { Tensor } from 'onnxruntime-node';

const args = process.argv.slice(2);
const opt = (name: string, def: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1]! : def;
};
const json = args.includes('--json');
const modelName = opt('--model', 'tiny');
const B = Number(opt('--batch', '64'));
const P = Number(opt('--past', '40'));
const RUNS = Number(opt('--runs', '200'));
const threadList = opt('--threads', [1, Math.min(8, availableParallelism())].filter((t, i, a) => a.indexOf(t) === i).join(','))
  .split(',')
  .map(Number);
for (const [k, v] of Object.entries({ '--batch': B, '--past': P, '--runs': RUNS }))
  if (!Number.isInteger(v) || v < 1) throw new Error(`${k} must be an integer ≥ 1 (got ${v})`);
if (threadList.some((t) => !Number.isInteger(t) || t < 1)) throw new Error(`--threads must be integers ≥ 1 (got ${opt('--threads', '')})`);

const CONFIGS: Record<string, ModelConfig> = {
  tiny: tinyConfig({ vocabSize: 512, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 512, padTokenId: 0 }),
  '25M': tinyConfig({ vocabSize: 8192, hiddenSize: 512, layers: 7, heads: 8, kvHeads: 4, intermediateSize: 1408, maxPositionEmbeddings: 512, padTokenId: 0 }),
};
const c = CONFIGS[modelName];
if (!c) throw new Error(`--model must be tiny or 25M (got ${modelName})`);

const pick = (r: Record<string, GNode>, keep: (k: string) => boolean) => Object.fromEntries(Object.entries(r).filter(([k]) => keep(k)));
const now = decodeProgram(c);
const variants: Record<string, Program> = {
  now: now as Program,
  'matmul attn': decodeProgram(c, undefined, { fusedAttention: false }) as Program,
  'x·x norm': decodeProgram(c, undefined, { fuseNorm: false }) as Program,
  'block 128': decodeProgram(c, undefined, { sampleBlock: 128 }) as Program,
  'no sampling': (o, x) => pick(now(o, x), (k) => k === 'logits' || k.startsWith('present')),
  trunk: (o, x) => {
    const w: Record<string, GNode> = {};
    for (const k of Object.keys(weightShapes(c))) w[k] = x[k]!;
    const past = Array.from({ length: c.numLayers }, (_, i) => ({ k: x[`past_k_${i}`]!, v: x[`past_v_${i}`]! }));
    const { hidden, present } = transformer(o, c, w, { inputIds: x.input_ids!, positionIds: x.position_ids!, attnBias: x.attn_bias!, past });
    const out: Record<string, GNode> = { hidden };
    present.forEach((p, i) => {
      out[`present_k_${i}`] = p.k;
      out[`present_v_${i}`] = p.v;
    });
    return out;
  },
};

const O = ort();
const W = initWeights(c, 1);
const feeds: Record<string, Tensor> = {};
for (const [k, shape] of Object.entries(weightShapes(c))) feeds[k] = new O.Tensor('float32', W.get(k)!, shape);
const S = P + 1;
feeds.input_ids = new O.Tensor(
  'int32',
  Int32Array.from({ length: B }, (_, i) => 1 + (i % (c.vocabSize - 1))),
  [B, 1],
);
feeds.position_ids = new O.Tensor('int32', new Int32Array(B).fill(P), [B, 1]);
feeds.attn_bias = new O.Tensor('float32', buildAttentionBias(new Int32Array(B * S).fill(1), B, 1, S), [B, 1, 1, S]);
let seed = 1;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 0.2 - 0.1;
for (let i = 0; i < c.numLayers; i++)
  for (const kv of ['k', 'v'])
    feeds[`past_${kv}_${i}`] = new O.Tensor('float32', Float32Array.from({ length: B * c.numKvHeads * P * c.headDim }, rand), [B, c.numKvHeads, P, c.headDim]);
const sf = sampleFeeds(B, { u: new Float32Array(B).fill(0.3), invTemp: new Float32Array(B).fill(1), greedy: new Float32Array(B) });
for (const [k, t] of Object.entries(sf)) feeds[k] = new O.Tensor('float32', t.data as Float32Array, t.shape);

const results: { threads: number; variant: string; minMs: number; p25Ms: number; medianMs: number }[] = [];
for (const threads of threadList) {
  const sessions: { name: string; run: () => Promise<unknown>; times: number[] }[] = [];
  for (const [name, prog] of Object.entries(variants)) {
    const s = await O.InferenceSession.create(toOnnx(traceGraph(decodeInputSpecs(c), prog)), {
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
      executionMode: 'sequential',
    });
    const f: Record<string, Tensor> = {};
    for (const n of s.inputNames) f[n] = feeds[n]!;
    const run = () => s.run(f);
    for (let i = 0; i < 3; i++) await run();
    sessions.push({ name, run, times: [] });
  }
  process.stderr.write(`${modelName} batch ${B} past ${P}, ${threads} thread(s): ${RUNS} runs per variant\n`);
  for (let i = 0; i < RUNS; i++)
    for (const v of sessions) {
      const t = performance.now();
      await v.run();
      v.times.push(performance.now() - t);
    }
  for (const v of sessions) {
    const t = v.times.sort((a, b) => a - b);
    results.push({ threads, variant: v.name, minMs: t[0]!, p25Ms: t[Math.floor(t.length / 4)]!, medianMs: t[Math.floor(t.length / 2)]! });
  }
}
/** Kernel ms per run by op type under ORT's profiler, for the first thread count. */
const profiles: { variant: string; runMs: number; kernelMs: number; nodes: number; byOp: Record<string, number> }[] = [];
if (args.includes('--profile'))
  for (const variant of ['now', 'matmul attn']) {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-decode-profile-'));
    const s = await O.InferenceSession.create(toOnnx(traceGraph(decodeInputSpecs(c), variants[variant]!)), {
      intraOpNumThreads: threadList[0],
      interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
      executionMode: 'sequential',
      enableProfiling: true,
      profileFilePrefix: join(dir, 'p'),
    });
    const f: Record<string, Tensor> = {};
    for (const n of s.inputNames) f[n] = feeds[n]!;
    for (let i = 0; i < 3; i++) await s.run(f);
    const t = performance.now();
    for (let i = 0; i < RUNS; i++) await s.run(f);
    const runMs = (performance.now() - t) / RUNS;
    await s.endProfiling();
    type Ev = { cat: string; name: string; dur: number; args: { op_name: string } };
    const ev = JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]!), 'utf8')) as Ev[];
    rmSync(dir, { recursive: true, force: true });
    const kernels = ev.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'));
    const byOp: Record<string, number> = {};
    for (const e of kernels) byOp[e.args.op_name] = (byOp[e.args.op_name] ?? 0) + e.dur / 1000 / (RUNS + 3);
    const kernelMs = Object.values(byOp).reduce((a, b) => a + b, 0);
    profiles.push({ variant, runMs, kernelMs, nodes: new Set(kernels.map((e) => e.name)).size, byOp });
  }
if (json) console.log(JSON.stringify({ model: modelName, batch: B, past: P, runs: RUNS, results, profiles }));
else {
  console.log(`\nDecode step of the ${modelName} model, batch ${B}, past ${P}: session.run ms (${RUNS} interleaved runs per variant)`);
  console.log('threads  variant        min     p25  median');
  for (const r of results)
    console.log(
      `${String(r.threads).padStart(7)}  ${r.variant.padEnd(12)} ${r.minMs.toFixed(3).padStart(7)} ${r.p25Ms.toFixed(3).padStart(7)} ${r.medianMs.toFixed(3).padStart(7)}`,
    );
  for (const p of profiles) {
    console.log(
      `\nORT profile, ${p.variant} (${threadList[0]} thread(s)): ${p.runMs.toFixed(3)} ms per run, kernels ${p.kernelMs.toFixed(3)} ms, ${p.nodes} nodes`,
    );
    for (const [op, ms] of Object.entries(p.byOp)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12))
      console.log(`  ${op.padEnd(30)} ${ms.toFixed(3).padStart(8)} ms  ${((100 * ms) / p.kernelMs).toFixed(1).padStart(5)}%`);
  }
}
process.exit(0);
