/**
 * `npm run bench:quant-base -- [--shape qwen2.5-0.5b] [--layers N] [--batch 1] [--seq 128] [--rank 16]
 *  [--recompute-layers] [--head-chunks N] [--profile PREFIX] [--steps 2] [--decode-batch 8] [--new 32] [--reps 2] [--threads 2] [--modes none,int4,int8] [--parts step,decode] [--json]`
 *
 * The quantized frozen base (model.quantize_base, engine/model/quantize.ts) against the float32
 * base in the same run, on a random model of a released shape (engine/model/shapes.ts; `--layers`
 * cuts the depth): (a) one LoRA training step (rank `--rank`, all linear layers; forward +
 * backward on the ORT train graph, then AdamW), median of `--steps` after a warm-up; (b) rollouts
 * decoding `--new` tokens for `--decode-batch` prompts of 24 tokens with the KV cache in the ORT
 * worker (the training rollouts' path), best of `--reps` after a warm-up (`--parts` picks (a), (b) or both). Prints each mode's time
 * and its ratio to the float32 row before it (alternate modes, `--modes none,int4,none,int4`, so each ratio pairs
 * runs under the same load), and the base's bytes per mode. The load average is printed: on a
 * shared machine the ratios, not the absolute times, are the result.
 */
import '../../engine/builtins'; // the built-in estimators, losses, formats and task kinds register themselves
import { Command } from 'commander';
import { availableParallelism, loadavg } from 'node:os';
import { PolicyModel } from '../../engine/model/runtime';
import { parameterCount, weightShapes, type ModelConfig } from '../../engine/model/config';
import { initWeights } from '../../engine/model/checkpoint';
import { resolveLora } from '../../engine/model/lora';
import { loraTrainStep, randomTokenBatch } from '../../engine/model/lora-step';
import { baseQuantLayout, QUANT_BITS, quantizeBlockwise, quantizedBytes, type QuantMode, type QuantizedMatrix } from '../../engine/model/quantize';
import { AdamW } from '../../engine/rl/optimizer';
import { rollout } from '../../engine/rollout/engine';
import { policyDecodeBackend } from '../../engine/rollout/model-backend';
import type { EpisodeEnv, RolloutTask, TokenizerPort } from '../../engine/rollout/ports';
import { Rng } from '../../engine/base/rng';
import { shapeByName } from './shapes';

const o = new Command()
  .option('--shape <name>', 'model shape (engine/model/shapes.ts)', 'qwen2.5-0.5b')
  .option('--layers <n>', 'transformer blocks (default: the shape’s)', Number)
  .option('--batch <n>', 'sequences per LoRA step', Number, 1)
  .option('--seq <n>', 'tokens per sequence of the LoRA step', Number, 128)
  .option('--rank <n>', 'LoRA rank', Number, 16)
  .option('--recompute-layers', 'recompute every block in the backward pass (model.recompute_layers)')
  .option('--head-chunks <n>', 'row chunks of the LM head in the step (default: defaultHeadChunks, 10 at 151,936 words)', Number)
  .option('--steps <n>', 'timed LoRA steps', Number, 2)
  .option('--decode-batch <n>', 'rollouts decoded together', Number, 8)
  .option('--new <n>', 'tokens decoded per rollout', Number, 32)
  .option('--reps <n>', 'timed rollout rounds', Number, 2)
  .option('--threads <n>', 'ORT intra-op threads', Number, Math.min(8, availableParallelism()))
  .option('--block <n>', 'values per scale', Number, 32)
  .option('--modes <list>', 'base modes, none first', 'none,int4,int8')
  .option('--parts <list>', 'what to time: step, decode or both', 'step,decode')
  .option('--profile <prefix>', "ONNX Runtime's profile of every session: <prefix>-<mode>-<graph>_<time>.json")
  .option('--json', 'print JSON')
  .parse()
  .opts<{
    shape: string;
    layers?: number;
    batch: number;
    seq: number;
    rank: number;
    recomputeLayers?: boolean;
    headChunks?: number;
    steps: number;
    decodeBatch: number;
    new: number;
    reps: number;
    threads: number;
    block: number;
    modes: string;
    parts: string;
    profile?: string;
    json?: boolean;
  }>();

const shape = shapeByName(o.shape);
const config: ModelConfig = { ...shape, ...(o.layers ? { numLayers: o.layers } : {}) };
const modes = o.modes.split(',') as QuantMode[];
if (modes[0] !== 'none') throw new Error('--modes: start with none (the ratios are to float32)');
const parts = new Set(o.parts.split(','));
for (const p of parts) if (p !== 'step' && p !== 'decode') throw new Error(`--parts: ${p} is not step or decode`);
const log = (s: string) => !o.json && process.stderr.write(s + '\n');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const PROMPT = 24;
const idTokenizer: TokenizerPort = { encode: (t) => t.split(' ').filter(Boolean).map(Number), decode: (ids) => ids.join(' ') };
const tasks = (count: number, vocab: number): RolloutTask[] =>
  Array.from({ length: count }, (_, i) => ({
    id: `q-${i}`,
    createEnv(): EpisodeEnv {
      const r = new Rng(1000 + i);
      return {
        prompt: async () => ({ ids: Array.from({ length: PROMPT }, () => 1 + Math.floor(r.next() * (vocab - 1))) }),
        step: async () => ({ done: true }),
        outcome: async () => ({ reward: 0, components: {} }),
      };
    },
  }));

