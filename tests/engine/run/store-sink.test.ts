// A rollout trajectory → training episode → stored record keeps turns, per-token arrays, tool
// calls on the model turn that made them, step rewards and the task's gold answers.
import { describe, expect, it } from 'vitest';
import type { Trajectory } from '../../../engine/rollout/types';
import { episodeToRecord } from '../../../engine/run/store-sink';
import { trajectoryToEpisode } from '../../../engine/train/trajectories';

const z = (n: number) => Array(n).fill(0);

describe('episodeToRecord', () => {
  it('rebuilds turns with tool calls, step rewards, advantages and golds', () => {
    const call = { name: 'search', args: { query: 'alvin' }, result: 'alvin was born in oban', latencyMs: 3 };
    const t: Trajectory = {
      taskId: 'q1',
      group: 2,
      sample: 1,
      promptIds: [1, 2],
      promptText: 'question : x',
      turns: [
        {
          role: 'model',
          tokenIds: [3, 4, 5],
          text: '<search> alvin </search>',
          logprobs: [-0.1, -0.2, -0.3],
          entropy: [1, 1, 1],
          lossMask: [1, 1, 1],
          toolCalls: [call],
          stepReward: 0.5,
        },
        { role: 'tool', tokenIds: [6, 7], text: '<information> … </information>', logprobs: z(2), entropy: z(2), lossMask: [0, 0] },
        { role: 'model', tokenIds: [8, 9], text: '<answer> oban', logprobs: [-0.4, -0.5], entropy: [2, 2], lossMask: [1, 1] },
      ],
      outcome: { reward: 1, components: { exact_match: 1 }, exactMatch: true, formatOk: true, answer: 'oban' },
      truncated: false,
      seed: 1,
      timings: { totalMs: 12, modelMs: 9, envMs: 3, prefillTokens: 2, generatedTokens: 5 },
      meta: { answers: ['Oban'], hops: 1, question: 'where was alvin born ?' },
    };
    const e = trajectoryToEpisode(t);
    const adv = Float32Array.from([0, 0, 1, 1, 1, 0, 0, 1, 1]);
    const ref = Float32Array.from([0, 0, -0.15, -0.25, -0.35, 0, 0, -0.45, -0.55]);
    const values = Float32Array.from([0, 0, 0.1, 0.2, 0.3, 0, 0, 0.4, 0.5]);
    const r = episodeToRecord(7, e, adv, (ids) => ids.map((i) => `w${i}`).join(' '), { refLogprobs: ref, values });
    expect(r.turns.map((u) => u.role)).toEqual(['env', 'model', 'tool', 'model']);
    expect(r.turns[1]!.toolCalls).toEqual([call]);
    expect(r.turns[1]!.stepReward).toBe(0.5);
    expect(r.turns[3]!.toolCalls).toBeUndefined();
    expect(Array.from(r.turns[3]!.logprob!)).toEqual([-0.4, -0.5].map((x) => Math.fround(x)));
    expect(r.advantage).toBe(1);
    // Reference logprobs (the heat map's KL channel) and critic values, sliced per turn.
    expect(Array.from(r.turns[1]!.refLogprob!)).toEqual([-0.15, -0.25, -0.35].map((x) => Math.fround(x)));
    expect(Array.from(r.turns[3]!.value!)).toEqual([0.4, 0.5].map((x) => Math.fround(x)));
    expect(r.timings).toEqual({ totalMs: 12, modelMs: 9, envMs: 3, prefillTokens: 2, generatedTokens: 5 });
    // Without them the fields stay empty.
    const bare = episodeToRecord(7, e, adv, String);
    expect(bare.turns[1]!.refLogprob).toBeUndefined();
    expect(bare.turns[1]!.value).toBeUndefined();
    expect(r.outcome).toMatchObject({ answer: 'oban', golds: ['Oban'], hops: 1, exactMatch: true });
  });
});
