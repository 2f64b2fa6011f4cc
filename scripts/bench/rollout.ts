/**
 * `npm run bench:rollout -- [--json] [--quick] [--threads N] [--reps N] [--no-torch] [--peer-only] [--models tiny,25M] [--baseline one|host|step1|inputs] [--shards N|auto] [--decode-steps N] [--short-turns] [--sweep-steps 1,4,8,16]`
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
 * `endpoint` rows: the no-tools workload as 8 or 64 concurrent HTTP requests to the OpenAI-compatible
 * endpoint (engine/openai, `arbor serve-model`), next to the in-process engine's row at that batch.
 * `kv-repack` rows decode with the batch cache unpacked into per-slot caches and repacked at every
 * step (KvSlotBackend keepPacked=false), to measure what keeping it packed saves.
 *
 * PyTorch peer (scripts/bench/rollout_torch.py, /usr/bin/python3; skipped with a note when torch
 * is missing): the same weights (written once as an HF folder) decoded with plain Llama-form
 * KV-cache decoding (torch.cat cache, multinomial sampling, logprob and entropy recorded) on the
 * no-tools workload, at each thread setting bench:train uses (its threads, OPENBLAS_CORETYPE=
 * SkylakeX where the CPU has AVX-512, torch 1 + BLAS N threads, OMP_WAIT_POLICY=PASSIVE: ./torch-peer.ts); the best setting is the ratio's
 * denominator. Arbor and every peer setting alternate, `--reps` times (default 3), so they share
 * the machine's background load; each takes its best repetition.
 *
 * `--shards N|auto`: the measured path decodes in N sessions side by side (`auto`: decodeShards'
 * count for the model and batch, engine/rollout/model-backend.ts) instead of the engine's default
 * of one session using every thread.
 *
 * Baseline path, measured alternately with the default one (`--baseline`): `one` (the default
 * with `--shards`) = one decode session using every thread, the engine's default path, so only
 * worth measuring beside `--shards`; `host` = the KV cache on the engine's thread;
 * `step1` (the default without `--shards`) = the default path with one decode step per worker
 * message (RolloutOptions.decodeSteps 1; the default runs up to DECODE_STEPS, or
 * `--decode-steps N`, per message); `inputs` = the
 * linear weights as session inputs on every call (PolicyModel bakeDecodeWeights false) instead of
 * baked into the session for ORT to pre-pack. `--short-turns`
 * adds a demo-like workload (three tool turns that stop tokens, every fifth id, end after ~5
 * tokens) measured with several steps per call and with one, alternating. `--sweep-steps 1,4,8,16`
 * compares caps of steps per call on the no-tools workload with 4 batches' worth of sequences per
 * run (longer runs than the peer table's, medians of `--reps` alternating runs).
 * With several sessions, the breakdown's worker-side figures are summed over the sessions.
 *
 * Breakdown: for Arbor's best repetition, milliseconds per decode call split into the engine's
 * sampling/bookkeeping, waits on tools, packing inputs and the KV cache (KvSlotBackend), building
 * feeds, posting the feeds to the ORT worker (structured clone of every non-shared input), the
 * message's transit, ORT's run (kernels plus copying outputs into JS buffers), and the result's
 * way back.
 */
import { availableParallelism, tmpdir } from 'node:os';
import { mkdtempSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PolicyModel } from '../../engine/model/runtime';
import { parameterCount } from '../../engine/model/config';
import { DECODE_MODELS } from './shapes';
import { rollout } from '../../engine/rollout/engine';
import { decodeShards, policyDecodeBackend, policyRecomputeBackend } from '../../engine/rollout/model-backend';
import type { DecodeBackend, EpisodeEnv, RolloutTask, TokenizerPort } from '../../engine/rollout/ports';
import { Rng } from '../../engine/base/rng';
import { RequestSource } from '../../engine/openai/requests';
import { ModelServer } from '../../engine/openai/server';
import { measureToolCalls, printToolCallRows } from './tool-calls';
import { servePeer, torchEnv, torchLabel, torchMissing, torchSettings, type TorchSetting } from './torch-peer';

