/**
 * `npm run bench:model -- --shape qwen2.5-0.5b|qwen3-0.6b|llama3.2-1b [--threads 2] [--json]
 *   [--no-torch] [--no-train] [--dtype bfloat16] [--max-shard 1e9] [--folder dir] [--steps 16]`
 *
 * A real-size check of Arbor's model path against a PyTorch peer in the same run:
 *  1. build: a random-weight HF folder at the shape (seeded N(0, 0.02), rounded to --dtype so the
 *     folder holds exactly the in-memory weights), saved in --dtype, sharded above --max-shard;
 *     save seconds, MB/s and peak RSS;
 *  2. Arbor (a child process, so its peak RSS is its own): load seconds (and a checksum of the
 *     loaded weights, which must equal the built ones: the save → load round trip is exact),
 *     prefill 128 and 512 tokens (batch 1, last-position logits), KV-cache decode at batch 1 and
 *     8 (prefill 32, then --steps single-token steps), one full training step (batch 1 × 128:
 *     forward + backward of the mean NLL, gradients for every weight; no optimizer update), with
 *     the peak RSS after each phase;
 *  3. PyTorch (scripts/bench/model_torch.py, transformers' eager forward in plain torch, same
 *     folder, same ids, OPENBLAS_CORETYPE=SkylakeX where the CPU has AVX-512): the same phases.
 * The last-position logits of the 128-token prefill are compared (relative error), and the table
 * gives Arbor/PyTorch ratios. Times are single runs after a warm-up, on a shared machine.
 */
import '../../engine/builtins'; // the built-in estimators, losses, formats and task kinds register themselves
import { mulberry32 } from '../../engine/base/rng';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import { parameterCount, weightShapes, type ModelConfig, type WeightDType } from '../../engine/model/config';
import { allocWeight, saveCheckpoint, type Weights } from '../../engine/model/checkpoint';
import { f32BitsToBf16, f32BitsToF16 } from '../../engine/model/safetensors';
import { packSequences, type LossSpec } from '../../engine/model/graphs';
import { PolicyModel } from '../../engine/model/runtime';
import { LORA_TARGETS } from '../../engine/model/lora';
import { loraTrainStep, randomTokenBatch } from '../../engine/model/lora-step';
import { rollout } from '../../engine/rollout/engine';
import { policyDecodeBackend } from '../../engine/rollout/model-backend';
import type { RolloutTask, TokenizerPort } from '../../engine/rollout/ports';
import { accumulate } from '../../engine/train/grad-accum';
import { AdamW } from '../../engine/rl/optimizer';
import { renderTable } from '../../engine/cli/progress';
import type { Ops } from '../../engine/tensor/ops';
import { SHAPES } from './shapes';
import { hasAvx512, PYTHON } from './torch-peer';

export { SHAPES };

const HERE = dirname(fileURLToPath(import.meta.url));

