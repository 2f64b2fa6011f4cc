/**
 * `npm run bench:quant -- [--json] [--reps N] [--threads N] [--models tiny,25M] [--batches 1,8,64]`
 *
 * Quantized rollouts (rollout.quantize, engine/model/quantize.ts) against float32 decoding, on the
 * rollout engine's default path (worker KV cache, sampling in the decode graph): generated tokens/s
 * of one model turn of 32 tokens after a 24-token prompt at temperature 1 (no stop, so every row
 * runs to its budget and every variant generates the same number of tokens), per model and batch,
 * for float32, int8 and int4 decode sessions of the same weights. The variants alternate, `--reps`
 * times (default 3), so they share the machine's background load; each takes its best repetition,
 * and the table gives each quantized variant's speed as a ratio to float32's in the same run.
 *
 * Also: what a weight update costs the quantized session (quantizing the weights on the host and
 * rebuilding the session: ORT pre-packs the MatMulNBits weights at session creation), measured as
 * the first quantized call after markWeightsUpdated minus an ordinary call; and the mean absolute
 * logprob difference of the quantized sampler's tokens from float32 scoring of the same tokens
 * (what algorithm.tis corrects; `rollout/logprob_mismatch` in a training run).
 */
import { availableParallelism, loadavg } from 'node:os';
import { PolicyModel } from '../../engine/model/runtime';
import { parameterCount } from '../../engine/model/config';
import { DECODE_MODELS } from './shapes';
import type { QuantMode } from '../../engine/model/quantize';
import { rollout } from '../../engine/rollout/engine';
import { policyDecodeBackend } from '../../engine/rollout/model-backend';
import type { EpisodeEnv, RolloutTask, TokenizerPort } from '../../engine/rollout/ports';
import { Rng } from '../../engine/base/rng';

const args = process.argv.slice(2);
const json = args.includes('--json');
const flag = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const REPS = Number(flag('--reps') ?? 3);
const threads = Number(flag('--threads') ?? Math.min(8, availableParallelism()));
const onlyModels = flag('--models')?.split(',');
const BATCHES = (flag('--batches') ?? '1,8,64').split(',').map(Number);
if (!Number.isInteger(REPS) || REPS < 1) throw new Error(`--reps must be an integer ≥ 1 (got ${flag('--reps')})`);
if (!Number.isInteger(threads) || threads < 1) throw new Error(`--threads must be an integer ≥ 1 (got ${flag('--threads')})`);
if (BATCHES.some((b) => !Number.isInteger(b) || b < 1)) throw new Error(`--batches must be integers ≥ 1 (got ${flag('--batches')})`);
const PROMPT = 24,
  NEW = 32;
const VARIANTS: QuantMode[] = ['none', 'int8', 'int4'];

const idTokenizer: TokenizerPort = { encode: (t) => t.split(' ').filter(Boolean).map(Number), decode: (ids) => ids.join(' ') };

function tasks(count: number, vocab: number, seed: number): RolloutTask[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `q-${i}`,
    createEnv(): EpisodeEnv {
      const r = new Rng(seed * 1000 + i);
      return {
        prompt: async () => ({ ids: Array.from({ length: PROMPT }, () => 1 + Math.floor(r.next() * (vocab - 1))) }),
        step: async () => ({ done: true }),
        outcome: async () => ({ reward: 0, components: {} }),
      };
    },
  }));
}

interface Row {
  model: string;
  params: number;
  batch: number;
  quantize: QuantMode;
  tokensPerSecond: number;
  /** Tokens/s over float32's in the same run. */
  ratio: number;
}

async function measure(model: PolicyModel, q: QuantMode, batch: number) {
  const backend = policyDecodeBackend(model, { maxBatch: batch, quantized: q !== 'none', shards: 1 });
  const t0 = performance.now();
  const res = await rollout(backend, {
    tasks: tasks(batch, model.config.vocabSize, batch),
    n: 1,
    seed: 1,
    sampling: { temperature: 1 },
    tokenizer: idTokenizer,
    maxBatch: batch,
    limits: { maxNewTokens: NEW, maxTurns: 1, maxTotalLength: PROMPT + NEW + 1 },
    stop: { strings: [], tokenIds: [] },
  });
  const s = (performance.now() - t0) / 1000;
  await backend.close?.();
  return { tps: res.stats.generatedTokens / s, trajectories: res.trajectories };
}

