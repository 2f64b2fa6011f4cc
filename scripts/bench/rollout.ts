/**
 * `npm run bench:rollout -- [--json] [--quick] [--threads N]`
 *
 * Generated tokens/s of the rollout engine on the ORT KV-cache decode graph (PolicyModel.decode
 * behind KvSlotBackend), at batch 1, 8 and 64, for a tiny model and a ~25M-parameter model,
 * with and without tool turns; and the speed-up of KV-cache decoding over recomputing the
 * full sequence for every new token (RecomputeBackend over the same graph).
 *
 * Workloads (random-initialised weights; sampling at temperature 1 with no stop strings, so
 * every turn runs to its token budget and the token counts are the same for every backend):
 *  - no tools: one model turn of 32 tokens after a 24-token prompt;
 *  - tools: 3 model turns of 16 tokens; after each of the first two, the environment answers
 *    asynchronously with a 24-token observation (loss mask 0) that is prefilled when the
 *    sequence rejoins the batch.
 * `kv-repack` rows decode with the batch cache unpacked into per-slot caches and repacked at every
 * step (KvSlotBackend keepPacked=false), to measure what keeping it packed saves.
 */
import { availableParallelism } from 'node:os';
import { PolicyModel } from '../../engine/model/runtime';
import { parameterCount, tinyConfig, type ModelConfig } from '../../engine/model/config';
import { rollout } from '../../engine/rollout/engine';
import { policyDecodeBackend, policyRecomputeBackend } from '../../engine/rollout/model-backend';
import type { DecodeBackend, EpisodeEnv, RolloutTask, TokenizerPort } from '../../engine/rollout/ports';
import { Rng } from '../../engine/rollout/rng';

const args = process.argv.slice(2);
const json = args.includes('--json');
const quick = args.includes('--quick');
const threadsArg = args.indexOf('--threads');
const threads = threadsArg >= 0 ? Number(args[threadsArg + 1]) : Math.min(8, availableParallelism());

const MODELS: { name: string; config: ModelConfig }[] = [
  { name: 'tiny', config: tinyConfig({ vocabSize: 512, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 512, padTokenId: 0 }) },
  { name: '25M', config: tinyConfig({ vocabSize: 8192, hiddenSize: 512, layers: 7, heads: 8, kvHeads: 4, intermediateSize: 1408, maxPositionEmbeddings: 512, padTokenId: 0 }) },
];

/** Token ids as text (the benchmark has no tokenizer; decode is only for display). */
const idTokenizer: TokenizerPort = {
  encode: (t) => t.split(' ').filter(Boolean).map(Number),
  decode: (ids) => ids.join(' '),
};

function makeTasks(count: number, vocab: number, withTools: boolean, seed: number): RolloutTask[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `bench-${i}`,
    createEnv(): EpisodeEnv {
      const r = new Rng(seed * 1000 + i);
      const rand = (n: number) => Array.from({ length: n }, () => 1 + Math.floor(r.next() * (vocab - 1)));
      let turns = 0;
      return {
        prompt: async () => ({ ids: rand(24) }),
        step: async () => {
          turns++;
          if (!withTools || turns >= 3) return { done: true };
          await new Promise((res) => setImmediate(res));
          return { done: false, observation: { ids: rand(24), role: 'tool' }, toolCalls: [{ name: 'bench', args: {}, result: '', latencyMs: 0 }] };
        },
        outcome: async () => ({ reward: 0, components: {} }),
      };
    },
  }));
}

interface Row {
  model: string;
  params: number;
  tools: boolean;
  batch: number;
  cache: 'kv' | 'kv-repack' | 'recompute';
  sequences: number;
  generatedTokens: number;
  seconds: number;
  tokensPerSecond: number;
  meanBatch: number;
}

