// Branching rollouts (ARPO / AEPO, engine/rollout/branching.ts + engine.ts): the decision rules
// by hand, the budget accounting (exactly M trajectories per prompt), reproducibility, and that a
// branched group's tokens and logprobs equal the same branches decoded from scratch (the forked
// KV cache changes nothing but time) on a forking recurrent LM and on the tiny ORT transformer.
import { afterAll, describe, expect, it } from 'vitest';
import { tinyConfig } from '../../../engine/model/config';
import { PolicyModel } from '../../../engine/model/runtime';
import { aepoGlobalSamples, branchProbability, decideBranches, windowEntropy, type BranchingOptions } from '../../../engine/rollout/branching';
import { rollout, type RolloutOptions } from '../../../engine/rollout/engine';
import { policyDecodeBackend } from '../../../engine/rollout/model-backend';
import type { DecodeBackend, EpisodeEnv, RolloutTask } from '../../../engine/rollout/ports';
import { Rng } from '../../../engine/base/rng';
import { sampleToken } from '../../../engine/rollout/sampling';
import { flattenTrajectory, type Trajectory } from '../../../engine/rollout/types';
import { EOS, RnnBackend, VOCAB, WordTokenizer } from './helpers';

const tok = new WordTokenizer();

/** A seeded Elman RNN whose per-slot cache is the state after every token, so `fork(from, to, length)` is exact. */
export class ForkRnn extends RnnBackend {
  /** Each slot's hidden states, one per fed token (so a fork can take a prefix). */
  private readonly states: Float32Array[][];
  forks = 0;
  extended = 0;
  constructor(
    maxBatch: number,
    maxLength = 512,
    seed = 7,
    // Biased towards <search> country </search> so that most samples call the tool.
    bias: Record<number, number> = { 1: -3, 2: 3, 3: 1.5, 4: -0.5, 5: -0.5, 6: -3, 7: -3, 11: 2, 12: 2, 13: 2 },
  ) {
    super(maxBatch, maxLength, seed, 2.5, bias);
    this.states = Array.from({ length: maxBatch }, () => []);
  }
  override async extend(items: { slot: number; tokens: number[] }[]): Promise<Float32Array[]> {
    return items.map(({ slot, tokens }) => {
      const st = this.states[slot]!;
      for (const t of tokens) {
        st.push(this.step(st[st.length - 1] ?? new Float32Array(this.H), t));
        this.extended++;
      }
      return this.logits(st[st.length - 1]!);
    });
  }
  override release(slot: number): void {
    this.states[slot] = [];
  }
  fork(from: number, to: number, length?: number): void {
    if (this.states[to]!.length) throw new Error(`fork: slot ${to} not empty`);
    const src = this.states[from]!;
    if (length !== undefined && length > src.length) throw new Error(`fork: length ${length} > ${src.length}`);
    this.states[to] = src.slice(0, length ?? src.length);
    this.forks++;
  }
}

/** Every model turn without an answer is a tool call whose observation depends on the turn (so branches see different ones). */
class ToolEveryTurnEnv implements EpisodeEnv {
  steps = 0;
  answer: string | undefined;
  constructor(private readonly country: string) {}
  async prompt() {
    const text = `user what is the capital of ${this.country} ? assistant`;
    return { ids: tok.encode(text), text };
  }
  async step(turn: { text: string; tokenIds: number[] }) {
    this.steps++;
    const ans = /<answer>(.*?)<\/answer>/.exec(turn.text);
    if (ans) {
      this.answer = ans[1]!.trim();
      return { done: true };
    }
    const word = VOCAB[8 + (turn.tokenIds.reduce((a, b) => a + b, 0) % 6)]!;
    return {
      done: false,
      toolCalls: [{ name: 'search', args: { query: turn.text }, result: word, latencyMs: 0 }],
      observation: { text: `<information> ${word} </information>`, role: 'tool' as const },
    };
  }
  async outcome() {
    const em = this.answer === 'paris' ? 1 : 0;
    return { reward: em + 0.01 * this.steps, components: { exact_match: em }, exactMatch: em === 1, formatOk: this.answer !== undefined };
  }
}
const toolTasks = (delayMs = 0): RolloutTask[] =>
  ['france', 'italy', 'germany'].map((c) => ({
    id: c,
    createEnv: () => {
      const e = new ToolEveryTurnEnv(c);
      if (!delayMs) return e;
      const step = e.step.bind(e);
      e.step = async (t) => {
        await new Promise((r) => setTimeout(r, delayMs * (1 + (t.tokenIds.length % 3))));
        return step(t);
      };
      return e;
    },
  }));

