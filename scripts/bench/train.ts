/**
 * `npm run bench:train -- [--layers N --d-model N --heads N --kv-heads N --ffn N --seq N --batch N
 *   --vocab N] [--threads 2] [--steps 6] [--json] [--quick] [--profile [dir]] [--no-tfjs]
 *   [--no-torch] [--no-gemm] [--interleave] [--tfjs-backend wasm]`
 *
 * One full training step (forward, backward, AdamW update) of Arbor's Llama-form PolicyModel on
 * the mean token cross-entropy, timed for the ORT interpreter (our autodiff graph in
 * onnxruntime-node, AdamW in JS) and the tfjs interpreter (tfjs autodiff on the best tfjs backend
 * here, or `--tfjs-backend`), next to a PyTorch peer of the same model and step
 * (scripts/bench/train_torch.py, /usr/bin/python3, skipped with a note when torch is missing) and
 * the fp32 GEMM ceiling (one 1024³ MatMul) of ORT and of PyTorch, all in one run and at the same
 * thread count. Without size flags it runs the two sizes recorded in docs/BENCHMARKS.md:
 * L4 D128 H4 T128 B16 V256 and L4 D256 H8 T256 B8 V2048; any size flag runs one size (the
 * unset ones from the first). `--kv-heads` defaults to `--heads`, `--ffn` to 8D/3 rounded up to
 * a multiple of 32.
 *
 * PyTorch is always shown at its best settings (./torch-peer.ts): on an AVX-512 machine OpenBLAS's
 * SkylakeX kernels run its GEMM ~2× faster than the core type it detects, and its 2-thread intra-op
 * pool stalls unless OMP_NUM_THREADS=1 (with an N-thread OpenBLAS) or OMP_WAIT_POLICY=PASSIVE.
 * So it runs in each of those settings and the ratio is taken against the fastest.
 *
 * FLOPs (for GFLOP/s): executed matmul FLOPs of the forward pass, ×3 for forward + backward:
 * 2·B·T·(L·(D·H·hd + 2·D·Hkv·hd + H·hd·D + 3·D·F) + D·V) + 4·B·L·T²·H·hd (full T×T scores and
 * context, as computed). Elementwise work is not counted, so GFLOP/s is a lower bound.
 *
 * Numerics: initial weights are written once (HF folder, safetensors) and read by every
 * implementation, so their step-0 losses must agree within 1e-4 relative (exit code 1 otherwise).
 * The first `--warmup` steps (2; tfjs 1) build sessions, grow allocators and touch the AdamW
 * moments for the first time, and are not timed; times are medians of the later steps. Each
 * implementation runs alone (`--interleave` instead rotates one step each, sharing background
 * load, at the price of idle runtimes' spinning threads slowing the one that steps).
 *
 * `--profile [dir]` runs the ORT step again under ONNX Runtime's profiler and prints where the
 * time goes per op type (kernel time per step), plus the ten costliest nodes.
 */
import '../../engine/builtins'; // the built-in estimators, losses, formats and task kinds register themselves
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError, Option } from 'commander';
import { PolicyModel, type Backend } from '../../engine/model/runtime';
import { parameterCount, tinyConfig, type ModelConfig } from '../../engine/model/config';
import { initWeights, saveCheckpoint } from '../../engine/model/checkpoint';
import { packSequences, type LossSpec } from '../../engine/model/graphs';
import { AdamW } from '../../engine/rl/optimizer';
import { initTfjs } from '../../engine/tensor/tfjs';
import { OrtRunner } from '../../engine/tensor/ort';
import { traceGraph } from '../../engine/tensor/graph';
import { Rng } from '../../engine/base/rng';
import type { Ops } from '../../engine/tensor/ops';
import { servePeer, torchEnv, torchLabel, torchMissing, torchSettings, type TorchSetting, PYTHON } from './torch-peer';