async function measure(model: PolicyModel, name: string, batch: number, tools: boolean, cache: Row['cache'], sequences: number): Promise<Row> {
  const backend: DecodeBackend = cache === 'recompute' ? policyRecomputeBackend(model, { maxBatch: batch }) : policyDecodeBackend(model, { maxBatch: batch, keepPacked: cache === 'kv' });
  const tasks = makeTasks(sequences, model.config.vocabSize, tools, batch);
  const o = {
    tasks, n: 1, seed: 1, sampling: { temperature: 1 }, tokenizer: idTokenizer, maxBatch: batch,
    limits: tools ? { maxNewTokens: 16, maxTurns: 3, maxTotalLength: 512 } : { maxNewTokens: 32, maxTurns: 1, maxTotalLength: 512 },
    stop: { strings: [], tokenIds: [] },
  };
  // Warm-up (session creation, first-shape planning) on a small slice.
  await rollout(backend, { ...o, tasks: tasks.slice(0, Math.min(batch, 2)) });
  const res = await rollout(backend, o);
  return {
    model: name, params: parameterCount(model.config), tools, batch, cache, sequences,
    generatedTokens: res.stats.generatedTokens, seconds: res.stats.wallMs / 1000, tokensPerSecond: res.stats.tokensPerSecond, meanBatch: res.stats.meanBatch,
  };
}

const rows: Row[] = [];
const log = (s: string) => !json && process.stderr.write(s + '\n');
for (const m of MODELS) {
  const model = PolicyModel.init(m.config, 1, { threads });
  log(`${m.name}: ${(parameterCount(m.config) / 1e6).toFixed(1)}M parameters, ${threads} threads`);
  try {
    for (const tools of [false, true])
      for (const batch of [1, 8, 64]) {
        const seqs = quick ? batch : Math.max(batch, batch === 1 ? 4 : batch);
        const r = await measure(model, m.name, batch, tools, 'kv', seqs);
        rows.push(r);
        log(`  kv        tools=${tools ? 'y' : 'n'} batch=${String(batch).padStart(2)}: ${r.tokensPerSecond.toFixed(0).padStart(7)} tok/s  (${r.generatedTokens} tokens in ${r.seconds.toFixed(2)} s, mean batch ${r.meanBatch.toFixed(1)})`);
      }
    for (const batch of [8, 64]) {
      const r = await measure(model, m.name, batch, false, 'kv-repack', batch);
      rows.push(r);
      log(`  kv-repack tools=n batch=${String(batch).padStart(2)}: ${r.tokensPerSecond.toFixed(0).padStart(7)} tok/s  (batch cache unpacked and repacked every step)`);
    }
    for (const batch of [1, 8]) {
      const r = await measure(model, m.name, batch, false, 'recompute', batch);
      rows.push(r);
      log(`  recompute tools=n batch=${String(batch).padStart(2)}: ${r.tokensPerSecond.toFixed(0).padStart(7)} tok/s  (${r.generatedTokens} tokens in ${r.seconds.toFixed(2)} s)`);
    }
  } finally {
    await model.dispose();
  }
}

const speedups = MODELS.flatMap((m) =>
  [1, 8].map((batch) => {
    const kv = rows.find((r) => r.model === m.name && r.cache === 'kv' && !r.tools && r.batch === batch)!;
    const re = rows.find((r) => r.model === m.name && r.cache === 'recompute' && r.batch === batch)!;
    return { model: m.name, batch, kvTokensPerSecond: kv.tokensPerSecond, recomputeTokensPerSecond: re.tokensPerSecond, speedup: kv.tokensPerSecond / re.tokensPerSecond };
  }),
);

if (json) console.log(JSON.stringify({ threads, rows, kvSpeedup: speedups }));
else {
  console.log('\nmodel  params  tools  batch  cache       tok/s');
  for (const r of rows)
    console.log(`${r.model.padEnd(6)} ${(r.params / 1e6).toFixed(1).padStart(5)}M  ${(r.tools ? 'yes' : 'no').padEnd(5)}  ${String(r.batch).padStart(5)}  ${r.cache.padEnd(10)} ${r.tokensPerSecond.toFixed(0).padStart(6)}`);
  console.log('\nKV cache vs full recompute (32 new tokens after a 24-token prompt):');
  for (const s of speedups) console.log(`  ${s.model} batch ${s.batch}: ${s.speedup.toFixed(2)}× (${s.kvTokensPerSecond.toFixed(0)} vs ${s.recomputeTokensPerSecond.toFixed(0)} tok/s)`);
}
