// Every advantage estimator against hand-computed values on a small batch with masks
// (model tokens interleaved with tool-observation tokens).
import { describe, expect, it } from 'vitest';
import {
  computeAdvantages,
  gae,
  getEstimator,
  groupOutcomeAdvantages,
  processRewardReturns,
  reinforcePlusPlus,
  reinforcePlusPlusBaseline,
  returnsOverModelTokens,
  whiten,
  type EstimatorEpisode,
} from '../../../engine/rl';

const close = (a: ArrayLike<number>, b: number[], digits = 5) => {
  expect(a.length).toBe(b.length);
  b.forEach((x, i) => expect(a[i]).toBeCloseTo(x, digits));
};

describe('group estimators (GRPO, Dr.GRPO, RLOO)', () => {
  const ep = (group: number, reward: number): EstimatorEpisode => ({ group, reward, mask: [1] });
  const eps = [ep(0, 1), ep(0, 0), ep(0, 0), ep(0, 1), ep(1, 0.5), ep(1, 0.5), ep(2, 3)];
  it('GRPO divides by the unbiased group std; equal rewards and singleton groups give exactly 0', () => {
    const std = Math.sqrt((4 * 0.25) / 3);
    const g = groupOutcomeAdvantages(eps, { normByStd: true }, 0);
    expect(g[0]).toBeCloseTo(0.5 / std, 6);
    expect(g[1]).toBeCloseTo(-0.5 / std, 6);
    expect(g[4]).toBe(0);
    expect(g[6]).toBe(0);
  });
  it('Dr.GRPO (and GRPO without std normalisation) only subtracts the mean', () => {
    expect(groupOutcomeAdvantages(eps, {})[0]).toBeCloseTo(0.5, 6);
    expect(groupOutcomeAdvantages(eps, { normByStd: false })[1]).toBeCloseTo(-0.5, 6);
  });
  it('RLOO subtracts the mean of the others', () => {
    expect(groupOutcomeAdvantages(eps, { leaveOneOut: true })[0]).toBeCloseTo(1 - 1 / 3, 6);
    expect(groupOutcomeAdvantages(eps, { leaveOneOut: true })[1]).toBeCloseTo(0 - 2 / 3, 6);
  });
  it('broadcasts onto model tokens only', () => {
    const batch: EstimatorEpisode[] = [
      { group: 0, reward: 1, mask: [0, 1, 1, 0, 1] },
      { group: 0, reward: 0, mask: [0, 1, 0, 0, 0] },
    ];
    const r = computeAdvantages('drgrpo', batch, { normByStd: true, gamma: 1, lam: 1, klRewardCoef: 0, processRewards: false });
    close(r.advantages[0]!, [0, 0.5, 0.5, 0, 0.5]);
    close(r.advantages[1]!, [0, -0.5, 0, 0, 0]);
  });
});

describe('returns and whitening', () => {
  it('discounts over model tokens only, skipping observation tokens', () => {
    // tokens: m m o o m ; reward 1 on the last model token; γ = 0.5
    close(returnsOverModelTokens([0, 0, 0, 0, 1], [1, 1, 0, 0, 1], 0.5), [0.25, 0.5, 0, 0, 1]);
  });
  it('whitens over masked positions of the whole batch with the unbiased std', () => {
    const w = whiten([Float32Array.from([1, 9, 3]), Float32Array.from([5])], [[1, 0, 1], [1]], 0);
    // values 1, 3, 5: mean 3, unbiased std 2
    close(w[0]!, [-1, 0, 0]);
    close(w[1]!, [1]);
  });
});

describe('REINFORCE++', () => {
  it('token rewards −β·KL plus the outcome on the last model token, returns, batch whitening', () => {
    const batch: EstimatorEpisode[] = [
      { group: 0, reward: 1, mask: [1, 0, 1] },
      { group: 1, reward: 0, mask: [1, 1, 0] },
    ];
    const kl = [
      [0.5, 0, 1],
      [2, 0, 0],
    ];
    const a = reinforcePlusPlus(batch, { gamma: 1, klCoef: 0.1, klPerToken: kl });
    // episode 0: r = [-0.05, 0, 1 - 0.1] → returns [0.85, 0, 0.9]; episode 1: r = [-0.2, 0] → [-0.2, 0]
    const vals = [0.85, 0.9, -0.2, 0];
    const mean = vals.reduce((x, y) => x + y) / 4;
    const std = Math.sqrt(vals.reduce((x, y) => x + (y - mean) ** 2, 0) / 3);
    close(a[0]!, [(0.85 - mean) / std, 0, (0.9 - mean) / std]);
    close(a[1]!, [(-0.2 - mean) / std, (0 - mean) / std, 0]);
  });
  it('baseline variant: outcome minus group mean, broadcast, batch-whitened', () => {
    const batch: EstimatorEpisode[] = [
      { group: 0, reward: 1, mask: [1, 1] },
      { group: 0, reward: 0, mask: [0, 1] },
      { group: 1, reward: 2, mask: [1, 0] },
    ];
    const a = reinforcePlusPlusBaseline(batch);
    // raw: 0.5, 0.5 | -0.5 | 0 → values [0.5, 0.5, -0.5, 0]
    const vals = [0.5, 0.5, -0.5, 0];
    const mean = 0.125;
    const std = Math.sqrt(vals.reduce((x, y) => x + (y - mean) ** 2, 0) / 3);
    close(a[0]!, [(0.5 - mean) / std, (0.5 - mean) / std]);
    close(a[1]!, [0, (-0.5 - mean) / std]);
    close(a[2]!, [(0 - mean) / std, 0]);
  });
});