const args = process.argv.slice(2);
const json = args.includes('--json');
const quick = args.includes('--quick');
const threadsArg = args.indexOf('--threads');
const threads = threadsArg >= 0 ? Number(args[threadsArg + 1]) : Math.min(8, availableParallelism());
const repsArg = args.indexOf('--reps');
const REPS = repsArg >= 0 ? Number(args[repsArg + 1]) : quick ? 1 : 3;
if (!Number.isInteger(REPS) || REPS < 1) throw new Error(`--reps must be an integer ≥ 1 (got ${args[repsArg + 1]})`);
if (!Number.isInteger(threads) || threads < 1) throw new Error(`--threads must be an integer ≥ 1 (got ${args[threadsArg + 1]})`);
const noTorch = args.includes('--no-torch');
/** Also measure short stop-ended tool turns (demo-like), several steps per call vs one, at batch 8 and 64. */
const shortTurnsArg = args.includes('--short-turns');
const sweepArg = args.indexOf('--sweep-steps');
/** Caps of decode steps per call to compare on the no-tools workload, 4 batches' worth of sequences per run, alternating (`--sweep-steps 1,4,8,16`). */
const SWEEP = sweepArg >= 0 ? args[sweepArg + 1]!.split(',').map(Number) : [];
if (SWEEP.some((k) => !Number.isInteger(k) || k < 1)) throw new Error(`--sweep-steps must be integers ≥ 1 (got ${args[sweepArg + 1]})`);
const peerOnly = args.includes('--peer-only');
const baselineArg = args.indexOf('--baseline');
/**
 * The previous decode paths that can be measured next to the current one: 'one' = one decode
 * session using every thread (before data-parallel shards), 'host' = the KV cache on the engine's
 * thread, 'step1' = one decode step per worker message, 'inputs' = the linear weights fed as
 * session inputs on every call instead of baked in (PolicyModel bakeDecodeWeights false).
 */
const BASELINES = {
  one: { label: 'arbor one session', column: 'one-session', cache: 'kv-one' },
  host: { label: 'arbor host cache', column: 'host-cache', cache: 'kv-host' },
  step1: { label: 'arbor one step per call', column: 'one-step', cache: 'kv-step1' },
  inputs: { label: 'arbor weight inputs', column: 'weight-inputs', cache: 'kv' },
} as const;
type Baseline = keyof typeof BASELINES;
const shardsArg = args.indexOf('--shards');
/** Decode sessions of the measured path (`--shards N|auto`; undefined: the engine's default, one). */
const SHARDS_ARG = shardsArg >= 0 ? (args[shardsArg + 1] === 'auto' ? 'auto' : Number(args[shardsArg + 1])) : undefined;
if (SHARDS_ARG !== undefined && SHARDS_ARG !== 'auto' && (!Number.isInteger(SHARDS_ARG) || SHARDS_ARG < 1))
  throw new Error(`--shards must be an integer ≥ 1 or auto (got ${args[shardsArg + 1]})`);
const BASELINE = (baselineArg >= 0 ? args[baselineArg + 1] : SHARDS_ARG !== undefined ? 'one' : 'step1') as Baseline;
if (!(BASELINE in BASELINES)) throw new Error(`--baseline must be one of ${Object.keys(BASELINES).join(', ')} (got ${args[baselineArg + 1]})`);
const stepsArg = args.indexOf('--decode-steps');
/** Most decode steps per worker message on the measured path (undefined: the engine's default, DECODE_STEPS). */
const DECODE_STEPS_ARG = stepsArg >= 0 ? Number(args[stepsArg + 1]) : undefined;
if (DECODE_STEPS_ARG !== undefined && (!Number.isInteger(DECODE_STEPS_ARG) || DECODE_STEPS_ARG < 1))
  throw new Error(`--decode-steps must be an integer ≥ 1 (got ${args[stepsArg + 1]})`);
