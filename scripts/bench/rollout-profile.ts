/**
 * `npm run bench:rollout-profile -- [--models tiny,25M] [--batches 8,64] [--threads 2] [--shards N|auto] [--json] [--dir DIR]`
 *
 * Where a decode step's time goes inside ONNX Runtime: runs bench:rollout's no-tools workload
 * (24-token prompt, 32 new tokens, temperature 1, no stops) once per model and batch through the
 * worker KV cache (WorkerKvBackend) with ORT's profiler on, and splits the steady-state decode
 * runs (one new token per row) by op type and by node, next to the wall time of the run as the
 * worker saw it (session.run plus its JS) and the engine's wall time per decode call.
 * Profiling slows every run; the split is what matters, not the absolute figures.
 */
import { availableParallelism, tmpdir } from 'node:os';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { PolicyModel } from '../../engine/model/runtime';
import { tinyConfig, type ModelConfig } from '../../engine/model/config';
import { rollout } from '../../engine/rollout/engine';
import { decodeShards, policyDecodeBackend } from '../../engine/rollout/model-backend';
import type { EpisodeEnv, RolloutTask, TokenizerPort } from '../../engine/rollout/ports';
import { Rng } from '../../engine/base/rng';

const args = process.argv.slice(2);
const opt = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const json = args.includes('--json');
const threads = Number(opt('--threads') ?? Math.min(8, availableParallelism()));
const models = (opt('--models') ?? 'tiny,25M').split(',');
const batches = (opt('--batches') ?? '8,64').split(',').map(Number);
const keepDir = opt('--dir');
/** Decode sessions (default: policyDecodeBackend's, one; `auto`: decodeShards'); the profile read is the first session's. */
const shardsOpt = opt('--shards');

const CONFIGS: Record<string, ModelConfig> = {
  tiny: tinyConfig({ vocabSize: 512, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 512, padTokenId: 0 }),
  '25M': tinyConfig({ vocabSize: 8192, hiddenSize: 512, layers: 7, heads: 8, kvHeads: 4, intermediateSize: 1408, maxPositionEmbeddings: 512, padTokenId: 0 }),
};

const idTokenizer: TokenizerPort = { encode: (t) => t.split(' ').filter(Boolean).map(Number), decode: (ids) => ids.join(' ') };

function tasks(count: number, vocab: number): RolloutTask[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `p-${i}`,
    createEnv(): EpisodeEnv {
      const r = new Rng(1000 + i);
      return {
        prompt: async () => ({ ids: Array.from({ length: 24 }, () => 1 + Math.floor(r.next() * (vocab - 1))) }),
        step: async () => ({ done: true }),
        outcome: async () => ({ reward: 0, components: {} }),
      };
    },
  }));
}

type Ev = { cat: string; name: string; ts: number; dur: number; args?: { op_name?: string; input_type_shape?: Record<string, number[]>[] } };