async function decodeTps(model: PolicyModel): Promise<number> {
  const backend = policyDecodeBackend(model, { maxBatch: o.decodeBatch, shards: 1 });
  const t0 = performance.now();
  const res = await rollout(backend, {
    tasks: tasks(o.decodeBatch, config.vocabSize),
    n: 1,
    seed: 1,
    sampling: { temperature: 1 },
    tokenizer: idTokenizer,
    maxBatch: o.decodeBatch,
    limits: { maxNewTokens: o.new, maxTurns: 1, maxTotalLength: PROMPT + o.new + 1 },
    stop: { strings: [], tokenIds: [] },
  });
  const s = (performance.now() - t0) / 1000;
  await backend.close?.();
  return res.stats.generatedTokens / s;
}

const spec = resolveLora({ rank: o.rank, alpha: 32, dropout: 0, target_modules: 'all-linear' });
const base = initWeights(config, 1);
const shapes = weightShapes(config);
const batch = randomTokenBatch(config.vocabSize, o.batch, o.seq, 7);
const load0 = loadavg()[0]!;
log(
  `${o.shape}${o.layers ? ` (${o.layers} layers)` : ''}: ${(parameterCount(config) / 1e6).toFixed(0)}M parameters, LoRA r=${o.rank} all-linear, step ${o.batch} × ${o.seq}${o.recomputeLayers ? ' (every block recomputed)' : ''}${o.headChunks ? `, ${o.headChunks} head chunks` : ''}; decode batch ${o.decodeBatch} × ${o.new} new; ${o.threads} threads; load ${load0.toFixed(1)}`,
);

interface Row {
  mode: QuantMode;
  baseBytes: number;
  stepSeconds: number;
  decodeTokensPerSecond: number;
}
const rows: Row[] = [];
for (const mode of modes) {
  const w = new Map(base);
  let mats: Map<string, QuantizedMatrix> | undefined;
  let baseBytes = 0;
  for (const s of Object.values(shapes)) baseBytes += s[0]! * (s[1] ?? 1) * 4;
  if (mode !== 'none') {
    mats = new Map();
    for (const [n, q] of baseQuantLayout(config, { bits: QUANT_BITS[mode], blockSize: o.block })) {
      const [N, K] = shapes[n]!;
      mats.set(n, quantizeBlockwise(base.get(n)!, N!, K!, q.bits, q.blockSize));
      w.delete(n); // the model holds the codes only
      baseBytes += quantizedBytes(N!, K!, q.bits, q.blockSize) - N! * K! * 4;
    }
  }
  const model = new PolicyModel(config, w, {
    threads: o.threads,
    lora: spec,
    loraSeed: 1,
    ...(o.recomputeLayers ? { recomputeLayers: true } : {}),
    ...(o.headChunks ? { headChunks: o.headChunks } : {}),
    ...(o.profile ? { profilePrefix: `${o.profile}-${mode}` } : {}),
    ...(mats ? { quantizeBase: { bits: QUANT_BITS[mode as 'int4' | 'int8'], blockSize: o.block }, quantizedBaseMats: mats } : {}),
  });
  const adam = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: 0 });
  const times: number[] = [];
  for (let i = 0; parts.has('step') && i <= o.steps; i++) {
    const r = await loraTrainStep(model, batch, adam, 1e-4);
    if (i > 0) times.push(r.gradSeconds + r.optimizerSeconds);
    log(`  ${mode} LoRA step ${i}${i ? '' : ' (warm-up)'}: ${(r.gradSeconds + r.optimizerSeconds).toFixed(2)} s, loss ${r.loss.toFixed(4)}`);
  }
  if (parts.has('decode')) await decodeTps(model); // warm-up: the decode session is built
  let best = 0;
  for (let r = 0; parts.has('decode') && r < o.reps; r++) {
    const tps = await decodeTps(model);
    best = Math.max(best, tps);
    log(`  ${mode} decode round ${r + 1}: ${tps.toFixed(1)} tok/s`);
  }
  if (o.profile) await model.endProfiling();
  rows.push({ mode, baseBytes, stepSeconds: times.length ? median(times) : NaN, decodeTokensPerSecond: parts.has('decode') ? best : NaN });
  await model.dispose();
}
const load1 = loadavg()[0]!;
// Each row against the float32 row before it (the same load, when the modes alternate).
const ref = (i: number) => [...rows.slice(0, i + 1)].reverse().find((r) => r.mode === 'none')!;
if (o.json) console.log(JSON.stringify({ shape: o.shape, layers: config.numLayers, threads: o.threads, load: [load0, load1], rows }));
else {
  console.log(`\n${o.shape}, ${config.numLayers} layers; load average ${load0.toFixed(1)} → ${load1.toFixed(1)} on ${availableParallelism()} cores`);
  console.log('base   weights MiB  LoRA step s  × float32  decode tok/s  × float32');
  for (const [i, r] of rows.entries()) {
    const f = ref(i);
    console.log(
      `${r.mode.padEnd(6)} ${(r.baseBytes / 2 ** 20).toFixed(0).padStart(11)}  ${r.stepSeconds.toFixed(2).padStart(11)}  ${(r.stepSeconds / f.stepSeconds).toFixed(2).padStart(9)}  ${r.decodeTokensPerSecond.toFixed(1).padStart(12)}  ${(r.decodeTokensPerSecond / f.decodeTokensPerSecond).toFixed(2).padStart(9)}`,
    );
  }
}
