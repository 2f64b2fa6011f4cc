// GiGPO (engine/rl/estimators.ts gigpo): episode advantage per trajectory + ω × step advantage
// over step groups (steps of one group that saw the same observation), hand-computed, with
// unequal trajectory lengths, singleton step groups, step rewards, both normalisation modes; the
// steps recorded from rollout turns; and real multi-hop rollouts (the scripted expert, with
// mistakes) giving step groups beyond the shared prompt.
import { describe, expect, it } from 'vitest';
import { gigpo, stepGroupMetrics, stepsFromMask, type EstimatorEpisode } from '../../../engine/rl';
import { rolloutTextPolicy } from '../../../engine/rollout/engine';
import { advantagePort } from '../../../engine/train/advantage';
import { validateConfig } from '../../../engine/config/experiment';
import type { Episode } from '../../../engine/train/episode';
import { multihopKit } from '../../../engine/tasks/multihop/kit';
import { sequenceMatcherRatio } from '../../../engine/rl/similarity';
import { trajectoryToEpisode } from '../../../engine/train/trajectories';

/** An episode whose steps are given as [start, end, observation]; mask 1 exactly on the steps. */
function ep(group: number, reward: number, steps: [number, number, string][], stepRewards: { at: number; value: number }[] = []): EstimatorEpisode {
  const n = Math.max(...steps.map((s) => s[1])) + 1;
  const mask = new Uint8Array(n);
  for (const [a, b] of steps) mask.fill(1, a, b);
  return { group, reward, mask, stepRewards, steps: steps.map(([start, end, observation]) => ({ start, end, observation })) };
}
/** The advantage of each step (read at its first token). */
const perStep = (e: EstimatorEpisode, a: Float32Array) => e.steps!.map((s) => a[s.start]!);

// Group 0: three trajectories of 3, 2 and 1 steps; group 1: one trajectory that saw the same
// prompt text "Q" (a different group: never grouped with group 0).
const T0 = ep(0, 1, [
  [1, 3, 'Q'],
  [4, 6, 'A'],
  [7, 8, 'B'],
]);
const T1 = ep(0, 0, [
  [1, 2, 'Q'],
  [3, 5, 'A'],
]);
const T2 = ep(0, 0.5, [[1, 4, 'Q']]);
const T3 = ep(1, 1, [[1, 3, 'Q']]);
const batch = [T0, T1, T2, T3];

describe('GiGPO advantages, hand-computed (γ = 0.5)', () => {
  it('mean_norm (default): episode mean per trajectory; step groups by observation; singletons get 0', () => {
    const { advantages, stepGroupSizes } = gigpo(batch, { stepWeight: 1, gamma: 0.5, normByStd: false });
    // A_episode: group 0 rewards (1, 0, 0.5), mean 0.5 over trajectories (per step row it would be
    // 3.5/6) → (0.5, −0.5, 0); group 1 has one trajectory → 0.
    // Step returns: T0 (0.25, 0.5, 1), T1 (0, 0), T2 (0.5), T3 (1).
    // Step groups of group 0: "Q" {0.25, 0, 0.5} mean 0.25 → (0, −0.25, 0.25); "A" {0.5, 0} → (0.25, −0.25);
    // "B" {T0's last step} alone → 0. Group 1: "Q" {T3} alone → 0.
    const want = [[0.5 + 0, 0.5 + 0.25, 0.5 + 0], [-0.5 - 0.25, -0.5 - 0.25], [0 + 0.25], [0]];
    batch.forEach((e, i) => perStep(e, advantages[i]!).forEach((a, k) => expect(a).toBeCloseTo(want[i]![k]!, 6)));
    expect(stepGroupSizes.sort()).toEqual([1, 1, 2, 3]);
    // Every model token of a step carries its step's value; others 0.
    expect(Array.from(advantages[0]!)).toEqual([0, 0.5, 0.5, 0, 0.75, 0.75, 0, 0.5, 0].map(Math.fround));
  });

  it('step_weight ω scales only the step part (ω = 0: the episode advantage alone)', () => {
    const half = gigpo(batch, { stepWeight: 0.5, gamma: 0.5, normByStd: false }).advantages;
    expect(perStep(T1, half[1]!)).toEqual([-0.5 - 0.125, -0.5 - 0.125]);
    const none = gigpo(batch, { stepWeight: 0, gamma: 0.5, normByStd: false }).advantages;
    expect(perStep(T0, none[0]!)).toEqual([0.5, 0.5, 0.5]);
  });

  it('mean_std_norm divides by the unbiased std of the group and of the step group', () => {
    const { advantages } = gigpo(batch, { stepWeight: 1, gamma: 0.5, normByStd: true, eps: 0 });
    // Episodes: mean 0.5, std √(0.5/2) = 0.5 → (1, −1, 0). "Q": mean 0.25, std 0.25 → (0, −1, 1);
    // "A": (0.5, 0), std √0.125 → ±1/√2.
    const r = Math.SQRT1_2;
    const want = [[1, 1 + r, 1], [-1 - 1, -1 - r], [0 + 1], [0]];
    batch.forEach((e, i) => perStep(e, advantages[i]!).forEach((a, k) => expect(a).toBeCloseTo(want[i]![k]!, 5)));
  });

  it('step rewards enter the discounted step returns on their turn', () => {
    // T1 gets a step reward 0.2 on its first turn's last token: its returns become (0.2, 0).
    const t1 = ep(
      0,
      0,
      [
        [1, 2, 'Q'],
        [3, 5, 'A'],
      ],
      [{ at: 1, value: 0.2 }],
    );
    const { advantages } = gigpo([T0, t1, T2], { stepWeight: 1, gamma: 0.5, normByStd: false });
    // "Q": (0.25, 0.2, 0.5), mean 0.95/3.
    const q = 0.95 / 3;
    expect(perStep(T0, advantages[0]!)[0]).toBeCloseTo(0.5 + 0.25 - q, 6);
    expect(perStep(t1, advantages[1]!)[0]).toBeCloseTo(-0.5 + 0.2 - q, 6);
    expect(perStep(T2, advantages[2]!)[0]).toBeCloseTo(0 + 0.5 - q, 6);
  });

  it('equal outcomes and identical steps give 0 everywhere', () => {
    const a = gigpo([ep(0, 1, [[1, 2, 'Q']]), ep(0, 1, [[1, 2, 'Q']])], { stepWeight: 1, gamma: 0.95, normByStd: true }).advantages;
    expect(a.every((x) => x.every((v) => v === 0))).toBe(true);
  });

  it('an episode without steps is an error naming the estimator', () => {
    expect(() => gigpo([{ group: 0, reward: 1, mask: [1] }], { stepWeight: 1, gamma: 1, normByStd: false })).toThrow(/gigpo needs the steps/);
  });

  it('step-group metrics: count, mean and max size, share of steps alone', () => {
    expect(stepGroupMetrics([3, 2, 1, 1])).toEqual({
      'advantage/step_groups': 4,
      'advantage/step_group_size_mean': 7 / 4,
      'advantage/step_group_size_max': 3,
      'advantage/singleton_step_fraction': 2 / 7,
    });
  });
});

