/**
 * `npm run bench:train -- [--quick] [--steps N] [--threads 2] [--json] [--no-tfjs]`
 *
 * Training-step throughput (tokens/s) of Arbor's PolicyModel — ORT backend (our autodiff graph
 * in onnxruntime-node, AdamW in JS) and tfjs backend (tfjs autodiff on the best backend here) —
 * against PyTorch on the CPU (/usr/bin/python3, scripts/bench/train_torch.py, a plain-torch
 * Llama), on the same Llama-style configs (tiny and ~25M parameters), the same batch and
 * sequence length, the same thread count, one step = forward + backward + AdamW on the mean
 * next-token NLL. PyTorch runs twice: with the environment's OPENBLAS_CORETYPE and with
 * SkylakeX (its best setting on this AVX-512 machine, per ARCHITECTURE §3).
 *
 * Numerics: the initial weights are written once with engine/model/checkpoint (HF folder,
 * safetensors) and read by every implementation, so the step-0 loss must agree within 1e-4
 * relative; the losses of the following steps (after identical AdamW updates) are shown too.
 * Step 0 also builds sessions, so it is excluded from the timings (median of the later steps).
 */
import { spawnSync } from 'node:child_process';
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

async function arbor(m: (typeof MODELS)[number], folder: string, seqs: number[][], backend: Backend, steps: number): Promise<Result> {
  const model = new PolicyModel(m.config, initWeights(m.config, 1), { backend, threads: THREADS });
  const batch = packSequences(seqs);
  const adam = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: WD, eps: 1e-8 });
  const losses: number[] = [];
  const times: number[] = [];
  let optMs = 0;
  try {
    for (let s = 0; s < steps; s++) {
      const t0 = performance.now();
      const r = await model.trainStep(batch, nll, batch.valid);
      const t1 = performance.now();
      adam.step(model.weights, r.grads, LR);
      model.markWeightsUpdated();
      const t2 = performance.now();
      losses.push(r.loss);
      if (s > 0) {
        times.push(t2 - t0);
        optMs += t2 - t1;
      }
      log(`    ${backend} step ${s}: loss ${r.loss.toFixed(6)}, ${(t2 - t0).toFixed(0)} ms${s === 0 ? ' (builds the session; not timed)' : ''}`);
    }
  } finally {
    await model.dispose();
  }
  const med = median(times);
  const tokens = m.batch * m.seq;
  const impl = backend === 'ort' ? `arbor ort (${THREADS} threads)` : `arbor tfjs (${await initTfjs()})`;
  return {
    model: m.name, impl, params: parameterCount(m.config), tokensPerStep: tokens, steps: times.length, medianStepMs: med, tokensPerSecond: (tokens / med) * 1000, losses,
    note: `AdamW in JS: ${(optMs / times.length).toFixed(0)} ms/step`,
  };
}

function torch(m: (typeof MODELS)[number], folder: string, steps: number, coretype?: string): Result {
  const script = join(dirname(fileURLToPath(import.meta.url)), 'train_torch.py');
  const env: NodeJS.ProcessEnv = { ...process.env, OMP_NUM_THREADS: String(THREADS), OPENBLAS_NUM_THREADS: String(THREADS) };
  if (coretype) env.OPENBLAS_CORETYPE = coretype;
  const r = spawnSync('/usr/bin/python3', [script, folder, '--steps', String(steps), '--threads', String(THREADS), '--lr', String(LR), '--weight-decay', String(WD)], { encoding: 'utf8', env });
  if (r.status !== 0) throw new Error(`train_torch.py failed (exit ${r.status}): ${r.stderr}`);
  const out = JSON.parse(r.stdout) as { torch: string; openblas_coretype: string | null; params: number; tokens_per_step: number; losses: number[]; step_seconds: number[] };
  if (out.params !== parameterCount(m.config)) throw new Error(`train_torch.py built ${out.params} parameters, Arbor's config has ${parameterCount(m.config)}`);
  const times = out.step_seconds.slice(1).map((s) => s * 1000);
  for (const [s, l] of out.losses.entries()) log(`    torch step ${s}: loss ${l.toFixed(6)}, ${(out.step_seconds[s] * 1000).toFixed(0)} ms`);
  const med = median(times);
  return {
    model: m.name, impl: `pytorch ${out.torch} (${THREADS} threads, OPENBLAS_CORETYPE=${out.openblas_coretype ?? 'unset'})`, params: out.params,
    tokensPerStep: out.tokens_per_step, steps: times.length, medianStepMs: med, tokensPerSecond: (out.tokens_per_step / med) * 1000, losses: out.losses,
  };
}

const results: Result[] = [];
const numerics: { model: string; impl: string; loss0: number; torchLoss0: number; relDiff: number; ok: boolean }[] = [];
const envCore = process.env.OPENBLAS_CORETYPE;
for (const m of quick ? MODELS.slice(0, 1) : MODELS) {
  const folder = mkdtempSync(join(tmpdir(), `arbor-bench-train-${m.name}-`));
  try {
    saveCheckpoint(folder, m.config, initWeights(m.config, 1));
    const rng = new Rng(7);
    const seqs = Array.from({ length: m.batch }, () => Array.from({ length: m.seq + 1 }, () => Math.floor(rng.next() * m.config.vocabSize)));
    writeFileSync(join(folder, 'batch.json'), JSON.stringify({ seqs }));
    log(`${m.name}: ${(parameterCount(m.config) / 1e6).toFixed(2)}M parameters, batch ${m.batch} × seq ${m.seq} = ${m.batch * m.seq} tokens/step, ${STEPS} steps (first not timed)`);
    const rows: Result[] = [];
    log('  pytorch (environment OPENBLAS_CORETYPE)');
    rows.push(torch(m, folder, STEPS));
    if (envCore !== 'SkylakeX') {
      log('  pytorch (OPENBLAS_CORETYPE=SkylakeX)');
      rows.push(torch(m, folder, STEPS, 'SkylakeX'));
    }
    log('  arbor ort');
    rows.push(await arbor(m, folder, seqs, 'ort', STEPS));
    if (!noTfjs) {
      log('  arbor tfjs');
      rows.push(await arbor(m, folder, seqs, 'tfjs', m.tfjsSteps));
    }
    const ref = rows[0].losses[0];
    for (const r of rows.slice(1)) {
      const rel = Math.abs(r.losses[0] - ref) / Math.abs(ref);
      numerics.push({ model: m.name, impl: r.impl, loss0: r.losses[0], torchLoss0: ref, relDiff: rel, ok: rel <= 1e-4 });
    }
    results.push(...rows);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

const bestTorch = (model: string) => results.filter((r) => r.model === model && r.impl.startsWith('pytorch')).reduce((a, b) => (a.tokensPerSecond >= b.tokensPerSecond ? a : b));
const table = results.map((r) => ({ ...r, vsBestTorch: r.tokensPerSecond / bestTorch(r.model).tokensPerSecond }));
if (json) console.log(JSON.stringify({ threads: THREADS, lr: LR, weightDecay: WD, results: table, numerics }, null, 2));
else {
  console.log(`\ntrain step = forward + backward + AdamW (lr ${LR}, wd ${WD}), ${THREADS} threads; tok/s = tokens per step / median step time\n`);
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