const positive = (flag: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${flag} must be a positive integer (got '${v}')`);
  return n;
};

const cli = new Command('bench:train')
  .description('training-step throughput: ORT and tfjs interpreters vs PyTorch, with the fp32 GEMM ceiling')
  .option('--layers <n>', 'transformer layers', positive('--layers'))
  .option('--d-model <n>', 'hidden size D', positive('--d-model'))
  .option('--heads <n>', 'attention heads H', positive('--heads'))
  .option('--kv-heads <n>', 'key/value heads (default: --heads)', positive('--kv-heads'))
  .option('--ffn <n>', 'SwiGLU intermediate size (default: 8D/3 rounded up to 32)', positive('--ffn'))
  .option('--seq <n>', 'sequence length T', positive('--seq'))
  .option('--batch <n>', 'batch size B', positive('--batch'))
  .option('--vocab <n>', 'vocabulary size V', positive('--vocab'))
  .option('--threads <n>', 'intra-op threads for every implementation', positive('--threads'), 2)
  .option('--steps <n>', 'steps per implementation, warm-up included (default 8; --quick 4)', positive('--steps'))
  .option('--warmup <n>', 'untimed first steps of ORT and PyTorch (tfjs: 1)', (v) => (v === '0' ? 0 : positive('--warmup')(v)), 2)
  .option('--tfjs-steps <n>', 'steps for the tfjs interpreter (default: min(steps, 3))', positive('--tfjs-steps'))
  .addOption(new Option('--tfjs-backend <name>', 'tfjs backend (default: the best present)').choices(['tensorflow-gpu', 'tensorflow', 'wasm', 'cpu']))
  .option('--quick', 'first size only, 3 steps')
  .option('--profile [dir]', "profile the ORT step with ONNX Runtime's profiler (JSON kept in dir, default $TMPDIR/arbor-bench-train-profile)")
  .option('--no-tfjs', 'skip the tfjs interpreter')
  .option('--no-torch', 'skip the PyTorch peer')
  .option('--no-gemm', 'skip the GEMM ceiling')
  .option('--interleave', 'rotate implementations step by step instead of running each alone')
  .option('--json', 'print one JSON object instead of tables')
  .parse();
const flags = cli.opts<{
  layers?: number;
  dModel?: number;
  heads?: number;
  kvHeads?: number;
  ffn?: number;
  seq?: number;
  batch?: number;
  vocab?: number;
  threads: number;
  steps?: number;
  warmup: number;
  tfjsSteps?: number;
  tfjsBackend?: string;
  quick?: boolean;
  profile?: string | boolean;
  tfjs: boolean;
  torch: boolean;
  gemm: boolean;
  interleave?: boolean;
  json?: boolean;
}>();

const THREADS = flags.threads;
const STEPS = flags.steps ?? (flags.quick ? 4 : 8);
const WARMUP = flags.warmup;
if (STEPS <= WARMUP) cli.error(`--steps ${STEPS} must exceed --warmup ${WARMUP} (warm-up steps are not timed)`);
// tfjs steps take seconds to minutes; one untimed step (kernel set-up) is enough there.
const TFJS_STEPS = flags.tfjsSteps ?? Math.min(STEPS, 3);
const TFJS_WARMUP = 1;
if (flags.tfjs && TFJS_STEPS < 2) cli.error('--tfjs-steps must be at least 2 (the first step is not timed)');
const LR = 1e-3;
const WD = 0.01;
const GEMM_N = 1024;
const log = (s: string) => !flags.json && process.stderr.write(s + '\n');

interface Size {
  L: number;
  D: number;
  H: number;
  Hkv: number;
  F: number;
  T: number;
  B: number;
  V: number;
}
const ffnFor = (D: number) => Math.ceil((8 * D) / 3 / 32) * 32;
const preset = (L: number, D: number, H: number, T: number, B: number, V: number): Size => ({ L, D, H, Hkv: H, F: ffnFor(D), T, B, V });
const PRESETS: Size[] = [preset(4, 128, 4, 128, 16, 256), preset(4, 256, 8, 256, 8, 2048)];

function sizes(): Size[] {
  const custom = [flags.layers, flags.dModel, flags.heads, flags.kvHeads, flags.ffn, flags.seq, flags.batch, flags.vocab].some((v) => v !== undefined);
  if (!custom) return flags.quick ? PRESETS.slice(0, 1) : PRESETS;
  const b = PRESETS[0];
  const D = flags.dModel ?? b.D;
  const H = flags.heads ?? b.H;
  const s: Size = {
    L: flags.layers ?? b.L,
    D,
    H,
    Hkv: flags.kvHeads ?? H,
    F: flags.ffn ?? ffnFor(D),
    T: flags.seq ?? b.T,
    B: flags.batch ?? b.B,
    V: flags.vocab ?? b.V,
  };
  if (D % H) cli.error(`--d-model ${D} must be divisible by --heads ${H}`);
  if ((D / H) % 2) cli.error(`head dim --d-model/--heads = ${D / H} must be even (RoPE rotates pairs)`);
  if (H % s.Hkv) cli.error(`--heads ${H} must be divisible by --kv-heads ${s.Hkv}`);
  return [s];
}

const label = (s: Size) => `L${s.L} D${s.D} H${s.H}${s.Hkv !== s.H ? `/${s.Hkv}` : ''} F${s.F} T${s.T} B${s.B} V${s.V}`;
const configOf = (s: Size): ModelConfig =>
  tinyConfig({
    vocabSize: s.V,
    hiddenSize: s.D,
    layers: s.L,
    heads: s.H,
    kvHeads: s.Hkv,
    intermediateSize: s.F,
    architecture: 'LlamaForCausalLM',
    maxPositionEmbeddings: Math.max(512, s.T),
  });

/** Executed matmul FLOPs of one training step (forward ×3), see the header. */
function trainFlops(s: Size): number {
  const hd = s.D / s.H;
  const perToken = s.L * (s.D * s.H * hd + 2 * s.D * s.Hkv * hd + s.H * hd * s.D + 3 * s.D * s.F) + s.D * s.V;
  const fwd = 2 * s.B * s.T * perToken + 4 * s.B * s.L * s.T * s.T * s.H * hd;
  return 3 * fwd;
}

const nll: LossSpec = {
  key: 'bench-nll',
  inputs: [],
  program: <T>(o: Ops<T>, t: { logprobs: T; mask: T }) => ({
    loss: o.div(o.neg(o.sum(o.mul(t.logprobs, t.mask), [0, 1])), o.sum(t.mask, [0, 1])),
  }),
};

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** One implementation under test: `step()` runs one forward + backward + AdamW step. */
interface Impl {
  impl: string;
  kind: 'ort' | 'tfjs' | 'torch';
  maxSteps: number;
  warmup: number;
  step(): Promise<{ loss: number; ms: number; optMs?: number }>;
  close(): Promise<void>;
}

async function arborImpl(
  cfg: ModelConfig,
  seqs: number[][],
  backend: Backend,
  maxSteps: number,
  profilePrefix?: string,
): Promise<Impl & { model: PolicyModel }> {
  const model = new PolicyModel(cfg, initWeights(cfg, 1), { backend, threads: THREADS, profilePrefix });
  const batch = packSequences(seqs);
  const adam = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: WD, eps: 1e-8 });
  const impl = backend === 'ort' ? `arbor ort (${THREADS} thread${THREADS === 1 ? '' : 's'})` : `arbor tfjs (${await initTfjs(flags.tfjsBackend)})`;
  return {
    impl,
    kind: backend,
    maxSteps,
    warmup: backend === 'tfjs' ? TFJS_WARMUP : WARMUP,
    model,
    async step() {
      const t0 = performance.now();
      const r = await model.trainStep(batch, nll, batch.valid);
      const t1 = performance.now();
      adam.step(model.weights, r.grads, LR);
      model.markWeightsUpdated();
      const t2 = performance.now();
      return { loss: r.loss, ms: t2 - t0, optMs: t2 - t1 };
    },
    close: () => model.dispose(),
  };
}

const TORCH_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'train_torch.py');
async function torchImpl(cfg: ModelConfig, s: Size, folder: string, t: TorchSetting): Promise<Impl> {
  const p = await servePeer(
    TORCH_SCRIPT,
    [folder, '--serve', '--threads', String(t.torchThreads), '--lr', String(LR), '--weight-decay', String(WD)],
    torchEnv(t, THREADS),
  );
  const info = p.ready as { torch: string; params: number; tokens_per_step: number };
  if (info.params !== parameterCount(cfg)) throw new Error(`train_torch.py built ${info.params} parameters, Arbor's config has ${parameterCount(cfg)}`);
  if (info.tokens_per_step !== s.B * s.T) throw new Error(`train_torch.py sees ${info.tokens_per_step} tokens per step, expected ${s.B * s.T}`);
  return {
    impl: `pytorch ${info.torch} (${torchLabel(t, THREADS)})`,
    kind: 'torch',
    maxSteps: STEPS,
    warmup: WARMUP,
    async step() {
      const r = (await p.request('step')) as { loss: number; seconds: number };
      return { loss: r.loss, ms: r.seconds * 1000 };
    },
    close: () => p.close(),
  };
}