const rows: Row[] = [];
const updates: { model: string; quantize: QuantMode; rebuildMs: number }[] = [];
const mismatch: { model: string; quantize: QuantMode; meanAbs: number; max: number }[] = [];
const load0 = loadavg()[0]!;
for (const { name, config } of DECODE_MODELS) {
  if (onlyModels && !onlyModels.includes(name)) continue;
  // One model per variant, the same weights (seed 1).
  const models = new Map(VARIANTS.map((q) => [q, PolicyModel.init(config, 1, { threads, quantize: q })] as const));
  for (const batch of BATCHES) {
    const best = new Map<QuantMode, number>();
    for (const q of VARIANTS) await measure(models.get(q)!, q, Math.min(batch, 8)); // warm-up: sessions built
    for (let r = 0; r < REPS; r++)
      for (const q of VARIANTS) {
        const { tps } = await measure(models.get(q)!, q, batch);
        best.set(q, Math.max(best.get(q) ?? 0, tps));
      }
    for (const q of VARIANTS)
      rows.push({ model: name, params: parameterCount(config), batch, quantize: q, tokensPerSecond: best.get(q)!, ratio: best.get(q)! / best.get('none')! });
  }
  for (const q of VARIANTS.filter((v) => v !== 'none')) {
    const m = models.get(q)!;
    // A weight update: the next quantized call rebuilds the session (quantize + create), the one after is ordinary.
    const call = async () => {
      const t = performance.now();
      await measure(m, q, 1);
      return performance.now() - t;
    };
    const plain = Math.min(await call(), await call());
    m.markWeightsUpdated();
    const first = await call();
    updates.push({ model: name, quantize: q, rebuildMs: first - plain });
    // The quantized sampler's logprobs of its own tokens against float32 scoring of them.
    const { trajectories } = await measure(m, q, 8);
    const seqs = trajectories.map((t) => [...t.promptIds, ...t.turns.flatMap((u) => u.tokenIds)]);
    const sampled = trajectories.map((t) => t.turns.filter((u) => u.role === 'model').flatMap((u) => u.logprobs));
    const scored = await m.score(seqs);
    let sum = 0,
      n = 0,
      max = 0;
    seqs.forEach((s, b) => {
      const k = sampled[b]!.length;
      for (let j = 0; j < k; j++) {
        const t = s.length - k + j; // token index; scored row t−1 predicts it
        const d = Math.abs(scored.logprobs[b * scored.batch.length + t - 1]! - sampled[b]![j]!);
        sum += d;
        n++;
        max = Math.max(max, d);
      }
    });
    mismatch.push({ model: name, quantize: q, meanAbs: sum / n, max });
  }
  for (const m of models.values()) await m.dispose();
}
const load1 = loadavg()[0]!;

if (json) console.log(JSON.stringify({ threads, reps: REPS, loadavg: [load0, load1], rows, updates, mismatch }));
else {
  console.log(`bench:quant — threads ${threads}, best of ${REPS} alternating reps, load average ${load0.toFixed(2)} → ${load1.toFixed(2)}`);
  console.log('model  batch  quantize  tokens/s  × float32');
  for (const r of rows)
    console.log(
      `${r.model.padEnd(6)} ${String(r.batch).padStart(5)}  ${r.quantize.padEnd(8)}  ${r.tokensPerSecond.toFixed(0).padStart(8)}  ${r.ratio.toFixed(2)}`,
    );
  console.log('\nweight update: quantize + rebuild the session (ms, first call after markWeightsUpdated minus an ordinary call)');
  for (const u of updates) console.log(`${u.model.padEnd(6)} ${u.quantize}  ${u.rebuildMs.toFixed(0)} ms`);
  console.log('\nsampler vs float32 scoring of the sampled tokens: |Δ logprob| mean / max');
  for (const x of mismatch) console.log(`${x.model.padEnd(6)} ${x.quantize}  ${x.meanAbs.toFixed(4)} / ${x.max.toFixed(4)}`);
}
