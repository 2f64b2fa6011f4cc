/**
 * Rollout results are pinned: the sampled tokens, logprobs and entropies for fixed seeds on two
 * tiny transformers (with tool turns; plain sampling, top-k/top-p, greedy; batch 9 and batch 2)
 * were recorded from the engine before the decode path was optimised (fixtures/golden-rollouts.json,
 * rewritten with ARBOR_RECORD_GOLDEN=1). Any change to the decode path must reproduce them:
 * the same tokens, logprobs and entropy within float tolerance.
 *
 * The fixture was recorded on one CPU; other CPUs (AVX-512 or AVX2 kernels) and the numerics
 * variants (ARBOR_ORT_THREADS, ARBOR_ORT_GRAPH_OPT: other accumulation orders) must pass it too.
 * The tolerance comes from float32 rounding, not from one machine: a sum of n terms reordered moves
 * by at most n·u·Σ|terms| (u = 2⁻²⁴ ≈ 6e-8); the widest sum here is a softmax over 300 logits of
 * magnitude ≲ 10, so ≤ 300 · 6e-8 · 10 ≈ 2e-4 (seen across the variants: ≤ 6e-7). A sampled token
 * changes only if its draw falls within that error of a cumulative-probability boundary.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PolicyModel } from '../../../engine/model/runtime';
import { tinyConfig } from '../../../engine/model/config';
import { rollout, type RolloutOptions } from '../../../engine/rollout/engine';
import { policyDecodeBackend } from '../../../engine/rollout/model-backend';
import type { ShardedKvBackend } from '../../../engine/rollout/worker-kv';
import type { Trajectory } from '../../../engine/rollout/types';
import { EOS, VOCAB, WordTokenizer, idTasks, idTok, searchTasks } from './helpers';

const FIXTURE = join(__dirname, 'fixtures', 'golden-rollouts.json');
const record = process.env.ARBOR_RECORD_GOLDEN === '1';

const wordTok = new WordTokenizer();
const small = PolicyModel.init(
  tinyConfig({ vocabSize: VOCAB.length, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 256, eosTokenId: EOS, padTokenId: 0 }),
  11,
  { threads: 1 },
);
// A vocabulary that is not a multiple of any block size, large enough for top-k/top-p to matter.
const V2 = 300;
const wide = PolicyModel.init(tinyConfig({ vocabSize: V2, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 256, padTokenId: 0 }), 5, {
  threads: 1,
});
// The same weights with the decode session's linear weights baked in (PolicyModel bakeDecodeWeights; on by default from 4M parameters).
const baked = new Map<PolicyModel, PolicyModel>([
  [small, new PolicyModel(small.config, small.weights, { threads: 1, bakeDecodeWeights: true })],
  [wide, new PolicyModel(wide.config, wide.weights, { threads: 1, bakeDecodeWeights: true })],
]);
afterAll(async () => {
  await small.dispose();
  await wide.dispose();
  for (const m of baked.values()) await m.dispose();
});

const cases: { name: string; model: () => PolicyModel; maxBatch: number; opts: () => RolloutOptions }[] = [
  ...[9, 2].flatMap((maxBatch) =>
    [
      { name: `search T=1 batch ${maxBatch}`, sampling: { temperature: 1 } },
      { name: `search T=0.7 top-k 6 top-p 0.9 batch ${maxBatch}`, sampling: { temperature: 0.7, topK: 6, topP: 0.9 } },
      { name: `search greedy batch ${maxBatch}`, sampling: { temperature: 0 } },
    ].map((c) => ({
      name: c.name,
      model: () => small,
      maxBatch,
      opts: (): RolloutOptions => ({
        tasks: searchTasks(wordTok, 2),
        n: 3,
        seed: 9,
        sampling: c.sampling,
        tokenizer: wordTok,
        maxBatch,
        limits: { maxNewTokens: 12, maxTurns: 3, maxTotalLength: 96 },
        stop: { strings: ['</search>', '</answer>'], tokenIds: [EOS] },
      }),
    })),
  ),
  ...[8, 3].flatMap((maxBatch) =>
    [
      { name: `ids T=1.3 batch ${maxBatch}`, sampling: { temperature: 1.3 } },
      { name: `ids T=1 top-p 0.8 batch ${maxBatch}`, sampling: { temperature: 1, topP: 0.8 } },
    ].map((c) => ({
      name: c.name,
      model: () => wide,
      maxBatch,
      opts: (): RolloutOptions => ({
        tasks: idTasks(3, 4, V2, true),
        n: 2,
        seed: 21,
        sampling: c.sampling,
        tokenizer: idTok,
        maxBatch,
        limits: { maxNewTokens: 9, maxTurns: 3, maxTotalLength: 80 },
        stop: { strings: [], tokenIds: [] },
      }),
    })),
  ),
];

type Golden = Record<string, { tokens: number[][]; logprobs: number[][]; entropy: number[][]; truncated: boolean[] }>;

function summarise(ts: Trajectory[]) {
  return {
    tokens: ts.map((t) => t.turns.flatMap((u) => u.tokenIds)),
    logprobs: ts.map((t) => t.turns.flatMap((u) => u.logprobs)),
    entropy: ts.map((t) => t.turns.flatMap((u) => u.entropy)),
    truncated: ts.map((t) => t.truncated),
  };
}

describe('rollouts reproduce the recorded pre-optimisation results', () => {
  const golden: Golden = !record && existsSync(FIXTURE) ? (JSON.parse(readFileSync(FIXTURE, 'utf8')) as Golden) : {};
  const recorded: Golden = {};
  // shards 2: two decode sessions side by side (ShardedKvBackend), slots split between them.
  // steps 1: one decode step per backend call (the default runs up to DECODE_STEPS per call).
  // baked: the decode sessions hold the linear weights as initializers.
  type Run = (typeof cases)[number] & { shards?: number; steps?: number; baked?: boolean };
  const base: Run[] = [...cases, ...(record ? [] : cases.map((x) => ({ ...x, shards: 2 })))];
  const runs: Run[] = record ? base : [...base, ...base.map((x) => ({ ...x, steps: 1 })), ...cases.map((x) => ({ ...x, baked: true }))];
  for (const c of runs)
    it(`${c.name}${c.shards ? `, ${c.shards} decode sessions` : ''}${c.steps ? `, ${c.steps} decode step per call` : ''}${c.baked ? ', baked weights' : ''}`, async () => {
      const m = c.baked ? baked.get(c.model())! : c.model();
      expect(m.bakesDecode).toBe(!!c.baked);
      const backend = policyDecodeBackend(m, { maxBatch: c.maxBatch, shards: c.shards });
      const res = await rollout(backend, { ...c.opts(), ...(c.steps ? { decodeSteps: c.steps } : {}) });
      await backend.close?.();
      const o = c.opts();
      const inGraph = o.sampling.temperature === 0 || (!o.sampling.topK && (o.sampling.topP ?? 1) >= 1);
      // Several steps per call happened exactly where they apply (the backend samples: greedy or the full distribution).
      if (c.steps === 1 || !inGraph) expect(res.stats.modelSteps).toBe(res.stats.modelCalls);
      else expect(res.stats.modelSteps).toBeGreaterThan(res.stats.modelCalls * 1.5);
      const got = summarise(res.trajectories);
      if (record) {
        recorded[c.name] = got;
        writeFileSync(FIXTURE, JSON.stringify({ ...(existsSync(FIXTURE) ? JSON.parse(readFileSync(FIXTURE, 'utf8')) : {}), ...recorded }) + '\n');
        return;
      }
      const want = golden[c.name];
      expect(want, `fixture has no case '${c.name}' (record with ARBOR_RECORD_GOLDEN=1)`).toBeDefined();
      expect(got.tokens).toEqual(want!.tokens);
      expect(got.truncated).toEqual(want!.truncated);
      got.logprobs.flat().forEach((x, i) => expect(Math.abs(x - want!.logprobs.flat()[i]!)).toBeLessThan(2e-4));
      got.entropy.flat().forEach((x, i) => expect(Math.abs(x - want!.entropy.flat()[i]!)).toBeLessThan(2e-4));
      expect(got.tokens.flat().length).toBeGreaterThan(20);
    });
});

describe('several decode steps per call', () => {
  it('turns that end inside a call discard the rest (stream and cache rewound): the same tokens and logprobs as one step per call', async () => {
    const ids = cases[6]!; // ids T=1.3 batch 8
    // Stop tokens (a tenth of the vocabulary) and a stop string end turns early, and the episode goes on after each (observations, next turn).
    const stops = {
      ...ids,
      name: 'ids T=1.3 batch 8 with stops',
      opts: (): RolloutOptions => ({ ...ids.opts(), stop: { strings: ['99'], tokenIds: Array.from({ length: 30 }, (_, i) => 10 * i + 3) } }),
    };
    for (const c of [cases[0]!, cases[2]!, ids, stops]) {
      // search T=1 and greedy batch 9 (tool turns, stop strings and EOS, shared group prompts).
      const multi = await rollout(policyDecodeBackend(c.model(), { maxBatch: c.maxBatch }), { ...c.opts(), decodeSteps: 4 });
      const one = await rollout(policyDecodeBackend(c.model(), { maxBatch: c.maxBatch }), { ...c.opts(), decodeSteps: 1 });
      const a = summarise(multi.trajectories);
      const b = summarise(one.trajectories);
      expect(a.tokens, c.name).toEqual(b.tokens);
      expect(a.truncated).toEqual(b.truncated);
      a.logprobs.flat().forEach((x, i) => expect(Math.abs(x - b.logprobs.flat()[i]!)).toBeLessThan(1e-4));
      a.entropy.flat().forEach((x, i) => expect(Math.abs(x - b.entropy.flat()[i]!)).toBeLessThan(1e-4));
      expect(multi.stats.generatedTokens).toBe(one.stats.generatedTokens);
      expect(multi.stats.modelCalls).toBeLessThan(one.stats.modelCalls);
      if (c === cases[0] || c === stops) expect(multi.stats.discardedTokens, c.name).toBeGreaterThan(0);
      if (c === stops)
        expect(
          multi.trajectories.flatMap((t) => t.turns.filter((u) => u.stop?.reason === 'stop_token' || u.stop?.reason === 'stop_string')).length,
        ).toBeGreaterThan(3);
      expect(one.stats.discardedTokens).toBe(0);
    }
  });
});

describe('decode steps follow how turns end', () => {
  it('after turns that all end at their first token, calls run one step (nothing discarded); the backend remembers across rollouts', async () => {
    const c = cases[6]!; // ids T=1.3 batch 8
    const o = (): RolloutOptions => ({ ...c.opts(), stop: { strings: [], tokenIds: Array.from({ length: V2 }, (_, i) => i) } });
    const backend = policyDecodeBackend(wide, { maxBatch: c.maxBatch });
    const first = await rollout(backend, o());
    const second = await rollout(backend, o());
    await backend.close?.();
    // First call: no turn has ended yet, so it runs up to the limit and discards all but one token per row.
    expect(first.stats.discardedTokens).toBeGreaterThan(0);
    expect(second.stats.discardedTokens).toBe(0);
    expect(second.stats.modelSteps).toBe(second.stats.modelCalls);
    expect(summarise(second.trajectories).tokens).toEqual(summarise(first.trajectories).tokens);
  });
});

describe('group prefix sharing', () => {
  it('prefills each group prompt once, forks the cache, and samples exactly what unshared prefill samples', async () => {
    const c = cases[0]!; // search T=1 batch 9: 2 tasks × 3 samples start together
    const shared = await rollout(policyDecodeBackend(small, { maxBatch: 9 }), c.opts());
    const unshared = await rollout(policyDecodeBackend(small, { maxBatch: 9 }), { ...c.opts(), sharePrefix: false });
    const host = await rollout(policyDecodeBackend(small, { maxBatch: 9, cache: 'host' }), c.opts());
    const oneStep = await rollout(policyDecodeBackend(small, { maxBatch: 9 }), { ...c.opts(), decodeSteps: 1 });
    const oneStepUnshared = await rollout(policyDecodeBackend(small, { maxBatch: 9 }), { ...c.opts(), decodeSteps: 1, sharePrefix: false });
    expect(summarise(shared.trajectories).tokens).toEqual(summarise(unshared.trajectories).tokens);
    expect(summarise(oneStep.trajectories).tokens).toEqual(summarise(unshared.trajectories).tokens);
    expect(summarise(oneStepUnshared.trajectories).tokens).toEqual(summarise(unshared.trajectories).tokens);
    expect(shared.stats.modelSteps).toBeGreaterThan(shared.stats.modelCalls);
    expect(oneStep.stats.prefillTokens).toBe(shared.stats.prefillTokens);
    expect(summarise(host.trajectories).tokens).toEqual(summarise(unshared.trajectories).tokens);
    const promptTokens = shared.trajectories.reduce((a, t) => a + t.promptIds.length, 0);
    // Unshared: every sample prefills its whole prompt; shared: one per group plus one token per sample.
    expect(shared.stats.prefillTokens).toBeLessThan(unshared.stats.prefillTokens - promptTokens / 2);
    expect(host.stats.prefillTokens).toBe(shared.stats.prefillTokens);
    // Two decode sessions: a fork stays on its source's session; both sessions decode.
    const backend = policyDecodeBackend(small, { maxBatch: 9, shards: 2 });
    const sharded = await rollout(backend, c.opts());
    await backend.close?.();
    expect(summarise(sharded.trajectories).tokens).toEqual(summarise(unshared.trajectories).tokens);
    expect(sharded.stats.prefillTokens).toBe(shared.stats.prefillTokens);
    expect((backend as ShardedKvBackend).shardCalls.every((n) => n > 0)).toBe(true);
  });
});