describe('GiGPO steps', () => {
  it('from the loss mask when turns were not recorded: runs of model tokens, observation = the tokens before them', () => {
    expect(stepsFromMask([5, 6, 7, 8, 9, 10, 11], [0, 0, 1, 1, 0, 1, 0])).toEqual([
      { start: 2, end: 4, observation: '5,6' },
      { start: 5, end: 6, observation: '9' },
    ]);
  });

  it('through the advantage port (config algorithm.gigpo), with step-group metrics', () => {
    const cfg = validateConfig({ model: { init: 'tiny' }, algorithm: { adv_estimator: 'gigpo', gigpo: { gamma: 0.5 } } });
    const episodes = batch.map(
      (e, i) =>
        ({
          group: e.group,
          sample: i,
          tokens: new Int32Array(e.mask.length),
          lossMask: e.mask as Uint8Array,
          reward: e.reward,
          stepRewards: [],
          steps: e.steps,
        }) as unknown as Episode,
    );
    const r = advantagePort(cfg).compute({ episodes, oldLogprobs: new Map() });
    expect(perStep(T1, r.advantages.get(episodes[1]!)!)).toEqual([-0.75, -0.75]);
    expect(r.metrics!['advantage/step_group_size_max']).toBe(3);
  });
});

describe('GiGPO on the multi-hop task', () => {
  it('rollout turns become steps (the prompt, then each tool result); repeated searches form step groups', async () => {
    const cfg = validateConfig({ model: { init: 'tiny' }, task: { hops: [2] }, sft: { mistake_rate: 0.5 }, algorithm: { adv_estimator: 'gigpo' } });
    const kit = multihopKit(cfg);
    const { trajectories } = await rolloutTextPolicy(kit.expert!, {
      tasks: kit.trainTasks.slice(0, 4),
      n: 4,
      seed: 7,
      limits: { maxNewTokens: cfg.rollout.max_new_tokens, maxTurns: cfg.rollout.max_turns, maxTotalLength: cfg.rollout.max_total_length },
      tokenizer: kit.tokenizer,
    });
    const episodes = trajectories.map(trajectoryToEpisode);
    for (const [i, e] of episodes.entries()) {
      const t = trajectories[i]!;
      const modelTurns = t.turns.filter((u) => u.role === 'model');
      expect(e.steps!.length).toBe(modelTurns.length);
      expect(e.steps![0]!.observation).toBe(t.promptText);
      // A step's tokens are its model turn's tokens.
      e.steps!.forEach((s, k) => expect(Array.from(e.tokens.slice(s.start, s.end))).toEqual(modelTurns[k]!.tokenIds));
      // The second step saw the first tool result, nothing else.
      const firstTool = t.turns.findIndex((u) => u.role !== 'model' && t.turns.indexOf(modelTurns[0]!) < t.turns.indexOf(u));
      if (e.steps!.length > 1) expect(e.steps![1]!.observation).toBe(t.turns[firstTool]!.text);
    }
    const r = advantagePort(cfg).compute({ episodes, oldLogprobs: new Map() });
    const m = r.metrics!;
    // The first step of each question is shared by its 4 samples; later steps that repeat a search share its result.
    expect(m['advantage/step_group_size_max']).toBeGreaterThanOrEqual(4);
    const steps = episodes.reduce((a, e) => a + e.steps!.length, 0);
    expect(steps - 16).toBeGreaterThan(0); // steps beyond the first
    expect(m['advantage/step_groups']).toBeLessThan(steps / 2); // later steps share groups too (same search, same result)
    for (const e of episodes) expect(r.advantages.get(e)!.every((v, t) => (e.lossMask[t] ? Number.isFinite(v) : v === 0))).toBe(true);
  });
});