interface GemmRow {
  impl: string;
  n: number;
  medianMs: number;
  gflops: number;
}

/** ORT's fp32 GEMM ceiling: one N×N×N MatMul session (in this thread), median of 10 runs. */
async function ortGemm(n: number): Promise<GemmRow> {
  const g = traceGraph(
    [
      { name: 'a', dtype: 'float32', shape: [n, n] },
      { name: 'b', dtype: 'float32', shape: [n, n] },
    ],
    (o, x) => ({ c: o.matmul(x.a!, x.b!) }),
  );
  const r = await OrtRunner.create(g, { threads: THREADS, inWorker: false });
  const rng = new Rng(3);
  const mk = () => ({ dtype: 'float32' as const, shape: [n, n], data: Float32Array.from({ length: n * n }, () => rng.next() - 0.5) });
  const feeds = { a: mk(), b: mk() };
  try {
    for (let i = 0; i < 3; i++) await r.run(feeds);
    const ms: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      await r.run(feeds);
      ms.push(performance.now() - t0);
    }
    const med = median(ms);
    return { impl: `onnxruntime-node (${THREADS} threads, incl. copying C out)`, n, medianMs: med, gflops: (2 * n ** 3) / (med * 1e6) };
  } finally {
    await r.dispose();
  }
}