const modelsArg = args.indexOf('--models');
const onlyModels = modelsArg >= 0 ? args[modelsArg + 1]!.split(',') : undefined;
const PROMPT = 24,
  NEW = 32;

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
  cache: 'kv' | 'kv-one' | 'kv-host' | 'kv-step1' | 'kv-repack' | 'recompute' | 'endpoint';
  sequences: number;
  generatedTokens: number;
  seconds: number;
  tokensPerSecond: number;
  meanBatch: number;
  modelCalls: number;
  modelSteps: number;
  discardedTokens: number;
  /** ms per decode call (see the header). */
  breakdown?: Breakdown;
}

interface Breakdown {
  calls: number;
  /** Mean decode steps per call (several per worker message: engine.ts DECODE_STEPS). */
  steps: number;
  wall: number;
  sampling: number;
  envWait: number;
  kvPack: number;
  kvUnpack: number;
  logitsRows: number;
  buildFeeds: number;
  post: number;
  toWorker: number;
  wrapFeeds: number;
  ortRun: number;
  outputs: number;
  back: number;
  other: number;
}

async function measure(
  model: PolicyModel,
  name: string,
  batch: number,
  tools: boolean,
  cache: Row['cache'],
  sequences: number,
  /** Stop tokens (every fifth id) end most turns after a few tokens, as the demo's tool turns do. */
  shortTurns = false,
  /** Most decode steps per call (overrides the cache kind's). */
  decodeSteps?: number,
): Promise<Row> {
  const backend: DecodeBackend =
    cache === 'recompute'
      ? policyRecomputeBackend(model, { maxBatch: batch })
      : policyDecodeBackend(model, {
          maxBatch: batch,
          keepPacked: cache !== 'kv-repack',
          cache: cache === 'kv' || cache === 'kv-one' || cache === 'kv-step1' ? 'worker' : 'host',
          ...(cache === 'kv-one' ? { shards: 1 } : {}),
          ...((cache === 'kv' || cache === 'kv-step1') && SHARDS_ARG !== undefined
            ? { shards: SHARDS_ARG === 'auto' ? decodeShards(model, batch) : SHARDS_ARG }
            : {}),
        });
  const tasks = makeTasks(sequences, model.config.vocabSize, tools, batch);
  const o = {
    tasks,
    n: 1,
    seed: 1,
    sampling: { temperature: 1 },
    tokenizer: idTokenizer,
    maxBatch: batch,
    limits: tools ? { maxNewTokens: 16, maxTurns: 3, maxTotalLength: 512 } : { maxNewTokens: 32, maxTurns: 1, maxTotalLength: 512 },
    stop: { strings: [], tokenIds: shortTurns ? Array.from({ length: Math.floor((model.config.vocabSize - 1) / 5) }, (_, i) => 5 * (i + 1)) : [] },
    ...(cache === 'kv-step1' ? { decodeSteps: 1 } : cache === 'kv' && DECODE_STEPS_ARG !== undefined ? { decodeSteps: DECODE_STEPS_ARG } : {}),
    ...(decodeSteps !== undefined ? { decodeSteps } : {}),
  };
  // Warm-up (session creation, first-shape planning) on a small slice.
  await rollout(backend, { ...o, tasks: tasks.slice(0, Math.min(batch, 2)) });
  await model.decodeStats(true);
  const kv = 'stats' in backend ? (backend as { stats: Record<string, number> }).stats : undefined;
  if (kv) for (const k of Object.keys(kv)) kv[k] = 0;
  const res = await rollout(backend, o);
  const d = await model.decodeStats(true);
  await backend.close?.();
  const st = res.stats;
  const n = Math.max(1, st.modelCalls);
  const breakdown: Breakdown | undefined =
    cache === 'recompute'
      ? undefined
      : (() => {
          const b: Breakdown = {
            calls: st.modelCalls,
            steps: st.modelSteps / n,
            wall: st.wallMs / n,
            sampling: st.sampleMs / n,
            envWait: st.envWaitMs / n,
            kvPack: (kv?.packMs ?? 0) / n,
            kvUnpack: (kv?.unpackMs ?? 0) / n,
            logitsRows: (kv?.rowsMs ?? 0) / n,
            buildFeeds: d.buildMs / n,
            post: d.postMs / n,
            toWorker: d.toWorkerMs / n,
            wrapFeeds: d.feedsMs / n,
            ortRun: d.runMs / n,
            outputs: d.outputsMs / n,
            back: d.backMs / n,
            other: 0,
          };
          b.other =
            b.wall -
            (b.sampling + b.envWait + b.kvPack + b.kvUnpack + b.logitsRows + b.buildFeeds + b.post + b.toWorker + b.wrapFeeds + b.ortRun + b.outputs + b.back);
          return b;
        })();
  return {
    model: name,
    params: parameterCount(model.config),
    tools,
    batch,
    cache,
    sequences,
    generatedTokens: st.generatedTokens,
    seconds: st.wallMs / 1000,
    tokensPerSecond: st.tokensPerSecond,
    meanBatch: st.meanBatch,
    modelCalls: st.modelCalls,
    modelSteps: st.modelSteps,
    discardedTokens: st.discardedTokens,
    breakdown,
  };
}

