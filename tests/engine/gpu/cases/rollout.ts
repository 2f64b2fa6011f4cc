/**
 * Child side of rollout.test.ts: golden-style rollouts (tool turns, in-graph sampling, top-k/top-p
 * through device logits, several steps per call), an ARPO-style fork, on the CPU and on WebGPU
 * with the KV cache on the device; prints both and the bytes that crossed.
 */
import { PolicyModel } from '../../../../engine/model/runtime';
import { tinyConfig } from '../../../../engine/model/config';
import { rollout, type RolloutOptions } from '../../../../engine/rollout/engine';
import { policyDecodeBackend } from '../../../../engine/rollout/model-backend';
import type { WorkerKvBackend } from '../../../../engine/rollout/worker-kv';
import { idTasks, idTok } from '../../rollout/helpers';

// As golden.test.ts's "ids" cases: random prompts, and a tool observation after each of the first two turns.
const V = 300;
const cfg = tinyConfig({ vocabSize: V, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 256, padTokenId: 0 });
const opts = (sampling: RolloutOptions['sampling'], decodeSteps?: number): RolloutOptions => ({
  tasks: idTasks(3, 4, V),
  n: 2,
  seed: 21,
  sampling,
  tokenizer: idTok,
  maxBatch: 8,
  limits: { maxNewTokens: 9, maxTurns: 3, maxTotalLength: 80 },
  stop: { strings: [], tokenIds: [] },
  ...(decodeSteps ? { decodeSteps } : {}),
});
const cases: [string, RolloutOptions][] = [
  ['T=1.3', opts({ temperature: 1.3 })],
  ['greedy, 1 step per call', opts({ temperature: 0 }, 1)],
  ['T=0.7 top-k 6 top-p 0.9', opts({ temperature: 0.7, topK: 6, topP: 0.9 })],
];

async function run(providers: string[]) {
  const m = PolicyModel.init(cfg, 11, { threads: 1, providers });
  const out: Record<string, unknown> = {};
  for (const [name, o] of cases) {
    const backend = policyDecodeBackend(m, { maxBatch: 8 });
    const res = await rollout(backend, o);
    const crossing = (backend as WorkerKvBackend).crossing;
    await backend.close?.();
    out[name] = {
      tokens: res.trajectories.map((t) => t.turns.flatMap((u) => u.tokenIds)),
      logprobs: res.trajectories.map((t) => t.turns.flatMap((u) => u.logprobs)),
      entropy: res.trajectories.map((t) => t.turns.flatMap((u) => u.entropy)),
      observations: res.trajectories.map((t) => t.turns.filter((u) => u.role !== 'model').length),
      crossing,
    };
  }
  // A branching fork on the device cache: decode a prompt, fork it twice (one shorter), continue all three.
  const backend = policyDecodeBackend(m, { maxBatch: 4 }) as WorkerKvBackend;
  const greedy = (B: number) => ({ u: new Float32Array(B), invTemp: new Float32Array(B).fill(1), greedy: new Float32Array(B).fill(1) });
  const first = await backend.extendSample([{ slot: 0, tokens: [8, 140, 15, 99, 2] }], greedy(1));
  let ids = [first[0]!.id];
  for (let k = 0; k < 3; k++) ids = [(await backend.extendSample([{ slot: 0, tokens: [ids[ids.length - 1]!] }], greedy(1)))[0]!.id, ...ids];
  backend.fork(0, 1);
  backend.fork(0, 2, 4);
  const after = await backend.extendSampleSteps(
    [
      { slot: 0, tokens: [10] },
      { slot: 1, tokens: [11] },
      { slot: 2, tokens: [12] },
    ],
    { u: new Float32Array(9), invTemp: new Float32Array(3).fill(1), greedy: new Float32Array(3).fill(1) },
    3,
  );
  out.fork = { before: ids, after: after.map((r) => r.map((x) => x.id)), logprobs: after.map((r) => r.map((x) => x.logprob)), crossing: backend.crossing };
  await backend.close();
  await m.dispose();
  return out;
}

const cpu = await run(['cpu']);
const gpu = await run(['webgpu', 'cpu']);
console.log(JSON.stringify({ cpu, gpu }));
