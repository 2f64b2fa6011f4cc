/**
 * How many decode steps a call runs (decode-steps.ts chooseDecodeSteps): as many as the limits allow when
 * turns do not end by stops, fewer where the backend's past turns tended to end.
 */
import { describe, expect, it } from 'vitest';
import { HOP_STEPS, TurnLengths, chooseDecodeSteps } from '../../../engine/rollout/engine';
import { Rng } from '../../../engine/base/rng';

describe('decode steps per call', () => {
  it('takes the limit when no turn has ended by a stop (turns cut by limits only)', () => {
    const t = new TurnLengths();
    t.record(32, false);
    expect(chooseDecodeSteps([0, 5, 9], 8, t)).toBe(8);
    expect(chooseDecodeSteps([0, 5, 9], 3, t)).toBe(3);
    expect(chooseDecodeSteps([0], 1, t)).toBe(1);
  });

  it('stops where turns end: every turn 4 tokens long → 4 steps from a turn start, 1 from its third token', () => {
    const t = new TurnLengths();
    for (let i = 0; i < 10; i++) t.record(4, true);
    expect(t.hazard(4)).toBe(1);
    expect(t.hazard(3)).toBe(0);
    expect(chooseDecodeSteps([0, 0], 8, t)).toBe(4);
    expect(chooseDecodeSteps([2], 8, t)).toBe(2);
    // A row that already passed every recorded end (hazard 0 beyond) does not limit the others.
    expect(chooseDecodeSteps([0, 6], 8, t)).toBe(4);
  });

  it('maximises expected kept tokens per (K + HOP_STEPS): a constant hazard of 1/4 gives 2', () => {
    expect(HOP_STEPS).toBe(1);
    // Geometric turn lengths: a quarter of the turns reaching any length end there.
    const g = new TurnLengths();
    const r = new Rng(3);
    for (let i = 0; i < 20000; i++) {
      let m = 1;
      while (r.next() >= 0.25) m++;
      g.record(m, true);
    }
    expect(Math.abs(g.hazard(2) - 0.25)).toBeLessThan(0.02);
    // rate(K) = (1 − 0.75^K)/0.25/(K + 1): 0.5, 0.583, 0.578, ...
    expect(chooseDecodeSteps([0, 3], 8, g)).toBe(2);
  });

  it('decays old rollouts (halved per rollout) without changing a hazard that stays the same', () => {
    const t = new TurnLengths();
    t.record(3, true);
    t.record(5, false);
    t.decay();
    expect(t.hazard(3)).toBeCloseTo(0.5, 9);
    t.record(3, false);
    expect(t.hazard(3)).toBeCloseTo(0.5 / 2, 9);
  });
});