/**
 * The same no-tools workload as concurrent HTTP requests to the OpenAI-compatible endpoint
 * (engine/openai: `arbor serve-model`, external agents in training): `sequences` POST
 * /v1/completions calls at once (the 24-token prompt as token ids, 32 new tokens, T = 1), decoded
 * by the rollout's scheduler (its RequestSource) on the same worker KV-cache backend. Tokens/s over
 * the wall time of all requests, HTTP and JSON included.
 */
async function measureEndpoint(model: PolicyModel, name: string, batch: number, sequences: number): Promise<Row> {
  const backend = policyDecodeBackend(model, { maxBatch: batch });
  const requests = new RequestSource(backend, idTokenizer.decode);
  const server = new ModelServer({
    modelId: 'bench',
    tokenizer: { ...idTokenizer, renderChat: () => '', tokenId: () => undefined },
    requests,
    stopTokenIds: [],
  });
  const url = await server.listen();
  const prompts = makeTasks(sequences, model.config.vocabSize, false, batch).map((t) => t.createEnv().prompt());
  const call = async (prompt: number[], seed: number) => {
    const r = await fetch(`${url}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'bench', prompt, max_tokens: NEW, temperature: 1, seed }),
    });
    if (!r.ok) throw new Error(`endpoint: ${r.status} ${await r.text()}`);
    return ((await r.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens;
  };
  try {
    const ids = await Promise.all(prompts);
    await call(ids[0]!.ids, 0); // warm-up
    const before = { ...requests.stats };
    const t0 = performance.now();
    const tokens = (await Promise.all(ids.map((p, i) => call(p.ids, i + 1)))).reduce((a, b) => a + b, 0);
    const seconds = (performance.now() - t0) / 1000;
    const calls = requests.stats.calls - before.calls;
    return {
      model: name,
      params: parameterCount(model.config),
      tools: false,
      batch,
      cache: 'endpoint',
      sequences,
      generatedTokens: tokens,
      seconds,
      tokensPerSecond: tokens / seconds,
      meanBatch: (requests.stats.rowSum - before.rowSum) / Math.max(1, calls),
      modelCalls: calls,
      modelSteps: calls,
      discardedTokens: 0,
    };
  } finally {
    await server.close();
    await requests.close();
    await backend.close?.();
  }
}

const TORCH_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'rollout_torch.py');

interface TorchPeer {
  label: string;
  version: string;
  gen(batch: number): Promise<number>;
  close(): Promise<void>;
}

/** One rollout_torch.py process in --serve mode: each gen(B) generates NEW tokens for B rows after a PROMPT-token prompt; returns tok/s. */
async function torchPeer(folder: string, t: TorchSetting, params: number): Promise<TorchPeer> {
  const p = await servePeer(
    TORCH_SCRIPT,
    [folder, '--serve', '--threads', String(t.torchThreads), '--prompt', String(PROMPT), '--new', String(NEW)],
    torchEnv(t, threads),
  );
  const info = p.ready as { torch: string; params: number };
  if (info.params !== params) throw new Error(`rollout_torch.py built ${info.params} parameters, Arbor's config has ${params}`);
  return {
    label: torchLabel(t, threads),
    version: info.torch,
    async gen(batch) {
      const r = (await p.request(String(batch))) as { seconds: number; tokens: number };
      return r.tokens / r.seconds;
    },
    close: () => p.close(),
  };
}

interface PeerRow {
  model: string;
  batch: number;
  arborTokensPerSecond: number;
  /** The previous decode path (--baseline: 'one' = one decode session with every thread; 'host' = KV cache on the engine's thread, JS sampling; 'step1' = one decode step per worker message). */
  baseline: Baseline;
  baselineTokensPerSecond?: number;
  torchTokensPerSecond?: number;
  torchSetting?: string;
  /** Arbor / best PyTorch setting (tok/s ratio; > 1 = Arbor faster). */
  ratio?: number;
  /** Every repetition's tok/s, per implementation. */
  reps: Record<string, number[]>;
  breakdown?: Breakdown;
  baselineBreakdown?: Breakdown;
}

const rows: Row[] = [];
const peerRows: PeerRow[] = [];
interface ShortTurnRow {
  model: string;
  batch: number;
  tokensPerSecond: number;
  oneStepTokensPerSecond: number;
  ratio: number;
  stepsPerCall: number;
  /** Discarded tokens / generated tokens (steps run after a turn's end). */
  discardedFraction: number;
  reps: { multi: number[]; oneStep: number[] };
}
const shortRows: ShortTurnRow[] = [];
interface SweepRow {
  model: string;
  batch: number;
  steps: number;
  medianTokensPerSecond: number;
  bestTokensPerSecond: number;
  /** Median tok/s / the first cap's median (same run). */
  ratio: number;
  reps: number[];
}
const sweepRows: SweepRow[] = [];
// Progress goes to stderr in both modes (stdout holds the table or the JSON).
const log = (s: string) => process.stderr.write(s + '\n');
const torchNote = noTorch ? 'skipped (--no-torch)' : torchMissing();
let torchVersion: string | undefined;
for (const m of DECODE_MODELS) {
  if (onlyModels && !onlyModels.includes(m.name)) continue;
  const model = PolicyModel.init(m.config, 1, { threads });
  /** The same weights with the decode session taking them as inputs (`--baseline inputs`). */
  const inputsModel = BASELINE === 'inputs' ? PolicyModel.init(m.config, 1, { threads, bakeDecodeWeights: false }) : undefined;
  log(`${m.name}: ${(parameterCount(m.config) / 1e6).toFixed(1)}M parameters, ${threads} threads`);
  const folder = mkdtempSync(join(tmpdir(), 'arbor-bench-rollout-'));
  const peers: TorchPeer[] = [];
  try {
    if (!torchNote) {
      model.save(folder);
      for (const t of torchSettings(threads)) peers.push(await torchPeer(folder, t, parameterCount(m.config)));
      torchVersion = peers[0]?.version;
      for (const p of peers) await p.gen(2); // warm-up
    }
    for (const batch of [1, 8, 64]) {
      const seqs = batch === 1 ? 4 : batch;
      const baseName = BASELINES[BASELINE].label;
      const reps: Record<string, number[]> = { arbor: [], [baseName]: [] };
      let best: Row | undefined;
      let bestHost: Row | undefined;
      for (let r = 0; r < REPS; r++) {
        const a = await measure(model, m.name, batch, false, 'kv', seqs);
        reps.arbor!.push(a.tokensPerSecond);
        if (!best || a.tokensPerSecond > best.tokensPerSecond) best = a;
        const h = await measure(BASELINE === 'inputs' ? inputsModel! : model, m.name, batch, false, BASELINES[BASELINE].cache, seqs);
        reps[baseName]!.push(h.tokensPerSecond);
        if (!bestHost || h.tokensPerSecond > bestHost.tokensPerSecond) bestHost = h;
        for (const p of peers) (reps[p.label] ??= []).push(await p.gen(batch));
      }
      rows.push(best!, bestHost!);
      const torchBest = peers.map((p) => ({ label: p.label, tps: Math.max(...reps[p.label]!) })).sort((a, b) => b.tps - a.tps)[0];
      const pr: PeerRow = {
        model: m.name,
        batch,
        arborTokensPerSecond: best!.tokensPerSecond,
        reps,
        breakdown: best!.breakdown,
        baseline: BASELINE,
        baselineTokensPerSecond: bestHost!.tokensPerSecond,
        baselineBreakdown: bestHost!.breakdown,
        ...(torchBest ? { torchTokensPerSecond: torchBest.tps, torchSetting: torchBest.label, ratio: best!.tokensPerSecond / torchBest.tps } : {}),
      };
      peerRows.push(pr);
      log(
        `  batch ${String(batch).padStart(2)}: arbor ${best!.tokensPerSecond.toFixed(0).padStart(6)} tok/s (${baseName.slice(6)} ${bestHost!.tokensPerSecond.toFixed(0)})` +
          (torchBest ? `  pytorch ${torchBest.tps.toFixed(0).padStart(6)} tok/s (${torchBest.label})  ratio ${pr.ratio!.toFixed(2)}` : ''),
      );
    }
    if (SWEEP.length)
      for (const batch of [8, 64]) {
        const reps = SWEEP.map(() => [] as number[]);
        for (let r = 0; r < REPS; r++)
          for (const [i, k] of SWEEP.entries()) reps[i]!.push((await measure(model, m.name, batch, false, 'kv', batch * 4, false, k)).tokensPerSecond);
        const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;
        SWEEP.forEach((k, i) =>
          sweepRows.push({
            model: m.name,
            batch,
            steps: k,
            medianTokensPerSecond: median(reps[i]!),
            bestTokensPerSecond: Math.max(...reps[i]!),
            ratio: median(reps[i]!) / median(reps[0]!),
            reps: reps[i]!,
          }),
        );
        log(`  steps sweep batch ${String(batch).padStart(2)}: ` + SWEEP.map((k, i) => `≤${k}: median ${median(reps[i]!).toFixed(0)} tok/s`).join(', '));
      }
    if (shortTurnsArg)
      for (const batch of [8, 64]) {
        const reps = { multi: [] as number[], oneStep: [] as number[] };
        let best: Row | undefined;
        let bestOne: Row | undefined;
        for (let r = 0; r < REPS; r++) {
          const a = await measure(model, m.name, batch, true, 'kv', batch * 2, true);
          reps.multi.push(a.tokensPerSecond);
          if (!best || a.tokensPerSecond > best.tokensPerSecond) best = a;
          const b = await measure(model, m.name, batch, true, 'kv-step1', batch * 2, true);
          reps.oneStep.push(b.tokensPerSecond);
          if (!bestOne || b.tokensPerSecond > bestOne.tokensPerSecond) bestOne = b;
        }
        const sr: ShortTurnRow = {
          model: m.name,
          batch,
          tokensPerSecond: best!.tokensPerSecond,
          oneStepTokensPerSecond: bestOne!.tokensPerSecond,
          ratio: best!.tokensPerSecond / bestOne!.tokensPerSecond,
          stepsPerCall: best!.modelSteps / Math.max(1, best!.modelCalls),
          discardedFraction: best!.discardedTokens / Math.max(1, best!.generatedTokens),
          reps,
        };
        shortRows.push(sr);
        log(
          `  short turns batch ${String(batch).padStart(2)}: several steps ${sr.tokensPerSecond.toFixed(0)} tok/s, one step ${sr.oneStepTokensPerSecond.toFixed(0)} (${sr.ratio.toFixed(2)}×; ${sr.stepsPerCall.toFixed(2)} steps per call, ${(100 * sr.discardedFraction).toFixed(1)}% discarded)`,
        );
      }
    if (!peerOnly) {
      for (const batch of [1, 8, 64]) {
        const r = await measure(model, m.name, batch, true, 'kv', batch === 1 ? 4 : batch);
        rows.push(r);
        log(
          `  kv        tools=y batch=${String(batch).padStart(2)}: ${r.tokensPerSecond.toFixed(0).padStart(7)} tok/s  (${r.generatedTokens} tokens in ${r.seconds.toFixed(2)} s, mean batch ${r.meanBatch.toFixed(1)})`,
        );
      }
      for (const batch of [8, 64]) {
        const r = await measure(model, m.name, batch, false, 'kv-repack', batch);
        rows.push(r);
        log(
          `  kv-repack tools=n batch=${String(batch).padStart(2)}: ${r.tokensPerSecond.toFixed(0).padStart(7)} tok/s  (batch cache unpacked and repacked every step)`,
        );
      }
      for (const batch of [8, 64]) {
        const r = await measureEndpoint(model, m.name, batch, batch);
        rows.push(r);
        const inProcess = rows.find((x) => x.model === m.name && x.cache === 'kv' && !x.tools && x.batch === batch);
        log(
          `  endpoint  tools=n batch=${String(batch).padStart(2)}: ${r.tokensPerSecond.toFixed(0).padStart(7)} tok/s  (${batch} concurrent /v1/completions requests, mean batch ${r.meanBatch.toFixed(1)}${inProcess ? `; in-process engine ${inProcess.tokensPerSecond.toFixed(0)} tok/s, endpoint/engine ${(r.tokensPerSecond / inProcess.tokensPerSecond).toFixed(2)}` : ''})`,
        );
      }
      for (const batch of [1, 8]) {
        const r = await measure(model, m.name, batch, false, 'recompute', batch);
        rows.push(r);
        log(
          `  recompute tools=n batch=${String(batch).padStart(2)}: ${r.tokensPerSecond.toFixed(0).padStart(7)} tok/s  (${r.generatedTokens} tokens in ${r.seconds.toFixed(2)} s)`,
        );
      }
    }
  } finally {
    for (const p of peers) await p.close();
    rmSync(folder, { recursive: true, force: true });
    await model.dispose();
    await inputsModel?.dispose();
  }
}

const speedups = peerOnly
  ? []
  : DECODE_MODELS.filter((m) => !onlyModels || onlyModels.includes(m.name)).flatMap((m) =>
      [1, 8].map((batch) => {
        const kv = rows.find((r) => r.model === m.name && r.cache === 'kv' && !r.tools && r.batch === batch)!;
        const re = rows.find((r) => r.model === m.name && r.cache === 'recompute' && r.batch === batch)!;
        return {
          model: m.name,
          batch,
          kvTokensPerSecond: kv.tokensPerSecond,
          recomputeTokensPerSecond: re.tokensPerSecond,
          speedup: kv.tokensPerSecond / re.tokensPerSecond,
        };
      }),
    );

// Per-call cost of a user tool's isolation (in-process, worker+vm before #25, sandbox process now).
const toolCallRows = await measureToolCalls({ calls: quick ? 300 : 1000, reps: REPS });

const f = (x: number) => x.toFixed(2).padStart(6);
if (json)
  console.log(
    JSON.stringify({
      threads,
      reps: REPS,
      torch: torchNote ?? `pytorch ${torchVersion}`,
      peer: peerRows,
      rows,
      kvSpeedup: speedups,
      ...(shortTurnsArg ? { shortTurns: shortRows } : {}),
      ...(SWEEP.length ? { stepsSweep: sweepRows } : {}),
      toolCalls: toolCallRows,
    }),
  );
else {
  console.log(
    `\nArbor vs PyTorch KV-cache decoding (${PROMPT}-token prompt, ${NEW} new tokens, T=1, no stops; ${threads} threads; best of ${REPS} alternating repetitions)`,
  );
  if (torchNote) console.log(`PyTorch peer: ${torchNote}`);
  const bl = BASELINES[BASELINE].column;
  console.log(`model  batch  arbor tok/s  ${bl.padStart(11)} tok/s  pytorch tok/s  arbor/pytorch  ${bl.padStart(11)}/pytorch  arbor/${bl}  pytorch setting`);
  for (const r of peerRows)
    console.log(
      `${r.model.padEnd(6)} ${String(r.batch).padStart(5)}  ${r.arborTokensPerSecond.toFixed(0).padStart(11)}  ${(r.baselineTokensPerSecond?.toFixed(0) ?? '-').padStart(17)}  ${(r.torchTokensPerSecond?.toFixed(0) ?? '-').padStart(13)}  ${(r.ratio?.toFixed(2) ?? '-').padStart(13)}  ${(r.torchTokensPerSecond && r.baselineTokensPerSecond ? (r.baselineTokensPerSecond / r.torchTokensPerSecond).toFixed(2) : '-').padStart(19)}  ${(r.baselineTokensPerSecond ? (r.arborTokensPerSecond / r.baselineTokensPerSecond).toFixed(2) : '-').padStart(bl.length + 6)}  ${r.torchSetting ?? ''}`,
    );
  console.log(
    '\nArbor decode, ms per decode call (best repetition): wall = sampling + tool waits + kv pack + kv unpack + logits rows + build feeds + post (clone) + to worker + wrap feeds + ORT run + outputs + back + other',
  );
  console.log('(worker cache: kv pack/unpack happen in the worker and are inside "wrap"; "outs" = worker bookkeeping after the run)');
  console.log('path    model  batch  calls  steps    wall  sample  envwait kvpack kvunpk  rows  build   post  toWkr   wrap ortRun   outs   back  other');
  for (const [path, key] of [
    [BASELINE, 'baselineBreakdown'],
    ['worker', 'breakdown'],
  ] as const)
    for (const r of peerRows) {
      const b = r[key];
      if (!b) continue;
      console.log(
        `${path.padEnd(7)} ${r.model.padEnd(6)} ${String(r.batch).padStart(5)} ${String(b.calls).padStart(6)} ${f(b.steps)} ${f(b.wall)} ${f(b.sampling)} ${f(b.envWait)} ${f(b.kvPack)} ${f(b.kvUnpack)} ${f(b.logitsRows)} ${f(b.buildFeeds)} ${f(b.post)} ${f(b.toWorker)} ${f(b.wrapFeeds)} ${f(b.ortRun)} ${f(b.outputs)} ${f(b.back)} ${f(b.other)}`,
      );
    }
  if (sweepRows.length) {
    console.log(`\nDecode steps per call (cap), no-tools workload with 4 batches of sequences per run, median of ${REPS} alternating runs`);
    console.log('model  batch  cap  median tok/s  best tok/s  median / first cap');
    for (const r of sweepRows)
      console.log(
        `${r.model.padEnd(6)} ${String(r.batch).padStart(5)} ${String(r.steps).padStart(4)}  ${r.medianTokensPerSecond.toFixed(0).padStart(12)}  ${r.bestTokensPerSecond.toFixed(0).padStart(10)}  ${r.ratio.toFixed(2).padStart(18)}`,
      );
  }
  if (shortRows.length) {
    console.log(
      '\nShort stop-ended tool turns (3 turns ≤ 16 tokens, every fifth id a stop token, 24-token observations): several decode steps per call vs one',
    );
    console.log('model  batch  several tok/s  one-step tok/s  ratio  steps/call  discarded');
    for (const r of shortRows)
      console.log(
        `${r.model.padEnd(6)} ${String(r.batch).padStart(5)}  ${r.tokensPerSecond.toFixed(0).padStart(13)}  ${r.oneStepTokensPerSecond.toFixed(0).padStart(14)}  ${r.ratio.toFixed(2).padStart(5)}  ${r.stepsPerCall.toFixed(2).padStart(10)}  ${(100 * r.discardedFraction).toFixed(1).padStart(8)}%`,
      );
  }
  console.log('\nmodel  params  tools  batch  cache       tok/s');
  for (const r of rows)
    console.log(
      `${r.model.padEnd(6)} ${(r.params / 1e6).toFixed(1).padStart(5)}M  ${(r.tools ? 'yes' : 'no').padEnd(5)}  ${String(r.batch).padStart(5)}  ${r.cache.padEnd(10)} ${r.tokensPerSecond.toFixed(0).padStart(6)}`,
    );
  printToolCallRows(toolCallRows);
  if (speedups.length) console.log('\nKV cache vs full recompute (32 new tokens after a 24-token prompt):');
  for (const s of speedups)
    console.log(
      `  ${s.model} batch ${s.batch}: ${s.speedup.toFixed(2)}× (${s.kvTokensPerSecond.toFixed(0)} vs ${s.recomputeTokensPerSecond.toFixed(0)} tok/s)`,
    );
}