/** PyTorch's fp32 GEMM ceiling at each setting; the fastest is reported. */
function torchGemm(n: number): GemmRow[] {
  return torchSettings(THREADS).map((t) => {
    const r = spawnSync(PYTHON, [TORCH_SCRIPT, '--gemm', String(n), '--steps', '10', '--threads', String(t.torchThreads)], {
      env: torchEnv(t, THREADS),
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(`train_torch.py --gemm failed (code ${r.status}): ${r.stderr}`);
    const o = JSON.parse(r.stdout) as { torch: string; seconds: number[] };
    const med = median(o.seconds) * 1000;
    return { impl: `pytorch ${o.torch} (${torchLabel(t, THREADS)})`, n, medianMs: med, gflops: (2 * n ** 3) / (med * 1e6) };
  });
}

interface OpRow {
  op: string;
  msPerStep: number;
  share: number;
  nodes: number;
}
interface NodeRow {
  node: string;
  op: string;
  msPerStep: number;
  shapes: string;
}

/** Per-op-type kernel time of the train graph's runs (after `skip` warm-up runs), from ORT's JSON profile. */
function readProfile(file: string, skip: number): { runs: number; runMs: number; kernelMs: number; ops: OpRow[]; nodes: NodeRow[] } {
  type Ev = { cat: string; name: string; ts: number; dur: number; args?: { op_name?: string; input_type_shape?: Record<string, number[]>[] } };
  const ev = JSON.parse(readFileSync(file, 'utf8')) as Ev[];
  const runs = ev
    .filter((e) => e.name === 'model_run')
    .sort((a, b) => a.ts - b.ts)
    .slice(skip);
  if (!runs.length) throw new Error(`${file}: no model_run after ${skip} warm-up runs`);
  const inRun = (e: Ev) => runs.some((r) => e.ts >= r.ts && e.ts <= r.ts + r.dur);
  const ops = new Map<string, { us: number; nodes: Set<string> }>();
  const nodes = new Map<string, { op: string; us: number; shapes: string }>();
  let kernel = 0;
  for (const e of ev) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || !inRun(e)) continue;
    const op = e.args?.op_name ?? '?';
    const node = e.name.slice(0, -'_kernel_time'.length);
    kernel += e.dur;
    const o = ops.get(op) ?? { us: 0, nodes: new Set<string>() };
    o.us += e.dur;
    o.nodes.add(node);
    ops.set(op, o);
    const n = nodes.get(node) ?? { op, us: 0, shapes: (e.args?.input_type_shape ?? []).map((x) => `[${Object.values(x)[0]?.join(',')}]`).join(' ') };
    n.us += e.dur;
    nodes.set(node, n);
  }
  const k = runs.length * 1000;
  return {
    runs: runs.length,
    runMs: runs.reduce((a, r) => a + r.dur, 0) / k,
    kernelMs: kernel / k,
    ops: [...ops].map(([op, o]) => ({ op, msPerStep: o.us / k, share: o.us / kernel, nodes: o.nodes.size })).sort((a, b) => b.msPerStep - a.msPerStep),
    nodes: [...nodes]
      .map(([node, n]) => ({ node, op: n.op, msPerStep: n.us / k, shapes: n.shapes }))
      .sort((a, b) => b.msPerStep - a.msPerStep)
      .slice(0, 10),
  };
}

