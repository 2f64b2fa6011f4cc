/**
 * `npm run bench:train -- [--quick] [--steps N] [--threads 2] [--json] [--no-tfjs] [--interleave]`
 *
 * Training-step throughput (tokens/s) of Arbor's PolicyModel — ORT backend (our autodiff graph
 * in onnxruntime-node, AdamW in JS) and tfjs backend (tfjs autodiff on the best backend here) —
 * against PyTorch on the CPU (/usr/bin/python3, scripts/bench/train_torch.py, a plain-torch
 * Llama), on the same Llama-style configs (tiny and ~25M parameters), the same batch and
 * sequence length, the same thread count, one step = forward + backward + AdamW on the mean
 * next-token NLL. PyTorch runs twice: with the environment's OPENBLAS_CORETYPE and with
 * SkylakeX (its best setting on this AVX-512 machine, per ARCHITECTURE §3), and with more than
 * one thread also as a 1-thread torch pool over an N-thread OpenBLAS (faster on a loaded machine).
 *
 * Numerics: the initial weights are written once with engine/model/checkpoint (HF folder,
 * safetensors) and read by every implementation, so the step-0 loss must agree within 1e-4
 * relative; the losses of the following steps (after identical AdamW updates) are shown too.
 * Step 0 also builds sessions, so it is excluded from the timings (median of the later steps).
 * By default each implementation runs its steps alone (the others not yet started or already
 * closed). `--interleave` runs them one step each in rotating order (PyTorch as a child process
 * stepping on request) so they share the same background load, at the price of idle runtimes'
 * spinning threads slowing the one that steps (measured: PyTorch 4-5x slower on tiny).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PolicyModel, type Backend } from '../../engine/model/runtime';
import { parameterCount, tinyConfig, type ModelConfig } from '../../engine/model/config';
import { initWeights, saveCheckpoint } from '../../engine/model/checkpoint';
import { packSequences, type LossSpec } from '../../engine/model/graphs';
import { AdamW } from '../../engine/train/model-port';
import { initTfjs } from '../../engine/tensor/tfjs';
import { Rng } from '../../engine/rollout/rng';
import type { Ops } from '../../engine/tensor/ops';

const args = process.argv.slice(2);
const opt = (name: string, def: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : def;
};
const json = args.includes('--json');
const quick = args.includes('--quick');
const noTfjs = args.includes('--no-tfjs');
// Sequential by default: interleaving kept idle runtimes alive whose spinning threads slowed
// the one stepping (PyTorch's 1-thread pool measured 4-5x slower interleaved than alone).
const sequential = !args.includes('--interleave');
const THREADS = opt('threads', 2);
const STEPS = opt('steps', quick ? 3 : 6);
const LR = 1e-3;
const WD = 0.01;
const log = (s: string) => !json && process.stderr.write(s + '\n');

const MODELS: { name: string; config: ModelConfig; batch: number; seq: number; tfjsSteps: number }[] = [
  { name: 'tiny', config: tinyConfig({ vocabSize: 512, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, architecture: 'LlamaForCausalLM', maxPositionEmbeddings: 512 }), batch: 8, seq: 64, tfjsSteps: STEPS },
  { name: '25M', config: tinyConfig({ vocabSize: 8192, hiddenSize: 512, layers: 7, heads: 8, kvHeads: 4, intermediateSize: 1408, architecture: 'LlamaForCausalLM', maxPositionEmbeddings: 512 }), batch: 4, seq: 128, tfjsSteps: Math.min(STEPS, 3) },
];

const nll: LossSpec = {
  key: 'bench-nll',
  inputs: [],
  program: <T>(o: Ops<T>, t: { logprobs: T; mask: T }) => ({
    loss: o.div(o.neg(o.sum(o.mul(t.logprobs, t.mask), [0, 1])), o.sum(t.mask, [0, 1])),
  }),
};

interface Result {
  model: string;
  impl: string;
  params: number;
  tokensPerStep: number;
  steps: number;
  medianStepMs: number;
  tokensPerSecond: number;
  losses: number[];
  note?: string;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** One implementation under test: `step()` runs one forward + backward + AdamW step. */
interface Impl {
  impl: string;
  maxSteps: number;
  step(): Promise<{ loss: number; ms: number; optMs?: number }>;
  close(): Promise<void>;
}

