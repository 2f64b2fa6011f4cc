import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { loadConfig } from '../../../engine/config/experiment';
import {
  chunks,
  dropFlatGroups,
  episodeMetrics,
  logprobMismatch,
  modelTokenCount,
  overlongPenalty,
  responseBudget,
  stepSeed,
  type Episode,
} from '../../../engine/train/episode';

function ep(group: number, reward: number, mask: number[], extra: Partial<Episode> = {}): Episode {
  return {
    group,
    sample: 0,
    taskId: 't',
    tokens: new Int32Array(mask.length),
    lossMask: Uint8Array.from(mask),
    rolloutLogprobs: new Float32Array(mask.length),
    entropy: Float32Array.from(mask.map((m) => m * 2)),
    reward,
    rewardComponents: { em: reward },
    exactMatch: reward === 1,
    formatOk: true,
    toolCalls: 2,
    toolErrors: 1,
    turns: 2,
    stepRewards: [],
    truncated: false,
    ...extra,
  };
}

describe('episode helpers', () => {
  it('overlong shaping: zero below L_max − L_buf, linear to −1 at L_max, plus the truncation penalty', () => {
    expect(overlongPenalty(100, 256, 64, false, 1)).toBe(0);
    expect(overlongPenalty(192, 256, 64, false, 1)).toBeCloseTo(0);
    expect(overlongPenalty(224, 256, 64, false, 1)).toBeCloseTo(-0.5);
    expect(overlongPenalty(256, 256, 64, true, 1)).toBeCloseTo(-2);
  });

  it('overlong shaping uses the response budget: with the shipped DAPO config a long answer is penalised', async () => {
    const { cfg } = await loadConfig(join(__dirname, '..', '..', '..', 'resources', 'configs', 'dapo.yaml'));
    // 40 prompt tokens, 100 model tokens in two turns with a 20-token observation between them.
    const mask = [...Array(40).fill(0), ...Array(50).fill(1), ...Array(20).fill(0), ...Array(50).fill(1)];
    const e = ep(0, 1, mask);
    expect(responseBudget(e, cfg.rollout)).toBe(cfg.rollout.max_turns * cfg.rollout.max_new_tokens); // 4 × 32 = 128 < 384 − 40
    const buf = cfg.algorithm.overlong.buffer; // 64
    expect(overlongPenalty(modelTokenCount(e), responseBudget(e, cfg.rollout), buf, false, 1)).toBeCloseTo(-(100 - (128 - 64)) / 64);
    // A long prompt leaves less: max_total_length − prompt; `promptLength` wins over the first model token.
    expect(responseBudget({ ...e, promptLength: 300 }, cfg.rollout)).toBe(84);
    // A buffer larger than the budget is cut to it (no penalty for an empty answer).
    expect(overlongPenalty(0, 10, 64, false, 1)).toBeCloseTo(0, 12);
    expect(overlongPenalty(10, 10, 64, false, 1)).toBe(-1);
  });

  it('dynamic sampling drops only groups with all-equal rewards', () => {
    const eps = [ep(0, 1, [1]), ep(0, 1, [1]), ep(1, 0, [1]), ep(1, 1, [1])];
    const r = dropFlatGroups(eps);
    expect(r.dropped).toBe(1);
    expect(r.kept.map((e) => e.group)).toEqual([1, 1]);
  });

  it('batch metrics count only model tokens for lengths and entropy', () => {
    const m = episodeMetrics([ep(0, 1, [0, 1, 1, 0]), ep(0, 0, [0, 1, 0, 0])]);
    expect(m['reward/mean']).toBe(0.5);
    expect(m['reward/std']).toBe(0.5);
    expect(m['response_length/mean']).toBe(1.5);
    expect(m['entropy']).toBe(2);
    expect(m['tool_calls_per_episode']).toBe(2);
    expect(m['tool_errors_per_episode']).toBe(1);
    expect(m['exact_match']).toBe(0.5);
    expect(m['groups/flat_fraction']).toBe(0);
  });

  it('logprob mismatch ignores masked tokens', () => {
    const e = ep(0, 0, [0, 1, 1]);
    expect(logprobMismatch([e], [Float32Array.from([5, 0.5, -0.25])])).toEqual({ meanAbs: 0.375, max: 0.5 });
  });

  it('chunks split evenly without empty chunks; step seeds differ by step and stream', () => {
    expect(chunks([1, 2, 3, 4, 5], 2)).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
    expect(chunks([1, 2], 4)).toEqual([[1], [2]]);
    expect(stepSeed(1, 1)).not.toBe(stepSeed(1, 2));
    expect(stepSeed(1, 1, 0)).not.toBe(stepSeed(1, 1, 1));
    expect(stepSeed(1, 1)).toBe(stepSeed(1, 1));
  });
});