describe('GAE over model tokens', () => {
  it('runs the recursion across observation tokens and returns A + V', () => {
    // tokens m m o m ; values on model tokens 0.2, 0.4, -, 0.5 ; outcome 1 ; γ = 0.9, λ = 0.8
    const e: EstimatorEpisode = { group: 0, reward: 1, mask: [1, 1, 0, 1] };
    const { advantages, returns } = gae([e], [[0.2, 0.4, 99, 0.5]], { gamma: 0.9, lam: 0.8, whitenAdvantages: false });
    const d3 = 1 + 0 - 0.5; // last model token: r = 1, no next value
    const d1 = 0 + 0.9 * 0.5 - 0.4; // next model token is index 3
    const d0 = 0 + 0.9 * 0.4 - 0.2;
    const a3 = d3;
    const a1 = d1 + 0.72 * a3;
    const a0 = d0 + 0.72 * a1;
    close(advantages[0]!, [a0, a1, 0, a3]);
    close(returns[0]!, [a0 + 0.2, a1 + 0.4, 0, a3 + 0.5]);
  });
  it('needs a critic', () => {
    expect(getEstimator('gae').needsCritic).toBe(true);
    expect(() => computeAdvantages('gae', [], { normByStd: true, gamma: 1, lam: 1, klRewardCoef: 0, processRewards: false })).toThrow(
      /gae needs critic values/,
    );
    expect(() => getEstimator('vapo')).toThrow(/unknown estimator "vapo"; available: grpo, drgrpo, rloo, reinforce_pp, reinforce_pp_baseline, gae, gigpo/);
  });
});

describe('process rewards (Agent-R1)', () => {
  it('normalise step rewards by the largest |reverse cumsum| and add their return-to-go', () => {
    // model tokens: [1,1,0,0,1,1,0,0,1]; tool calls end at 1 and 5 with step rewards 0.5 and 1.
    const e: EstimatorEpisode = {
      group: 0,
      reward: 0,
      mask: [1, 1, 0, 0, 1, 1, 0, 0, 1],
      stepRewards: [
        { at: 1, value: 0.5 },
        { at: 5, value: 1 },
      ],
    };
    // reverse cumsum: 1.5 up to index 1, 1 up to index 5 → max 1.5; normalised 1/3 and 2/3
    const p = processRewardReturns(e);
    close(p, [1, 1, 0, 0, 2 / 3, 2 / 3, 0, 0, 0], 5);
    const batch = [e, { group: 0, reward: 1, mask: [1, 1, 0, 0, 0, 0, 0, 0, 0] }];
    const r = computeAdvantages('drgrpo', batch, { normByStd: true, gamma: 1, lam: 1, klRewardCoef: 0, processRewards: true });
    close(r.advantages[0]!, [-0.5 + 1, -0.5 + 1, 0, 0, -0.5 + 2 / 3, -0.5 + 2 / 3, 0, 0, -0.5], 5);
    close(r.advantages[1]!, [0.5, 0.5, 0, 0, 0, 0, 0, 0, 0]);
  });
});

describe('KL in the reward for outcome estimators', () => {
  it('subtracts β·Σ KL over the response from each outcome before the group baseline', () => {
    const batch: EstimatorEpisode[] = [
      { group: 0, reward: 1, mask: [0, 1, 1] },
      { group: 0, reward: 1, mask: [0, 1, 0] },
    ];
    const kl = [
      [9, 0.5, 1.5],
      [9, 0, 0],
    ]; // the prompt token's KL is ignored (mask 0)
    const r = computeAdvantages('drgrpo', batch, { normByStd: true, gamma: 1, lam: 1, klRewardCoef: 0.1, klPerToken: kl, processRewards: false });
    // rewards 1 − 0.2 = 0.8 and 1 − 0 = 1 → mean 0.9 → advantages −0.1, +0.1
    close(r.advantages[0]!, [0, -0.1, -0.1]);
    close(r.advantages[1]!, [0, 0.1, 0]);
  });
});