function readProfile(file: string, batch: number) {
  const ev = JSON.parse(readFileSync(file, 'utf8')) as Ev[];
  // Steady decode runs: input_ids [B, 1]. Tell them apart by the first Gather's input shape.
  const runs = ev.filter((e) => e.name === 'model_run').sort((a, b) => a.ts - b.ts);
  const nodes = ev.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'));
  const runOf = (e: Ev) => runs.findIndex((r) => e.ts >= r.ts && e.ts <= r.ts + r.dur);
  const perRun = new Map<number, Ev[]>();
  for (const n of nodes) {
    const r = runOf(n);
    if (r < 0) continue;
    (perRun.get(r) ?? perRun.set(r, []).get(r)!).push(n);
  }
  const steady: number[] = [];
  perRun.forEach((ns, r) => {
    const g = ns.find((n) => n.args?.op_name === 'Gather' && (n.args.input_type_shape ?? []).some((x) => Object.values(x)[0]?.length === 2));
    const shapes = g?.args?.input_type_shape ?? [];
    const ids = shapes.map((x) => Object.values(x)[0]).find((s) => s && s.length === 2 && s[0] === batch && s[1] === 1);
    if (ids) steady.push(r);
  });
  const use = steady.slice(2); // skip the first steady runs (planning)
  const k = use.length * 1000;
  const ops = new Map<string, { us: number; nodes: Set<string> }>();
  const byNode = new Map<string, { op: string; us: number; shapes: string }>();
  let kernel = 0;
  for (const r of use)
    for (const e of perRun.get(r)!) {
      const op = e.args?.op_name ?? '?';
      const node = e.name.slice(0, -'_kernel_time'.length);
      kernel += e.dur;
      const o = ops.get(op) ?? { us: 0, nodes: new Set<string>() };
      o.us += e.dur;
      o.nodes.add(node);
      ops.set(op, o);
      const nn = byNode.get(node) ?? { op, us: 0, shapes: (e.args?.input_type_shape ?? []).map((x) => `[${Object.values(x)[0]?.join(',')}]`).join(' ') };
      nn.us += e.dur;
      byNode.set(node, nn);
    }
  const nodeCount = new Set(perRun.get(use[0] ?? 0)?.map((e) => e.name)).size;
  return {
    steadyRuns: use.length,
    runMs: use.reduce((a, r) => a + runs[r]!.dur, 0) / k,
    kernelMs: kernel / k,
    nodesPerRun: nodeCount,
    ops: [...ops].map(([op, o]) => ({ op, ms: o.us / k, share: o.us / kernel, nodes: o.nodes.size })).sort((a, b) => b.ms - a.ms),
    nodes: [...byNode]
      .map(([node, n]) => ({ node, op: n.op, ms: n.us / k, shapes: n.shapes }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 15),
  };
}

const out: unknown[] = [];
for (const name of models) {
  const config = CONFIGS[name];
  if (!config) throw new Error(`--models: unknown model '${name}' (tiny, 25M)`);
  for (const batch of batches) {
    const dir = keepDir ?? mkdtempSync(join(tmpdir(), 'arbor-rollout-profile-'));
    const prefix = join(dir, `${name}-b${batch}`);
    const model = PolicyModel.init(config, 1, { threads, profilePrefix: prefix });
    const shards = shardsOpt === undefined ? 1 : shardsOpt === 'auto' ? decodeShards(model, batch) : Number(shardsOpt);
    const backend = policyDecodeBackend(model, { maxBatch: batch, shards });
    const o = {
      tasks: tasks(batch, config.vocabSize),
      n: 1,
      seed: 1,
      sampling: { temperature: 1 },
      tokenizer: idTokenizer,
      maxBatch: batch,
      limits: { maxNewTokens: 32, maxTurns: 1, maxTotalLength: 512 },
      stop: { strings: [], tokenIds: [] },
    };
    await rollout(backend, { ...o, tasks: o.tasks.slice(0, 2) }); // warm-up (session creation)
    const res = await rollout(backend, o);
    await model.endProfiling();
    await backend.close?.();
    await model.dispose();
    const file = readdirSync(dir)
      .filter((f) => f.startsWith(`${name}-b${batch}-decode`) && f.endsWith('.json'))
      .sort()[0];
    if (!file) throw new Error(`no decode profile with prefix ${prefix}`);
    const p = readProfile(join(dir, file), Math.ceil(batch / shards));
    const wallPerCall = res.stats.wallMs / Math.max(1, res.stats.modelCalls);
    out.push({ model: name, batch, threads, sessions: shards, wallPerCallMs: wallPerCall, ...p });
    if (!json) {
      console.log(
        `\n${name} batch ${batch} (${threads} threads, ${shards} decode session${shards > 1 ? 's, first one profiled' : ''}): engine wall ${wallPerCall.toFixed(2)} ms/call; steady decode run ${p.runMs.toFixed(2)} ms, kernels ${p.kernelMs.toFixed(2)} ms (${p.nodesPerRun} nodes, ${p.steadyRuns} runs)`,
      );
      for (const r of p.ops.slice(0, 14))
        console.log(`  ${r.op.padEnd(28)} ${r.ms.toFixed(3).padStart(8)} ms  ${(100 * r.share).toFixed(1).padStart(5)}%  ${String(r.nodes).padStart(4)} nodes`);
      console.log('  top nodes:');
      for (const n of p.nodes.slice(0, 10))
        console.log(`    ${n.node.slice(0, 50).padEnd(50)} ${n.op.padEnd(16)} ${n.ms.toFixed(3).padStart(8)} ms  ${n.shapes}`);
    }
    if (!keepDir) rmSync(dir, { recursive: true, force: true });
  }
}
if (json) console.log(JSON.stringify(out));