const positive = (flag: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${flag} must be a positive number (got '${v}')`);
  return n;
};

const cli = new Command('bench:model')
  .requiredOption('--shape <shape>', `model shape (${Object.keys(SHAPES).join(', ')})`)
  .option('--threads <n>', 'threads (ORT intra-op, torch)', positive('--threads'), 2)
  .option('--dtype <dtype>', 'dtype of the folder on disk (float32, float16, bfloat16)', 'bfloat16')
  .option('--max-shard <bytes>', 'shard size limit when saving', positive('--max-shard'), 1e9)
  .option('--steps <n>', 'decode steps timed per batch size', positive('--steps'), 16)
  .option('--folder <dir>', 'where to build the folder (default: a temporary folder, removed afterwards)')
  .option('--no-torch', 'skip the PyTorch peer')
  .option('--no-train', 'skip the training step')
  .option('--no-lora', 'skip the LoRA step (rank 16, alpha 32, all linear layers, batch 4 × 512)')
  .option('--lora-only', '(internal) the child runs only the LoRA step')
  .option('--no-rl', 'skip the RL loop (LoRA: rollouts of --rl-batch × --rl-new tokens, reference scoring, one update)')
  .option('--rl-only', '(internal) the child runs only the RL loop')
  .option('--rl-batch <n>', 'RL loop: sequences per rollout batch', positive('--rl-batch'), 8)
  .option('--rl-new <n>', 'RL loop: new tokens per sequence', positive('--rl-new'), 256)
  .option('--micro-batches <n>', 'RL loop: micro-batches of the update (as train.micro_batches)', positive('--micro-batches'), 2)
  .option('--lora-batch <n>', 'LoRA step: sequences', positive('--lora-batch'), 4)
  .option('--layers <n>', 'use only the first N transformer blocks of the shape (a smaller model for a first measurement)', positive('--layers'))
  .option('--save-only', 'only build the folder and reload it (save → load check, no ORT sessions, no peer)')
  .option(
    '--no-recompute-layers',
    "LoRA step and RL loop: keep every block's activations for the backward pass (default: recompute them, PolicyModel recomputeLayers)",
  )
  .option(
    '--lora-recompute <k>',
    "LoRA step only: recompute the first k blocks in the backward pass and keep the others' activations (a budget; default: all blocks, none with --no-recompute-layers)",
    (v: string) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) throw new Error(`--lora-recompute: '${v}' is not a block count (an integer ≥ 0)`);
      return n;
    },
  )
  .option('--profile <dir>', "profile the LoRA step with ONNX Runtime's profiler (JSON in dir; prints the top ops)")
  .option('--json', 'print the results as JSON')
  .option('--child <folder>', '(internal) run the Arbor phases on a folder and print JSON');

const o = cli.parse(process.argv.slice(2), { from: 'user' }).opts<{
  shape: string;
  threads: number;
  dtype: WeightDType;
  maxShard: number;
  steps: number;
  folder?: string;
  torch: boolean;
  train: boolean;
  lora: boolean;
  loraOnly?: boolean;
  rl: boolean;
  profile?: string;
  recomputeLayers: boolean;
  loraRecompute?: number;
  rlOnly?: boolean;
  rlBatch: number;
  rlNew: number;
  microBatches: number;
  loraBatch: number;
  layers?: number;
  saveOnly?: boolean;
  json?: boolean;
  child?: string;
}>();
const shape0 = SHAPES[o.shape];
if (!shape0) throw new Error(`--shape: unknown shape '${o.shape}' (known: ${Object.keys(SHAPES).join(', ')})`);
const base: ModelConfig = o.layers ? { ...shape0, numLayers: Math.min(o.layers, shape0.numLayers) } : shape0;

const rssMb = () => process.resourceUsage().maxRSS / 1024;
const ids = (V: number, B: number, T: number, salt = 0) =>
  Array.from({ length: B }, (_, b) => Array.from({ length: T }, (_, i) => (i * 7919 + 13 + 101 * b + salt) % V));

/** Order-independent checksum of weights: sum over tensors of Σ value·(1 + i mod 7), in float64. */
function checksum(w: Weights): number {
  let s = 0;
  for (const [, a] of [...w].sort(([x], [y]) => (x < y ? -1 : 1))) for (let i = 0; i < a.length; i++) s += a[i] * (1 + (i % 7));
  return s;
}

const nll: LossSpec = {
  key: 'nll',
  inputs: [],
  program: <T>(op: Ops<T>, t: { logprobs: T; mask: T }) => ({
    loss: op.div(op.neg(op.sum(op.mul(t.logprobs, t.mask), [0, 1])), op.sum(t.mask, [0, 1])),
  }),
};

async function decodeCall(m: PolicyModel, input: number[][], past: { k: Float32Array; v: Float32Array }[], P: number) {
  const B = input.length,
    T = input[0].length;
  return m.decode({
    batch: B,
    newLength: T,
    pastLength: P,
    inputIds: Int32Array.from(input.flat()),
    attentionMask: new Int32Array(B * (P + T)).fill(1),
    positionIds: Int32Array.from({ length: B * T }, (_, i) => P + (i % T)),
    past: past.length ? past : Array.from({ length: m.config.numLayers }, () => ({ k: new Float32Array(0), v: new Float32Array(0) })),
  });
}

/** What each side measures (seconds, MB of peak RSS so far). */
interface PhaseResult {
  load_s: number;
  checksum?: number;
  rss_load_mb: number;
  prefill: Record<string, number>;
  rss_prefill_mb: number;
  decode: Record<string, number>;
  rss_decode_mb: number;
  train_s?: number;
  train_loss?: number;
  rss_train_mb?: number;
}

interface LoraResult {
  load_s?: number;
  lora_grad_s: number;
  lora_opt_s: number;
  lora_trainable: number;
  rss_lora_mb: number;
}

/** Kernel time per op type and the top nodes of the last run in ORT's JSON profiles under `dir` (to stderr). */
/**
 * ORT's per-op profile of the last run: time by op type, the slowest nodes, and the split the
 * docs report: LM head (a node with an input of the vocabulary's size), block GEMMs (other
 * MatMul/FusedMatMul/Gemm on 2-D or 3-D inputs), attention (Softmax and the batched score /
 * context matmuls of rank ≥ 4), the rest (elementwise, norms, shapes).
 */
function printProfile(dir: string, vocab: number): void {
  type Ev = { cat: string; name: string; ts: number; dur: number; args?: { op_name?: string; input_type_shape?: Record<string, number[]>[] } };
  for (const f of readdirSync(dir).filter((x) => x.startsWith('lora') && x.endsWith('.json'))) {
    const ev = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Ev[];
    const runs = ev.filter((e) => e.name === 'model_run').sort((a, b) => a.ts - b.ts);
    const last = runs[runs.length - 1];
    if (!last) continue;
    const ops = new Map<string, number>();
    const nodes: { us: number; op: string; shapes: string }[] = [];
    const split = { head: 0, blockGemm: 0, attention: 0, other: 0 };
    const headCalls = { n: 0 };
    for (const e of ev) {
      if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || e.ts < last.ts || e.ts > last.ts + last.dur) continue;
      const op = e.args?.op_name ?? '?';
      ops.set(op, (ops.get(op) ?? 0) + e.dur);
      nodes.push({ us: e.dur, op, shapes: (e.args?.input_type_shape ?? []).map((x) => `[${Object.values(x)[0]?.join(',')}]`).join(' ') });
      const dims = (e.args?.input_type_shape ?? []).map((x) => Object.values(x)[0] ?? []);
      const gemm = op === 'MatMul' || op === 'FusedMatMul' || op === 'Gemm';
      if (dims.some((d) => d.includes(vocab))) {
        split.head += e.dur;
        if (gemm) headCalls.n++;
      } else if (op === 'Softmax' || (gemm && dims.some((d) => d.length >= 4))) split.attention += e.dur;
      else if (gemm) split.blockGemm += e.dur;
      else split.other += e.dur;
    }
    const total = [...ops.values()].reduce((a, b) => a + b, 0);
    console.error(`ORT profile ${f}: run ${(last.dur / 1e6).toFixed(2)} s, kernels ${(total / 1e6).toFixed(2)} s`);
    for (const [op, us] of [...ops].sort((a, b) => b[1] - a[1]).slice(0, 10))
      console.error(`  ${op.padEnd(22)} ${(us / 1e6).toFixed(2)} s  ${((100 * us) / total).toFixed(1)}%`);
    for (const n of nodes.sort((a, b) => b.us - a.us).slice(0, 8)) console.error(`  node ${n.op} ${(n.us / 1e6).toFixed(2)} s ${n.shapes}`);
    const pct = (us: number) => `${(us / 1e6).toFixed(2)} s (${((100 * us) / total).toFixed(0)}%)`;
    console.error(
      `  split: LM head ${pct(split.head)} in ${headCalls.n} GEMMs, block GEMMs ${pct(split.blockGemm)}, attention ${pct(split.attention)}, other ${pct(split.other)}`,
    );
  }
}

/** Arbor's LoRA step (engine/model/lora-step.ts, the training run's code path), second of two steps. */
async function loraChild(folder: string): Promise<void> {
  const t0 = performance.now();
  const profilePrefix = o.profile ? join(o.profile, 'lora') : undefined;
  const m = PolicyModel.load(folder, {
    threads: o.threads,
    lora: { rank: 16, alpha: 32, dropout: 0, targets: [...LORA_TARGETS] },
    profilePrefix,
    recomputeLayers: o.loraRecompute ?? o.recomputeLayers,
  });
  const load = (performance.now() - t0) / 1000;
  const opt = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: 0.01 });
  const batch = randomTokenBatch(m.config.vocabSize, o.loraBatch, 512, 7);
  await loraTrainStep(m, batch, opt);
  const r = await loraTrainStep(m, batch, opt);
  if (o.profile) await m.endProfiling();
  await m.dispose();
  if (o.profile) printProfile(o.profile, m.config.vocabSize);
  const out: LoraResult = { load_s: load, lora_grad_s: r.gradSeconds, lora_opt_s: r.optimizerSeconds, lora_trainable: r.trainable, rss_lora_mb: rssMb() };
  process.stdout.write(JSON.stringify(out) + '\n');
}

interface RlResult {
  load_s: number;
  rollout_s: number;
  rollout_tokens: number;
  ref_score_s: number;
  update_s: number;
  micro_batches: number;
  rss_load_mb: number;
  rss_rollout_mb: number;
  rss_ref_mb: number;
  rss_update_mb: number;
}

/** PPO-clip (ε 0.2) on per-token advantages against the rollout's logprobs, token-mean over the loss mask. */
const ppoLoss: LossSpec = {
  key: 'bench-ppo',
  inputs: [
    { name: 'advantages', dtype: 'float32', shape: ['batch', 'seq'] },
    { name: 'old_logprobs', dtype: 'float32', shape: ['batch', 'seq'] },
  ],
  program: <T>(op: Ops<T>, t: { logprobs: T; mask: T } & Record<string, T>) => {
    const ratio = op.exp(op.sub(t.logprobs, t.old_logprobs));
    const clipped = op.minimum(op.maximum(ratio, op.scalar(0.8)), op.scalar(1.2));
    const obj = op.minimum(op.mul(ratio, t.advantages), op.mul(clipped, t.advantages));
    return { loss: op.div(op.neg(op.sum(op.mul(obj, t.mask), [0, 1])), op.maximum(op.sum(t.mask, [0, 1]), op.scalar(1))) };
  },
};

/**
 * The RL loop at this shape under LoRA, in one process as `arbor train` runs it: load (the frozen
 * base moved to the model's ORT worker), rollouts of --rl-batch sequences × --rl-new sampled
 * tokens on the worker-held KV cache, the KL reference's logprobs (the adapters at the start,
 * scored through the same session), one PPO-clip update over --micro-batches micro-batches
 * (gradient accumulation) and AdamW on the adapters. Peak RSS after each phase.
 */
async function rlChild(folder: string): Promise<void> {
  let t0 = performance.now();
  const m = PolicyModel.load(folder, {
    threads: o.threads,
    lora: { rank: 16, alpha: 32, dropout: 0, targets: [...LORA_TARGETS] },
    recomputeLayers: o.recomputeLayers,
  });
  const out: Partial<RlResult> = { load_s: (performance.now() - t0) / 1000, micro_batches: o.microBatches };
  out.rss_load_mb = rssMb();
  const reference = m.cloneWeights();
  const V = m.config.vocabSize,
    P = 32;
  const tokenizer: TokenizerPort = { encode: (t) => t.split(' ').filter(Boolean).map(Number), decode: (x) => x.join(' ') };
  const tasks: RolloutTask[] = ids(V, o.rlBatch, P, 3).map((prompt, i) => ({
    id: `rl-${i}`,
    createEnv: () => ({ prompt: async () => ({ ids: prompt }), step: async () => ({ done: true }), outcome: async () => ({ reward: i % 2, components: {} }) }),
  }));
  const backend = policyDecodeBackend(m, { maxBatch: o.rlBatch, maxLength: P + o.rlNew + 8 });
  t0 = performance.now();
  const res = await rollout(backend, {
    tasks,
    n: 1,
    seed: 1,
    sampling: { temperature: 1 },
    tokenizer,
    maxBatch: o.rlBatch,
    limits: { maxNewTokens: o.rlNew, maxTurns: 1, maxTotalLength: P + o.rlNew + 8 },
    stop: { strings: [], tokenIds: [] },
  });
  out.rollout_s = (performance.now() - t0) / 1000;
  out.rollout_tokens = res.stats.generatedTokens;
  await backend.close?.();
  out.rss_rollout_mb = rssMb();
  // Sequences, loss masks, rollout logprobs and a ±1 advantage per sequence, aligned as the trainer does (position t predicts token t+1).
  const rows = res.trajectories.map((tr, i) => {
    const idsAll = [...tr.promptIds, ...tr.turns.flatMap((t) => t.tokenIds)];
    const mask = [...tr.promptIds.map(() => 0), ...tr.turns.flatMap((t) => t.lossMask)];
    const lp = [...tr.promptIds.map(() => 0), ...tr.turns.flatMap((t) => t.logprobs)];
    return { ids: idsAll, mask, lp, adv: i % 2 ? 1 : -1 };
  });
  t0 = performance.now();
  await m.score(
    rows.map((r) => r.ids),
    { weights: reference },
  );
  out.ref_score_s = (performance.now() - t0) / 1000;
  out.rss_ref_mb = rssMb();
  const opt = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: 0.01 });
  const acc = new Map<string, Float32Array>();
  const per = Math.ceil(rows.length / o.microBatches);
  t0 = performance.now();
  for (let s = 0; s < rows.length; s += per) {
    const part = rows.slice(s, s + per);
    const batch = packSequences(
      part.map((r) => r.ids),
      0,
    );
    const T = batch.length;
    const shift = (f: (r: (typeof rows)[number], t: number) => number) => {
      const a = new Float32Array(part.length * T);
      part.forEach((r, b) => {
        for (let t = 0; t + 1 < r.ids.length && t < T; t++) a[b * T + t] = f(r, t + 1);
      });
      return a;
    };
    const mask = shift((r, t) => r.mask[t]);
    const g = await m.trainStep(batch, ppoLoss, mask, {
      advantages: { dtype: 'float32', shape: [part.length, T], data: shift((r, t) => r.adv * r.mask[t]) },
      old_logprobs: { dtype: 'float32', shape: [part.length, T], data: shift((r, t) => r.lp[t]) },
    });
    accumulate(acc, g.grads, part.length / rows.length);
  }
  opt.step(m.weights, acc, 1e-4);
  m.markWeightsUpdated();
  out.update_s = (performance.now() - t0) / 1000;
  out.rss_update_mb = rssMb();
  await m.dispose();
  process.stdout.write(JSON.stringify(out) + '\n');
}

/** Arbor's phases, in a child process. */
async function child(folder: string): Promise<void> {
  if (o.loraOnly) return loraChild(folder);
  if (o.rlOnly) return rlChild(folder);
  const out: Record<string, unknown> = {};
  let t0 = performance.now();
  const m = PolicyModel.load(folder, { threads: o.threads });
  out.load_s = (performance.now() - t0) / 1000;
  out.checksum = checksum(m.weights);
  out.rss_load_mb = rssMb();
  if (o.saveOnly) {
    process.stdout.write(JSON.stringify({ logits: [] }) + '\n' + JSON.stringify(out) + '\n');
    return;
  }
  const V = m.config.vocabSize;
  await decodeCall(m, ids(V, 1, 16), [], 0); // warm-up (session creation)
  const prefill: Record<string, number> = {};
  for (const [i, T] of [128, 512].entries()) {
    t0 = performance.now();
    const r = await decodeCall(m, ids(V, 1, T), [], 0);
    prefill[T] = (performance.now() - t0) / 1000;
    if (i === 0) process.stdout.write(JSON.stringify({ logits: Array.from(r.logits) }) + '\n');
  }
  out.prefill = prefill;
  out.rss_prefill_mb = rssMb();
  const decode: Record<string, number> = {};
  for (const B of [1, 8]) {
    let r = await decodeCall(m, ids(V, B, 32), [], 0);
    let P = 32;
    t0 = performance.now();
    for (let s = 0; s < o.steps; s++) {
      const next = Array.from({ length: B }, (_, b) => {
        const l = r.logits.subarray(b * V, (b + 1) * V);
        let best = 0;
        for (let j = 1; j < V; j++) if (l[j] > l[best]) best = j;
        return [best];
      });
      r = await decodeCall(m, next, r.present, P);
      P += 1;
    }
    decode[B] = (performance.now() - t0) / 1000;
  }
  out.decode = decode;
  out.rss_decode_mb = rssMb();
  if (o.train) {
    const batch = packSequences(ids(V, 1, 129));
    t0 = performance.now();
    const r = await m.trainStep(batch, nll, batch.valid);
    out.train_s = (performance.now() - t0) / 1000;
    out.train_loss = r.loss;
    out.rss_train_mb = rssMb();
  }
  await m.dispose();
  process.stdout.write(JSON.stringify(out) + '\n');
}

/** N(0, 0.02) matrices (Box-Muller, both values of each pair: half the work of initWeights), ones for norms, zeros for biases. */
function randomWeights(c: ModelConfig, seed: number): Weights {
  const rand = mulberry32(seed);
  const w: Weights = new Map();
  for (const [name, shape] of Object.entries(weightShapes(c))) {
    const a = allocWeight(shape.reduce((p, q) => p * q, 1));
    if (name.endsWith('norm.weight')) a.fill(1);
    else if (!name.endsWith('.bias')) {
      for (let i = 0; i < a.length; i += 2) {
        const r = 0.02 * Math.sqrt(-2 * Math.log(1 - rand())),
          th = 2 * Math.PI * rand();
        a[i] = r * Math.cos(th);
        if (i + 1 < a.length) a[i + 1] = r * Math.sin(th);
      }
    }
    w.set(name, a);
  }
  return w;
}

function roundTo(w: Weights, dtype: WeightDType): void {
  if (dtype === 'float32') return;
  const tab = new Float32Array(1);
  const bits = new Uint32Array(tab.buffer);
  for (const a of w.values()) {
    const u = new Uint32Array(a.buffer, a.byteOffset, a.length);
    for (let i = 0; i < u.length; i++) {
      if (dtype === 'bfloat16') u[i] = f32BitsToBf16(u[i]) << 16;
      else {
        const h = f32BitsToF16(u[i]);
        // back to float32 through the exact value of the float16
        const e = (h >> 10) & 0x1f,
          mant = h & 0x3ff,
          sgn = h & 0x8000 ? -1 : 1;
        tab[0] = e === 0 ? sgn * 2 ** -14 * (mant / 1024) : e === 31 ? (mant ? NaN : sgn * Infinity) : sgn * 2 ** (e - 15) * (1 + mant / 1024);
        u[i] = bits[0];
      }
    }
  }
}

async function main(): Promise<void> {
  if (o.child) return child(o.child);
  const cfg: ModelConfig = { ...base, dtype: o.dtype };
  const folder = o.folder ?? join(mkdtempSync(join(tmpdir(), 'arbor-bench-model-')), o.shape);
  const log = (s: string) => {
    if (!o.json) console.error(s);
  };
  log(`bench:model ${o.shape}: ${(parameterCount(cfg) / 1e9).toFixed(3)}B parameters → ${folder}`);
  let t0 = performance.now();
  let weights: Weights | undefined = randomWeights(cfg, 1);
  roundTo(weights, o.dtype);
  const initS = (performance.now() - t0) / 1000;
  const sum = checksum(weights);
  t0 = performance.now();
  let lastPct = -1;
  saveCheckpoint(folder, cfg, weights, {
    maxShardBytes: o.maxShard,
    onProgress: (w, total) => {
      const pct = Math.floor((100 * w) / total / 10) * 10;
      if (pct !== lastPct) log(`  saving ${pct}% (${(w / 1e9).toFixed(2)} / ${(total / 1e9).toFixed(2)} GB)`);
      lastPct = pct;
    },
  });
  const saveS = (performance.now() - t0) / 1000;
  const shards = existsSync(join(folder, 'model.safetensors.index.json'))
    ? new Set(Object.values(JSON.parse(readFileSync(join(folder, 'model.safetensors.index.json'), 'utf8')).weight_map as Record<string, string>)).size
    : 1;
  const bytes = parameterCount(cfg) * (o.dtype === 'float32' ? 4 : 2);
  const build = { init_s: initS, save_s: saveS, save_mb_s: bytes / 1e6 / saveS, shards, bytes, rss_mb: rssMb() };
  // eslint-disable-next-line no-useless-assignment -- drops the weights so the GC can free them before the child process runs
  weights = undefined;
  log(
    `  built: init ${initS.toFixed(1)} s, save ${saveS.toFixed(1)} s (${build.save_mb_s.toFixed(0)} MB/s, ${shards} shards), peak RSS ${build.rss_mb.toFixed(0)} MB`,
  );

  log('  Arbor (child process) …');
  const a = spawnSync(
    process.execPath,
    [
      join(HERE, 'run.mjs'),
      'model',
      '--shape',
      o.shape,
      '--threads',
      String(o.threads),
      '--steps',
      String(o.steps),
      ...(o.train ? [] : ['--no-train']),
      ...(o.saveOnly ? ['--save-only'] : []),
      '--child',
      folder,
    ],
    { encoding: 'utf8', maxBuffer: 1 << 28 },
  );
  if (a.status !== 0) throw new Error(`Arbor child failed (code ${a.status}): ${a.stderr}`);
  const lines = a.stdout.trim().split('\n');
  const arborLogits = Float32Array.from(JSON.parse(lines[0]).logits as number[]);
  const arbor = JSON.parse(lines[lines.length - 1]) as PhaseResult;
  if (arbor.checksum !== sum) throw new Error(`save → load is not exact: checksum ${arbor.checksum} after loading, ${sum} before saving`);

  let torch: (PhaseResult & { torch: string }) | undefined;
  let logitsRel: number | undefined;
  if (o.saveOnly) {
    if (!o.folder) rmSync(dirname(folder), { recursive: true, force: true });
    const r = {
      shape: o.shape,
      parameters: parameterCount(cfg),
      dtype: o.dtype,
      build,
      reload: { load_s: arbor.load_s, rss_mb: arbor.rss_load_mb, exact: true },
    };
    if (o.json) console.log(JSON.stringify(r));
    else
      console.log(
        `${o.shape}: ${(parameterCount(cfg) / 1e9).toFixed(3)}B parameters, ${o.dtype}, ${shards} shard(s): save ${saveS.toFixed(1)} s (${build.save_mb_s.toFixed(0)} MB/s), builder peak RSS ${build.rss_mb.toFixed(0)} MB; reload ${arbor.load_s.toFixed(1)} s, peak RSS ${arbor.rss_load_mb.toFixed(0)} MB; weights identical after the round trip (checksum)`,
      );
    return;
  }
  if (o.torch) {
    log('  PyTorch …');
    const lf = join(dirname(folder), 'torch-logits.f32');
    const env = {
      ...process.env,
      OMP_NUM_THREADS: String(o.threads),
      OPENBLAS_NUM_THREADS: String(o.threads),
      ...(hasAvx512() ? { OPENBLAS_CORETYPE: 'SkylakeX' } : {}),
    };
    const t = spawnSync(
      PYTHON,
      [join(HERE, 'model_torch.py'), folder, '--threads', String(o.threads), '--steps', String(o.steps), '--logits', lf, ...(o.train ? [] : ['--no-train'])],
      { encoding: 'utf8', env, maxBuffer: 1 << 26 },
    );
    if (t.status !== 0) throw new Error(`model_torch.py failed (code ${t.status}): ${t.stderr}`);
    torch = JSON.parse(t.stdout.trim().split('\n').pop()!);
    const tl = new Float32Array(readFileSync(lf).buffer.slice(0));
    let num = 0,
      den = 0;
    for (let i = 0; i < tl.length; i++) {
      num += (arborLogits[i] - tl[i]) ** 2;
      den += tl[i] ** 2;
    }
    logitsRel = Math.sqrt(num / den);
  }
  let arborLora: LoraResult | undefined, torchLora: LoraResult | undefined, loraFailure: string | undefined;
  if (o.lora) {
    log('  Arbor LoRA step (child process) …');
    const al = spawnSync(
      process.execPath,
      [
        join(HERE, 'run.mjs'),
        'model',
        '--shape',
        o.shape,
        '--threads',
        String(o.threads),
        '--lora-batch',
        String(o.loraBatch),
        ...(o.recomputeLayers ? [] : ['--no-recompute-layers']),
        ...(o.loraRecompute !== undefined ? ['--lora-recompute', String(o.loraRecompute)] : []),
        ...(o.profile ? ['--profile', o.profile] : []),
        '--lora-only',
        '--child',
        folder,
      ],
      { encoding: 'utf8' },
    );
    // A failed phase (e.g. killed by the kernel's OOM killer: signal SIGKILL) is reported, not fatal to the other figures.
    if (al.status !== 0)
      loraFailure = `Arbor LoRA step failed (${al.signal ? `killed by ${al.signal}, likely out of memory` : `exit code ${al.status}`}) ${al.stderr.trim().split('\n').slice(-3).join(' ')}`;
    else arborLora = JSON.parse(al.stdout.trim().split('\n').pop()!);
    if (o.profile) log(al.stderr.trim());
    if (o.torch) {
      log('  PyTorch LoRA step …');
      const env = {
        ...process.env,
        OMP_NUM_THREADS: String(o.threads),
        OPENBLAS_NUM_THREADS: String(o.threads),
        ...(hasAvx512() ? { OPENBLAS_CORETYPE: 'SkylakeX' } : {}),
      };
      const tl = spawnSync(
        PYTHON,
        [join(HERE, 'model_torch.py'), folder, '--threads', String(o.threads), '--lora-only', '--lora-batch', `${o.loraBatch}x512`],
        {
          encoding: 'utf8',
          env,
        },
      );
      // Killed (the OOM killer on a shared machine) or failed: reported with the other figures, not fatal to them.
      if (tl.status !== 0) {
        const why = `PyTorch LoRA step failed (${tl.signal ? `killed by ${tl.signal}, likely out of memory` : `exit code ${tl.status}`}) ${tl.stderr.trim().split('\n').slice(-3).join(' ')}`;
        loraFailure = loraFailure ? `${loraFailure}; ${why}` : why;
      } else torchLora = JSON.parse(tl.stdout.trim().split('\n').pop()!);
    }
  }
  let rl: RlResult | undefined, rlFailure: string | undefined;
  if (o.rl) {
    log(`  Arbor RL loop: rollouts ${o.rlBatch} × ${o.rlNew} tokens + reference scoring + LoRA update (child process) …`);
    const r = spawnSync(
      process.execPath,
      [
        join(HERE, 'run.mjs'),
        'model',
        '--shape',
        o.shape,
        '--threads',
        String(o.threads),
        '--rl-batch',
        String(o.rlBatch),
        '--rl-new',
        String(o.rlNew),
        '--micro-batches',
        String(o.microBatches),
        ...(o.recomputeLayers ? [] : ['--no-recompute-layers']),
        '--rl-only',
        '--child',
        folder,
      ],
      { encoding: 'utf8' },
    );
    if (r.status !== 0)
      rlFailure = `Arbor RL loop failed (${r.signal ? `killed by ${r.signal}, likely out of memory` : `exit code ${r.status}`}) ${r.stderr.trim().split('\n').slice(-3).join(' ')}`;
    else rl = JSON.parse(r.stdout.trim().split('\n').pop()!);
  }
  if (!o.folder) rmSync(dirname(folder), { recursive: true, force: true });

  const rows: (string | number)[][] = [];
  const fmt = (x: number | undefined, d = 2) => (x === undefined ? '—' : Number(x.toFixed(d)));
  const ratio = (x?: number, y?: number) => (x === undefined || y === undefined ? '—' : Number((x / y).toFixed(2)));
  const row = (name: string, ar?: number, tr?: number, unit = '') => rows.push([name + unit, fmt(ar), fmt(tr), ratio(ar, tr)]);
  row('load', arbor.load_s, torch?.load_s, ' (s)');
  row('peak RSS after load', arbor.rss_load_mb, torch?.rss_load_mb, ' (MB)');
  for (const T of ['128', '512'])
    row(
      `prefill ${T} tokens`,
      T === '128' || T === '512' ? Number(T) / arbor.prefill[T] : undefined,
      torch ? Number(T) / torch.prefill[T] : undefined,
      ' (tok/s)',
    );
  row('peak RSS after prefill', arbor.rss_prefill_mb, torch?.rss_prefill_mb, ' (MB)');
  for (const B of ['1', '8'])
    row(`decode batch ${B}`, (Number(B) * o.steps) / arbor.decode[B], torch ? (Number(B) * o.steps) / torch.decode[B] : undefined, ' (tok/s)');
  row('peak RSS after decode', arbor.rss_decode_mb, torch?.rss_decode_mb, ' (MB)');
  if (o.train) {
    row('full train step 1 × 128', arbor.train_s, torch?.train_s, ' (s)');
    row('peak RSS after train step', arbor.rss_train_mb, torch?.rss_train_mb, ' (MB)');
  }
  if (arborLora || torchLora) {
    row(`LoRA step ${o.loraBatch} × 512: forward + backward`, arborLora?.lora_grad_s, torchLora?.lora_grad_s, ' (s)');
    row(`LoRA step ${o.loraBatch} × 512: AdamW on adapters`, arborLora?.lora_opt_s, torchLora?.lora_opt_s, ' (s)');
    row(
      `LoRA step ${o.loraBatch} × 512: total`,
      arborLora && arborLora.lora_grad_s + arborLora.lora_opt_s,
      torchLora ? torchLora.lora_grad_s + torchLora.lora_opt_s : undefined,
      ' (s)',
    );
    row('peak RSS, LoRA process', arborLora?.rss_lora_mb, torchLora?.rss_lora_mb, ' (MB)');
  }
  if (rl) {
    row(`RL loop: rollouts ${o.rlBatch} × ${o.rlNew} new tokens`, rl.rollout_tokens / rl.rollout_s, undefined, ' (tok/s)');
    row('RL loop: reference logprobs', rl.ref_score_s, undefined, ' (s)');
    row(`RL loop: LoRA update (${rl.micro_batches} micro-batches)`, rl.update_s, undefined, ' (s)');
    row('RL loop: peak RSS after rollouts', rl.rss_rollout_mb, undefined, ' (MB)');
    row('RL loop: peak RSS, whole loop', rl.rss_update_mb, undefined, ' (MB)');
  }
  if (loraFailure) log(`  ${loraFailure}`);
  if (rlFailure) log(`  ${rlFailure}`);
  const result = {
    shape: o.shape,
    lora: { arbor: arborLora, torch: torchLora, failure: loraFailure },
    rl: { arbor: rl, failure: rlFailure },
    parameters: parameterCount(cfg),
    threads: o.threads,
    dtype: o.dtype,
    build,
    arbor,
    torch,
    logits_rel_err: logitsRel,
    rows,
  };
  if (o.json) console.log(JSON.stringify(result));
  else {
    console.log(
      `\n${o.shape}: ${(parameterCount(cfg) / 1e9).toFixed(3)}B parameters, folder ${o.dtype} in ${shards} shard(s): save ${saveS.toFixed(1)} s (${build.save_mb_s.toFixed(0)} MB/s, peak RSS ${build.rss_mb.toFixed(0)} MB); save → load exact (checksum)`,
    );
    if (logitsRel !== undefined)
      console.log(
        `logits (last position of the 128-token prefill), Arbor vs PyTorch: relative error ${logitsRel.toExponential(2)}; train loss ${arbor.train_loss ?? '—'} vs ${torch?.train_loss ?? '—'}`,
      );
    console.log(renderTable(['measure', 'Arbor (ORT)', torch ? `PyTorch ${torch.torch}` : 'PyTorch (skipped)', 'Arbor / PyTorch'], rows));
    if (loraFailure) console.log(loraFailure);
    if (rlFailure) console.log(rlFailure);
    console.log(`(${o.threads} threads; single timed runs after a warm-up; the machine is shared, so compare ratios, not absolute numbers)`);
  }
}

await main();