async function arborImpl(m: (typeof MODELS)[number], seqs: number[][], backend: Backend, maxSteps: number, threads = THREADS): Promise<Impl> {
  const model = new PolicyModel(m.config, initWeights(m.config, 1), { backend, threads });
  const batch = packSequences(seqs);
  const adam = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: WD, eps: 1e-8 });
  const name = backend === 'ort' ? `arbor ort (${threads} thread${threads === 1 ? '' : 's'})` : `arbor tfjs (${await initTfjs()}, 1 thread)`;
  return {
    impl: name,
    maxSteps,
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

/**
 * PyTorch as a child process. `torchThreads` is torch's intra-op pool (OpenMP), `blasThreads`
 * OpenBLAS's own pool; by default both are THREADS.
 */
async function torchImpl(m: (typeof MODELS)[number], folder: string, maxSteps: number, o: { coretype?: string; torchThreads?: number } = {}): Promise<Impl> {
  const script = join(dirname(fileURLToPath(import.meta.url)), 'train_torch.py');
  const torchThreads = o.torchThreads ?? THREADS;
  const env: NodeJS.ProcessEnv = { ...process.env, OMP_NUM_THREADS: String(torchThreads), OPENBLAS_NUM_THREADS: String(THREADS) };
  if (o.coretype) env.OPENBLAS_CORETYPE = o.coretype;
  const p = spawn('/usr/bin/python3', [script, folder, '--serve', '--threads', String(torchThreads), '--lr', String(LR), '--weight-decay', String(WD)], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  p.stderr.on('data', (d) => (stderr += d));
  const lines = createInterface({ input: p.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const r = await lines.next();
    if (r.done) throw new Error(`train_torch.py exited (code ${p.exitCode}): ${stderr}`);
    return JSON.parse(r.value) as Record<string, unknown>;
  };
  const info = (await next()) as { torch: string; openblas_coretype: string | null; params: number; tokens_per_step: number };
  if (info.params !== parameterCount(m.config)) throw new Error(`train_torch.py built ${info.params} parameters, Arbor's config has ${parameterCount(m.config)}`);
  if (info.tokens_per_step !== m.batch * m.seq) throw new Error(`train_torch.py sees ${info.tokens_per_step} tokens per step, expected ${m.batch * m.seq}`);
  return {
    impl: `pytorch ${info.torch} (${torchThreads === THREADS ? `${THREADS} threads` : `torch ${torchThreads} + BLAS ${THREADS} threads`}, OPENBLAS_CORETYPE=${info.openblas_coretype ?? 'unset'})`,
    maxSteps,
    async step() {
      p.stdin.write('step\n');
      const r = (await next()) as { loss: number; seconds: number };
      return { loss: r.loss, ms: r.seconds * 1000 };
    },
    async close() {
      p.stdin.end();
      await new Promise((res) => (p.exitCode !== null ? res(null) : p.once('exit', res)));
    },
  };
}

const results: Result[] = [];
const numerics: { model: string; impl: string; loss0: number; torchLoss0: number; relDiff: number; ok: boolean }[] = [];
const envCore = process.env.OPENBLAS_CORETYPE;
for (const m of quick ? MODELS.slice(0, 1) : MODELS) {
  const folder = mkdtempSync(join(tmpdir(), `arbor-bench-train-${m.name}-`));
  const impls: Impl[] = [];
  const names: string[] = [];
  try {
    saveCheckpoint(folder, m.config, initWeights(m.config, 1));
    const rng = new Rng(7);
    const seqs = Array.from({ length: m.batch }, () => Array.from({ length: m.seq + 1 }, () => Math.floor(rng.next() * m.config.vocabSize)));
    writeFileSync(join(folder, 'batch.json'), JSON.stringify({ seqs }));
    log(`${m.name}: ${(parameterCount(m.config) / 1e6).toFixed(2)}M parameters, batch ${m.batch} × seq ${m.seq} = ${m.batch * m.seq} tokens/step, ${STEPS} steps (first not timed), ${sequential ? 'one implementation at a time' : 'implementations interleaved step by step'}`);
    const factories: (() => Promise<Impl>)[] = [() => torchImpl(m, folder, STEPS)];
    if (envCore !== 'SkylakeX') factories.push(() => torchImpl(m, folder, STEPS, { coretype: 'SkylakeX' }));
    // On a loaded 2-core machine torch's 2-thread intra-op pool stalls (measured 16× slower than
    // 1 thread at 25M); its best setting here is a 1-thread pool with a multi-threaded BLAS.
    if (THREADS > 1) factories.push(() => torchImpl(m, folder, STEPS, { coretype: 'SkylakeX', torchThreads: 1 }));
    factories.push(() => arborImpl(m, seqs, 'ort', STEPS));
    // ORT's pool also stalls under load; its 1-thread setting is shown next to it.
    if (THREADS > 1) factories.push(() => arborImpl(m, seqs, 'ort', STEPS, 1));
    if (!noTfjs) factories.push(() => arborImpl(m, seqs, 'tfjs', m.tfjsSteps));
    const rec = factories.map(() => ({ losses: [] as number[], ms: [] as number[], optMs: [] as number[] }));
    const runStep = async (im: Impl, i: number, s: number) => {
      const r = await im.step();
      rec[i].losses.push(r.loss);
      if (s > 0) {
        rec[i].ms.push(r.ms);
        if (r.optMs !== undefined) rec[i].optMs.push(r.optMs);
      }
      log(`    step ${s} ${im.impl}: loss ${r.loss.toFixed(6)}, ${r.ms.toFixed(0)} ms${s === 0 ? ' (first step: sessions/allocations; not timed)' : ''}`);
    };
    if (sequential) {
      // One implementation at a time, closed before the next starts (nothing else of ours alive).
      for (const [i, f] of factories.entries()) {
        const im = await f();
        impls.push(im);
        for (let s = 0; s < im.maxSteps; s++) await runStep(im, i, s);
        await im.close();
        impls.pop();
        names[i] = im.impl;
      }
    } else {
      for (const f of factories) impls.push(await f());
      impls.forEach((im, i) => (names[i] = im.impl));
      for (let s = 0; s < STEPS; s++) {
        // Rotate the order every step so no implementation always runs right after another.
        for (let j = 0; j < impls.length; j++) {
          const i = (j + s) % impls.length;
          if (s < impls[i].maxSteps) await runStep(impls[i], i, s);
        }
      }
    }
    const rows: Result[] = names.map((impl, i) => {
      const med = median(rec[i].ms);
      return {
        model: m.name, impl, params: parameterCount(m.config), tokensPerStep: m.batch * m.seq, steps: rec[i].ms.length, medianStepMs: med,
        tokensPerSecond: ((m.batch * m.seq) / med) * 1000, losses: rec[i].losses,
        note: rec[i].optMs.length ? `AdamW in JS: ${median(rec[i].optMs).toFixed(0)} ms/step` : undefined,
      };
    });
    const ref = rows[0].losses[0];
    for (const r of rows.slice(1)) {
      const rel = Math.abs(r.losses[0] - ref) / Math.abs(ref);
      numerics.push({ model: m.name, impl: r.impl, loss0: r.losses[0], torchLoss0: ref, relDiff: rel, ok: rel <= 1e-4 });
    }
    results.push(...rows);
  } finally {
    for (const im of impls) await im.close();
    rmSync(folder, { recursive: true, force: true });
  }
}

const bestTorch = (model: string) => results.filter((r) => r.model === model && r.impl.startsWith('pytorch')).reduce((a, b) => (a.tokensPerSecond >= b.tokensPerSecond ? a : b));
const table = results.map((r) => ({ ...r, vsBestTorch: r.tokensPerSecond / bestTorch(r.model).tokensPerSecond }));
if (json) console.log(JSON.stringify({ threads: THREADS, sequential, lr: LR, weightDecay: WD, results: table, numerics }, null, 2));
else {
  console.log(`\ntrain step = forward + backward + AdamW (lr ${LR}, wd ${WD}), ${THREADS} threads, ${sequential ? 'sequential' : 'interleaved'}; tok/s = tokens per step / median step time\n`);
  const w = Math.max(...table.map((r) => r.impl.length));
  console.log(`${'model'.padEnd(5)}  ${'implementation'.padEnd(w)}  ${'steps'.padStart(5)}  ${'ms/step'.padStart(8)}  ${'tok/s'.padStart(7)}  ${'× best torch'.padStart(12)}  note`);
  for (const r of table)
    console.log(`${r.model.padEnd(5)}  ${r.impl.padEnd(w)}  ${String(r.steps).padStart(5)}  ${r.medianStepMs.toFixed(1).padStart(8)}  ${r.tokensPerSecond.toFixed(0).padStart(7)}  ${r.vsBestTorch.toFixed(2).padStart(12)}  ${r.note ?? ''}`);
  console.log('\nstep-0 loss (same initial weights from one safetensors file), relative to PyTorch:');
  for (const n of numerics) console.log(`  ${n.model.padEnd(5)} ${n.impl.padEnd(w)}  ${n.loss0.toFixed(7)} vs ${n.torchLoss0.toFixed(7)}  rel ${n.relDiff.toExponential(2)}  ${n.ok ? 'ok (≤ 1e-4)' : 'MISMATCH (> 1e-4)'}`);
  console.log('\nlosses per step (after identical AdamW updates):');
  for (const r of table) console.log(`  ${r.model.padEnd(5)} ${r.impl.padEnd(w)}  ${r.losses.map((l) => l.toFixed(5)).join('  ')}`);
}
if (numerics.some((n) => !n.ok)) process.exitCode = 1;