const arpo = (over: Partial<BranchingOptions> = {}): BranchingOptions => ({
  mode: 'arpo',
  initialSamples: 2,
  beamSize: 2,
  alpha: 0.5,
  beta: 0.2,
  entropyWindow: 3,
  budgetBeta: 1,
  branchPenalty: 0.5,
  ...over,
});

function opts(over: Partial<RolloutOptions> = {}): RolloutOptions {
  return {
    tasks: toolTasks(),
    n: 6,
    seed: 5,
    sampling: { temperature: 1 },
    tokenizer: tok,
    limits: { maxNewTokens: 6, maxTurns: 4, maxTotalLength: 80 },
    stop: { strings: ['</search>', '</answer>'], tokenIds: [EOS] },
    ...over,
  };
}
const ids = (ts: Trajectory[]) => ts.map((t) => t.turns.map((u) => u.tokenIds));
const scripted = (us: number[]) => ({ next: () => us.shift()! });

/** Decode a trajectory's own turns from scratch: prefill its shared prefix, sample with its stream, feed its recorded observations. */
async function fromScratch(backend: DecodeBackend, t: Trajectory, temperature: number): Promise<{ ids: number[]; logprobs: number[] }> {
  const flat = flattenTrajectory(t);
  const start = t.branch ? t.branch.tokens : t.promptIds.length;
  const rng = new Rng(t.seed);
  const out = { ids: [] as number[], logprobs: [] as number[] };
  let logits = (await backend.extend([{ slot: 0, tokens: Array.from(flat.tokens.subarray(0, start)) }]))[0]!;
  for (let i = start; i < flat.tokens.length; i++) {
    if (flat.lossMask[i]) {
      const s = sampleToken(logits, { temperature }, rng);
      out.ids.push(s.id);
      out.logprobs.push(s.logprob);
    }
    // Feed the recorded token (the sampled one if they agree: the comparison is the test).
    if (i + 1 < flat.tokens.length) logits = (await backend.extend([{ slot: 0, tokens: [flat.tokens[i]!] }]))[0]!;
  }
  backend.release(0);
  return out;
}
const own = (t: Trajectory) => {
  const f = flattenTrajectory(t);
  const start = t.branch ? t.branch.tokens : t.promptIds.length;
  const ids: number[] = [];
  const lps: number[] = [];
  for (let i = start; i < f.tokens.length; i++)
    if (f.lossMask[i]) {
      ids.push(f.tokens[i]!);
      lps.push(f.logprobs[i]!);
    }
  return { ids, logprobs: lps };
};

describe('branching decisions, by hand', () => {
  it('window entropy: mean of the first k per-token entropies over log |V|', () => {
    expect(windowEntropy([1, 2, 3, 100], 3, 100)).toBeCloseTo(2 / Math.log(100), 12);
    expect(windowEntropy([0.5], 20, 100)).toBeCloseTo(0.5 / Math.log(100), 12);
    expect(windowEntropy([], 20, 100)).toBe(0);
  });

  it('probability clip(α + β·ΔH, 0, 1); AEPO multiplies (1 − λ)^l', () => {
    const o = arpo();
    expect(branchProbability(o, 0.5, 0)).toBeCloseTo(0.6, 12);
    expect(branchProbability(o, -3, 0)).toBe(0);
    expect(branchProbability(o, 3, 0)).toBe(1);
    expect(branchProbability(o, 0.5, 2)).toBeCloseTo(0.6, 12); // ARPO has no penalty
    expect(branchProbability({ ...o, mode: 'aepo' }, 0.5, 2)).toBeCloseTo(0.6 * 0.25, 12);
  });

  it('decisions in sample order under the budget; every candidate draws beam − 1 uniforms', () => {
    const o = arpo({ beamSize: 3 });
    // p = 0.6, 0, 1. Candidate 0 draws 0.3 (branch), 0.7 (no); candidate 1 draws 0.1, 0.2 (p = 0: no);
    // candidate 2 draws 0.9, 0.95 (p = 1: both, but only 1 budget left after candidate 0 → 1).
    const r = [scripted([0.3, 0.7]), scripted([0.1, 0.2]), scripted([0.9, 0.95])];
    const d = decideBranches(
      o,
      [
        { deltaH: 0.5, consecutive: 0, rng: r[0]! },
        { deltaH: -3, consecutive: 1, rng: r[1]! },
        { deltaH: 3, consecutive: 0, rng: r[2]! },
      ],
      2,
    );
    expect(d.map((x) => x.children)).toEqual([1, 0, 1]);
    expect(d.map((x) => x.probability)).toEqual([0.6 + 0 * 0, 0, 1].map((p, i) => (i === 0 ? expect.closeTo(0.6, 12) : p)));
    expect(d.map((x) => x.consecutive)).toEqual([1, 0, 1]);
    // Budget 0: uniforms are still drawn (the streams stay aligned), nothing branches.
    const rr = scripted([0.0, 0.0, 0.5]);
    expect(decideBranches(o, [{ deltaH: 3, consecutive: 0, rng: rr }], 0)[0]!.children).toBe(0);
    expect(rr.next()).toBe(0.5);
  });

  it('AEPO budget split m = round(M·σ(β_b·(H_root − H_tool))) in [1, M]', () => {
    expect(aepoGlobalSamples(8, 1, 0.3, 0.3)).toBe(4);
    expect(aepoGlobalSamples(8, 2, 0.1, 0.6)).toBe(Math.round(8 / (1 + Math.exp(1)))); // 2: tools raise entropy → more branches
    expect(aepoGlobalSamples(8, 50, 0.6, 0.1)).toBe(8);
    expect(aepoGlobalSamples(8, 50, 0.1, 0.6)).toBe(1);
  });
});