interface Row {
  size: string;
  impl: string;
  kind: Impl['kind'];
  steps: number;
  msPerStep: number;
  tokensPerSecond: number;
  gflops: number;
  adamMs?: number;
  losses: number[];
}

const torchNote = flags.torch ? torchMissing() : 'skipped (--no-torch)';
const gemm: GemmRow[] = [];
if (flags.gemm) {
  log(`GEMM ceiling: ${GEMM_N}³ fp32 MatMul, ${THREADS} threads`);
  gemm.push(await ortGemm(GEMM_N));
  if (!torchNote) gemm.push(...torchGemm(GEMM_N));
}

const rows: Row[] = [];
const numerics: { size: string; impl: string; loss0: number; refLoss0: number; relDiff: number; ok: boolean }[] = [];
const profiles: { size: string; file: string; profile: ReturnType<typeof readProfile> }[] = [];
for (const s of sizes()) {
  const cfg = configOf(s);
  const folder = mkdtempSync(join(tmpdir(), 'arbor-bench-train-'));
  const open: Impl[] = [];
  try {
    saveCheckpoint(folder, cfg, initWeights(cfg, 1));
    const rng = new Rng(7);
    const seqs = Array.from({ length: s.B }, () => Array.from({ length: s.T + 1 }, () => Math.floor(rng.next() * s.V)));
    writeFileSync(join(folder, 'batch.json'), JSON.stringify({ seqs }));
    const flops = trainFlops(s);
    log(
      `${label(s)}: ${(parameterCount(cfg) / 1e6).toFixed(2)}M parameters, ${s.B * s.T} tokens/step, ${(flops / 1e9).toFixed(1)} GFLOP/step, ${STEPS} steps (${WARMUP} warm-up), ${flags.interleave ? 'interleaved step by step' : 'one implementation at a time'}`,
    );
    const factories: (() => Promise<Impl>)[] = [() => arborImpl(cfg, seqs, 'ort', STEPS)];
    if (flags.tfjs) factories.push(() => arborImpl(cfg, seqs, 'tfjs', TFJS_STEPS));
    if (!torchNote) for (const t of torchSettings(THREADS)) factories.push(() => torchImpl(cfg, s, folder, t));
    const rec = factories.map(() => ({ impl: '', kind: 'ort' as Impl['kind'], losses: [] as number[], ms: [] as number[], optMs: [] as number[] }));
    const runStep = async (im: Impl, i: number, step: number) => {
      const r = await im.step();
      rec[i].losses.push(r.loss);
      if (step >= im.warmup) {
        rec[i].ms.push(r.ms);
        if (r.optMs !== undefined) rec[i].optMs.push(r.optMs);
      }
      log(`    step ${step} ${im.impl}: loss ${r.loss.toFixed(6)}, ${r.ms.toFixed(0)} ms${step < im.warmup ? ' (warm-up; not timed)' : ''}`);
    };
    const remember = (im: Impl, i: number) => Object.assign(rec[i], { impl: im.impl, kind: im.kind });
    if (!flags.interleave) {
      for (const [i, f] of factories.entries()) {
        const im = await f();
        open.push(im);
        remember(im, i);
        for (let step = 0; step < im.maxSteps; step++) await runStep(im, i, step);
        await im.close();
        open.pop();
      }
    } else {
      for (const [i, f] of factories.entries()) remember(open[open.push(await f()) - 1], i);
      for (let step = 0; step < STEPS; step++)
        for (let j = 0; j < open.length; j++) {
          const i = (j + step) % open.length; // rotate so no implementation always follows the same one
          if (step < open[i].maxSteps) await runStep(open[i], i, step);
        }
    }
    for (const r of rec) {
      const ms = median(r.ms);
      rows.push({
        size: label(s),
        impl: r.impl,
        kind: r.kind,
        steps: r.ms.length,
        msPerStep: ms,
        tokensPerSecond: ((s.B * s.T) / ms) * 1000,
        gflops: flops / (ms * 1e6),
        adamMs: r.optMs.length ? median(r.optMs) : undefined,
        losses: r.losses,
      });
    }
    const ref = rec.find((r) => r.kind === 'torch') ?? rec[0];
    for (const r of rec)
      if (r !== ref) {
        const rel = Math.abs(r.losses[0] - ref.losses[0]) / Math.abs(ref.losses[0]);
        numerics.push({ size: label(s), impl: r.impl, loss0: r.losses[0], refLoss0: ref.losses[0], relDiff: rel, ok: rel <= 1e-4 });
      }
    if (flags.profile) {
      const dir = typeof flags.profile === 'string' ? flags.profile : join(tmpdir(), 'arbor-bench-train-profile');
      mkdirSync(dir, { recursive: true });
      const prefix = join(dir, `ort-${label(s).replace(/[ /]/g, '_')}`);
      const profSteps = WARMUP + 3;
      log(`    profiling the ORT step (${profSteps} steps, ${WARMUP} warm-up not counted) → ${dir}`);
      const im = await arborImpl(cfg, seqs, 'ort', STEPS, prefix);
      open.push(im);
      for (let step = 0; step < profSteps; step++) await im.step();
      await im.model.endProfiling();
      await im.close();
      open.pop();
      const file = readdirSync(dir)
        .filter((f) => f.startsWith(`${basename(prefix)}-train_`) && f.endsWith('.json'))
        .sort()
        .pop();
      if (!file) throw new Error(`ORT wrote no train-graph profile with prefix ${prefix} in ${dir}`);
      profiles.push({ size: label(s), file: join(dir, file), profile: readProfile(join(dir, file), WARMUP) });
    }
  } finally {
    for (const im of open) await im.close();
    rmSync(folder, { recursive: true, force: true });
  }
}