describe('GiGPO similarity-based step groups (algorithm.gigpo.similarity_threshold)', () => {
  it('the ratio equals Python difflib.SequenceMatcher(None, a, b).ratio() (values from CPython 3)', () => {
    const long =
      ' <information> the lonely road is a book . the lonely road was written by alvin york . alvin york is a person . alvin york was born in hythe . hythe is a city in brovia . </information> '.repeat(
        2,
      );
    const other = long.replaceAll('hythe', 'casel').replaceAll('alvin', 'alwin');
    const cases: [string, string, number][] = [
      ['', '', 1],
      ['abc', '', 0],
      ['abcd', 'bcde', 0.75],
      ['the lonely road was written by alvin york', 'the lonely road was written by alvin yorke', 0.9879518072289156],
      ['private Thread currentThread;', 'private volatile Thread currentThread;', 0.8656716417910447],
      [long, other, 0.7419354838709677], // |b| ≥ 200: autojunk
      [other.slice(0, 150), long, 0.39846743295019155],
    ];
    for (const [a, b, want] of cases) expect(sequenceMatcherRatio(a, b)).toBeCloseTo(want, 12);
  });

  it('steps whose observations are ≥ threshold similar share a step group; exact match keeps them apart', () => {
    const o1 = 'the lonely road was written by alvin york';
    const o2 = 'the lonely road was written by alvin yorke'; // ratio 0.988 to o1
    const eps = [
      ep(0, 1, [
        [1, 2, 'Q'],
        [3, 4, o1],
      ]),
      ep(0, 0, [
        [1, 2, 'Q'],
        [3, 4, o2],
      ]),
    ];
    const exact = gigpo(eps, { stepWeight: 1, gamma: 1, normByStd: false });
    expect(exact.stepGroupSizes.sort()).toEqual([1, 1, 2]);
    const similar = gigpo(eps, { stepWeight: 1, gamma: 1, normByStd: false, similarity: { threshold: 0.95, ratio: sequenceMatcherRatio } });
    expect(similar.stepGroupSizes.sort()).toEqual([2, 2]);
    // Second steps: returns (1, 0) now compared: ±0.5 on top of the episode advantage ±0.5.
    expect(perStep(eps[0]!, similar.advantages[0]!)).toEqual([1, 1]);
    expect(perStep(eps[1]!, similar.advantages[1]!)).toEqual([-1, -1]);
    const strict = gigpo(eps, { stepWeight: 1, gamma: 1, normByStd: false, similarity: { threshold: 0.99, ratio: sequenceMatcherRatio } });
    expect(strict.stepGroupSizes.sort()).toEqual([1, 1, 2]);
  });

  it('is read from the config', () => {
    const cfg = validateConfig({ model: { init: 'tiny' }, algorithm: { adv_estimator: 'gigpo', gigpo: { similarity_threshold: 0.95 } } });
    const o1 = 'the lonely road was written by alvin york';
    const episodes = [
      ep(0, 1, [
        [1, 2, 'Q'],
        [3, 4, o1],
      ]),
      ep(0, 0, [
        [1, 2, 'Q'],
        [3, 4, o1 + 'e'],
      ]),
    ].map(
      (e, i) =>
        ({
          group: 0,
          sample: i,
          tokens: new Int32Array(e.mask.length),
          lossMask: e.mask,
          reward: e.reward,
          stepRewards: [],
          steps: e.steps,
        }) as unknown as Episode,
    );
    expect(advantagePort(cfg).compute({ episodes, oldLogprobs: new Map() }).metrics!['advantage/step_groups']).toBe(2);
    expect(() => validateConfig({ model: { init: 'tiny' }, algorithm: { gigpo: { similarity_threshold: 1 } } })).toThrow(
      /algorithm\.gigpo\.similarity_threshold/,
    );
  });
});