describe('ARPO branching in the rollout engine (forking RNN)', () => {
  it('exactly M trajectories per prompt; branches name their parent and share its prefix token for token', async () => {
    const be = new ForkRnn(12);
    const r = await rollout(be, opts({ branching: arpo({ alpha: 1, beta: 0, beamSize: 3 }) }));
    expect(r.trajectories).toHaveLength(3 * 6);
    for (let g = 0; g < 3; g++) expect(r.trajectories.filter((t) => t.group === g).map((t) => t.sample)).toEqual([0, 1, 2, 3, 4, 5]);
    const branched = r.trajectories.filter((t) => t.branch);
    expect(branched.length).toBeGreaterThan(3);
    expect(r.stats.branches).toBe(branched.length);
    for (const t of branched) {
      const b = t.branch!;
      const parent = r.trajectories.find((p) => p.group === t.group && p.sample === b.parent)!;
      expect(b.parent).toBeLessThan(t.sample);
      expect(t.turns[b.turn - 1]!.role).toBe('tool');
      expect(t.turns.slice(0, b.turn)).toEqual(parent.turns.slice(0, b.turn));
      expect(Array.from(flattenTrajectory(t).tokens.subarray(0, b.tokens))).toEqual(Array.from(flattenTrajectory(parent).tokens.subarray(0, b.tokens)));
      // ΔH and the probability from the parent's recorded entropies (α = 1: p = 1).
      const h0 = windowEntropy(parent.turns.find((u) => u.role === 'model')!.entropy, 3, VOCAB.length);
      const h = windowEntropy(parent.turns[b.turn]!.entropy, 3, VOCAB.length);
      expect(b.entropy).toBeCloseTo(h, 6);
      expect(b.deltaH).toBeCloseTo(h - h0, 6);
      expect(b.probability).toBe(1);
    }
    expect(r.stats.prefixTokensSaved).toBe(branched.reduce((a, t) => a + t.branch!.tokens - 1, 0));
    expect(be.forks).toBeGreaterThanOrEqual(branched.length);
  });

  it('a parent samples the same tokens whether it branches or not; α = 0 fills the budget with fresh samples (= plain rollout)', async () => {
    const plain = await rollout(new ForkRnn(18), opts());
    const none = await rollout(new ForkRnn(12), opts({ branching: arpo({ alpha: 0, beta: 0 }) }));
    expect(none.trajectories.some((t) => t.branch)).toBe(false);
    expect(ids(none.trajectories)).toEqual(ids(plain.trajectories));
    const all = await rollout(new ForkRnn(12), opts({ branching: arpo({ alpha: 1, beta: 0 }) }));
    const roots = (ts: Trajectory[]) => ts.filter((t) => t.sample < 2);
    expect(ids(roots(all.trajectories))).toEqual(ids(roots(plain.trajectories)));
  });

  it('reproducible: batch size and tool latencies do not change branches or tokens', async () => {
    const a = await rollout(new ForkRnn(6), opts({ branching: arpo({ beamSize: 3 }) }));
    const b = await rollout(new ForkRnn(18), opts({ tasks: toolTasks(3), branching: arpo({ beamSize: 3 }) }));
    expect(ids(a.trajectories)).toEqual(ids(b.trajectories));
    expect(a.trajectories.map((t) => t.branch ?? null)).toEqual(b.trajectories.map((t) => t.branch ?? null));
    expect(a.trajectories.some((t) => t.branch)).toBe(true);
  });

  it('branches decoded from scratch give the same tokens and logprobs (forking changes nothing but time)', async () => {
    const r = await rollout(new ForkRnn(12), opts({ branching: arpo({ alpha: 1, beamSize: 3 }) }));
    const fresh = new ForkRnn(1);
    let checked = 0;
    for (const t of r.trajectories) {
      const want = own(t);
      const got = await fromScratch(fresh, t, 1);
      expect(got.ids).toEqual(want.ids);
      got.logprobs.forEach((x, i) => expect(x).toBeCloseTo(want.logprobs[i]!, 5));
      if (t.branch) checked++;
    }
    expect(checked).toBeGreaterThan(3);
  });

  it('AEPO: the monitor sample first, the split from its entropies, still exactly M per prompt', async () => {
    const r = await rollout(new ForkRnn(12), opts({ branching: arpo({ mode: 'aepo', budgetBeta: 1, alpha: 1, beamSize: 3 }) }));
    expect(r.trajectories).toHaveLength(18);
    for (let g = 0; g < 3; g++) expect(r.trajectories.filter((t) => t.group === g)).toHaveLength(6);
    expect(r.trajectories.filter((t) => t.branch).length).toBeGreaterThan(0);
    // σ(0)·6 = 3 global samples when H_root = H_tool; here they differ but stay within [1, 6].
    for (const t of r.trajectories.filter((x) => x.branch)) expect(t.branch!.probability).toBeLessThanOrEqual(1);
  });

  it('refuses a batch smaller than the budget and bad options, naming the field', async () => {
    await expect(rollout(new ForkRnn(4), opts({ branching: arpo() }))).rejects.toThrow(/batch of at least rollout.n = 6/);
    await expect(rollout(new ForkRnn(12), opts({ branching: arpo({ initialSamples: 7 }) }))).rejects.toThrow(/rollout.branching.initial_samples/);
  });
});