const best = (size: string, kind: Impl['kind']) => rows.filter((r) => r.size === size && r.kind === kind).sort((a, b) => a.msPerStep - b.msPerStep)[0];
const ratios = [...new Set(rows.map((r) => r.size))].map((size) => {
  const ortRow = best(size, 'ort');
  const torch = best(size, 'torch');
  const tfjs = best(size, 'tfjs');
  return {
    size,
    ortMs: ortRow?.msPerStep,
    bestTorch: torch?.impl,
    ortOverBestTorch: torch && ortRow ? ortRow.msPerStep / torch.msPerStep : undefined,
    tfjs: tfjs?.impl,
    tfjsOverOrt: tfjs && ortRow ? tfjs.msPerStep / ortRow.msPerStep : undefined,
  };
});
const ortCeiling = gemm.find((g) => g.impl.startsWith('onnxruntime'));

if (flags.json) {
  console.log(
    JSON.stringify(
      {
        threads: THREADS,
        steps: STEPS,
        warmup: WARMUP,
        tfjsSteps: TFJS_STEPS,
        tfjsWarmup: TFJS_WARMUP,
        interleave: !!flags.interleave,
        lr: LR,
        weightDecay: WD,
        torch: torchNote ?? 'ran',
        gemm,
        results: rows,
        ratios,
        numerics,
        profiles,
      },
      null,
      2,
    ),
  );
} else {
  const f = (x: number | undefined, d = 1) => (x === undefined ? '—' : x.toFixed(d));
  console.log(
    `\ntrain step = forward + backward + AdamW (lr ${LR}, wd ${WD}) on mean token cross-entropy; ${THREADS} threads; median of the steps after ${WARMUP} warm-up (tfjs: ${TFJS_WARMUP})`,
  );
  console.log('GFLOP/s = executed matmul FLOPs (3× forward, full T×T attention) / step time' + (ortCeiling ? `; % = of ORT's ${GEMM_N}³ GEMM ceiling` : ''));
  if (torchNote) console.log(`PyTorch peer: ${torchNote}`);
  if (gemm.length) {
    console.log(`\nfp32 GEMM ceiling (${GEMM_N}³ MatMul, median of 10):`);
    const w = Math.max(...gemm.map((g) => g.impl.length));
    for (const g of gemm) console.log(`  ${g.impl.padEnd(w)}  ${f(g.medianMs, 2).padStart(7)} ms  ${f(g.gflops, 0).padStart(5)} GFLOP/s`);
  }
  const w = Math.max(...rows.map((r) => r.impl.length));
  const sw = Math.max(...rows.map((r) => r.size.length));
  console.log(`\n${'size'.padEnd(sw)}  ${'implementation'.padEnd(w)}  steps   ms/step    tok/s  GFLOP/s      %  AdamW ms`);
  for (const r of rows)
    console.log(
      `${r.size.padEnd(sw)}  ${r.impl.padEnd(w)}  ${String(r.steps).padStart(5)}  ${f(r.msPerStep).padStart(8)}  ${f(r.tokensPerSecond, 0).padStart(7)}  ${f(r.gflops).padStart(7)}  ${ortCeiling ? f((100 * r.gflops) / ortCeiling.gflops, 0).padStart(5) : '    —'}  ${r.adamMs === undefined ? '' : f(r.adamMs)}`,
    );
  console.log('\nratios (time per step; ORT target ≤ 1.00 vs PyTorch at its best, tfjs ≥ 10× ORT):');
  for (const r of ratios)
    console.log(
      `  ${r.size.padEnd(sw)}  ORT / best PyTorch = ${f(r.ortOverBestTorch, 2)}${r.bestTorch ? ` (best: ${r.bestTorch})` : ''};  ${r.tfjs ?? 'tfjs'} / ORT = ${f(r.tfjsOverOrt, 1)}×`,
    );
  console.log('\nstep-0 loss (same initial weights from one safetensors file) vs ' + (torchNote ? 'ORT' : 'PyTorch') + ':');
  for (const n of numerics)
    console.log(
      `  ${n.size.padEnd(sw)}  ${n.impl.padEnd(w)}  ${n.loss0.toFixed(7)} vs ${n.refLoss0.toFixed(7)}  rel ${n.relDiff.toExponential(2)}  ${n.ok ? 'ok (≤ 1e-4)' : 'MISMATCH (> 1e-4)'}`,
    );
  console.log('\nlosses per step (after identical AdamW updates):');
  for (const r of rows) console.log(`  ${r.size.padEnd(sw)}  ${r.impl.padEnd(w)}  ${r.losses.map((l) => l.toFixed(5)).join('  ')}`);
  for (const p of profiles) {
    const pr = p.profile;
    console.log(`\nORT profile, ${p.size} (${p.file}): train graph ${f(pr.runMs)} ms/run, kernels ${f(pr.kernelMs)} ms, over ${pr.runs} runs`);
    console.log(`  ${'op'.padEnd(22)} ${'ms/step'.padStart(8)} ${'share'.padStart(6)} nodes`);
    for (const o of pr.ops.filter((o) => o.share >= 0.005))
      console.log(`  ${o.op.padEnd(22)} ${f(o.msPerStep, 2).padStart(8)} ${f(100 * o.share, 1).padStart(5)}% ${String(o.nodes).padStart(5)}`);
    console.log('  costliest nodes:');
    for (const n of pr.nodes) console.log(`    ${f(n.msPerStep, 2).padStart(6)} ms  ${n.op.padEnd(18)} ${n.shapes}`);
  }
}
if (numerics.some((n) => !n.ok)) process.exitCode = 1;
