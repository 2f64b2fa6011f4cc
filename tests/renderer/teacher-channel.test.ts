// The heat map's teacher channels (algorithm.distill): the teacher's logprob and log π − log π_teacher, on model tokens only.
import { describe, expect, it } from 'vitest';
import { channelScale, channelValue, heatColor, scaleTicks } from '../../renderer/src/lib/heat';

describe('teacher channels', () => {
  const turn = { logprob: [-0.5, -1, -2], teacherLogprob: [-0.25, -3, -2], lossMask: [1, 1, 0] };
  it('read the stored teacher logprob and the per-token KL to it; nothing off the model tokens or when not stored', () => {
    expect(channelValue(turn, 'teacher', 0)).toBe(-0.25);
    expect(channelValue(turn, 'teacher-kl', 0)).toBe(-0.25);
    expect(channelValue(turn, 'teacher-kl', 1)).toBe(2);
    expect(channelValue(turn, 'teacher', 2)).toBeNull();
    expect(channelValue({ logprob: [-1], lossMask: [1] }, 'teacher-kl', 0)).toBeNull();
  });
  it('use the logprob scale and a ±1 diverging one', () => {
    expect(channelScale([turn], 'teacher', () => 3)).toBe(6);
    expect(channelScale([turn], 'teacher-kl', () => 3)).toBe(1);
    expect(scaleTicks('teacher', 6)).toEqual(['≤ −6', '−3', '0']);
    expect(heatColor('teacher', -6, 6)).toMatch(/^rgba\(209, 66, 66/);
    expect(heatColor('teacher-kl', 1, 1)).toMatch(/^rgba\(40, 119, 228/);
    expect(heatColor('teacher-kl', -1, 1)).toMatch(/^rgba\(189, 98, 16/);
  });
});