describe('ARPO branching on the tiny ORT transformer (worker KV cache, fork with length)', () => {
  const model = PolicyModel.init(
    tinyConfig({ vocabSize: VOCAB.length, hiddenSize: 32, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 256, eosTokenId: EOS, padTokenId: 0 }),
    11,
    { threads: 1 },
  );
  afterAll(() => model.dispose());

  it.each([1, 2])('branched tokens and logprobs equal decoding each branch from scratch (%i decode session(s))', async (shards) => {
    const r = await rollout(policyDecodeBackend(model, { maxBatch: 12, shards }), opts({ n: 4, branching: arpo({ alpha: 1, beamSize: 3 }) }));
    const branched = r.trajectories.filter((t) => t.branch);
    expect(branched.length).toBeGreaterThan(0);
    const fresh = policyDecodeBackend(model, { maxBatch: 1, cache: 'host' });
    for (const t of branched) {
      const want = own(t);
      const got = await fromScratch(fresh, t, 1);
      expect(got.ids).toEqual(want.ids);
      got.logprobs.forEach((x, i) => expect(x).toBeCloseTo(want.logprobs[i]!, 3));
    }
  });

  it('several decode steps per call change nothing: the same branches, tokens and logprobs as one step per call', async () => {
    const o = opts({ n: 4, branching: arpo({ alpha: 0.5, beta: 2, beamSize: 3 }) });
    const multi = await rollout(policyDecodeBackend(model, { maxBatch: 12 }), { ...o, decodeSteps: 4 });
    const one = await rollout(policyDecodeBackend(model, { maxBatch: 12 }), { ...o, decodeSteps: 1 });
    expect(multi.stats.modelSteps).toBeGreaterThan(multi.stats.modelCalls);
    expect(one.stats.modelSteps).toBe(one.stats.modelCalls);
    expect(multi.stats.branches).toBeGreaterThan(0);
    expect(ids(multi.trajectories)).toEqual(ids(one.trajectories));
    expect(multi.trajectories.map((t) => t.branch?.parent)).toEqual(one.trajectories.map((t) => t.branch?.parent));
    const lp = (ts: Trajectory[]) => ts.flatMap((t) => t.turns.flatMap((u) => u.logprobs));
    const want = lp(one.trajectories);
    lp(multi.trajectories).forEach((x, i) => expect(Math.abs(x - want[i]!)).toBeLessThan(1e-4));
  });
});
