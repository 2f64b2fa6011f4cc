import { describe, expect, it } from 'vitest';
import { timeWeightedEma } from '../../renderer/src/lib/smoothing';
import { configDiff, flattenConfig } from '../../renderer/src/lib/configDiff';
import { channelScale, channelValue, heatColor, neutralNote, nextChannel, CHANNELS, HEAT } from '../../renderer/src/lib/heat';
import { oddSamples } from '../../renderer/src/lib/group';
import { defaultsOf, fieldKind, setPath, unwrap, type JsonSchema } from '../../renderer/src/lib/jsonSchema';
import { alignSeries } from '../../renderer/src/lib/align';
// The engine's built-in entries register themselves (as cli/main.ts and server/engine.ts load them).
import '../../engine/builtins';
import { experimentJsonSchema, validateConfig } from '../../engine/config/experiment';

describe('time-weighted EMA', () => {
  it('is the identity with no smoothing and keeps gaps', () => {
    expect(timeWeightedEma([0, 1, 2], [1, null, 3], 0)).toEqual([1, null, 3]);
  });
  it('is debiased: a constant series stays constant', () => {
    const ys = timeWeightedEma([0, 1, 2, 3, 10], [5, 5, 5, 5, 5], 0.9);
    for (const y of ys) expect(y).toBeCloseTo(5, 12);
  });
  it('lags a step change and converges towards the new level', () => {
    const xs = Array.from({ length: 200 }, (_, i) => i);
    const ys = xs.map((x) => (x < 100 ? 0 : 1));
    const s = timeWeightedEma(xs, ys, 0.6) as number[];
    expect(s[100]).toBeGreaterThan(0);
    expect(s[100]).toBeLessThan(1);
    expect(s[199]).toBeGreaterThan(s[120]);
    expect(s[199]).toBeGreaterThan(0.99);
  });
  it('weights by x distance: a point after a long gap forgets more of the past', () => {
    const dense = timeWeightedEma([0, 1, 2], [0, 0, 1], 0.9) as number[];
    const gapped = timeWeightedEma([0, 1, 100], [0, 0, 1], 0.9) as number[];
    expect(gapped[2]).toBeGreaterThan(dense[2]);
  });
  it('visibly smooths a short run at the default amount (0.6)', () => {
    const xs = Array.from({ length: 20 }, (_, i) => i + 1);
    const ys = xs.map((x) => (x % 2 ? 1 : 0));
    const s = timeWeightedEma(xs, ys, 0.6) as number[];
    // The raw curve alternates 0/1; the smoothed one stays well inside.
    for (const y of s.slice(5)) expect(Math.abs(y - 0.5)).toBeLessThan(0.2);
  });
  it('skips non-finite values without poisoning the average', () => {
    const s = timeWeightedEma([0, 1, 2], [1, Number.NaN, 1], 0.5);
    expect(s[1]).toBeNull();
    expect(s[2]).toBeCloseTo(1, 12);
  });
});

describe('config diff', () => {
  it('keeps only paths that differ, including ones missing from some configs', () => {
    const rows = configDiff([
      { algo: { adv: 'grpo', lr: 1e-5 }, seed: 1, model: { init: 'tiny' } },
      { algo: { adv: 'rloo', lr: 1e-5 }, seed: 1, model: { init: 'tiny' }, extra: true },
    ]);
    expect(rows.map((r) => r.path)).toEqual(['algo.adv', 'extra']);
    expect(rows[1].values).toEqual([undefined, true]);
  });
  it('compares arrays by value', () => {
    expect(configDiff([{ hops: [1, 2] }, { hops: [1, 2] }])).toEqual([]);
    expect(configDiff([{ hops: [1, 2] }, { hops: [1, 3] }])[0].path).toBe('hops');
  });
  it('flattens nested objects to dotted paths', () => {
    expect(flattenConfig({ a: { b: { c: 1 } }, d: [1] })).toEqual({ 'a.b.c': 1, d: [1] });
  });
});

describe('token heat map channels', () => {
  const turn = { logprob: [-0.1, -5], refLogprob: [-0.2, -4], entropy: [0.5, 2], advantage: [0.7, 0.7] };
  it('computes KL per token as logprob minus reference logprob', () => {
    expect(channelValue(turn, 'kl', 0)).toBeCloseTo(0.1, 12);
    expect(channelValue(turn, 'kl', 1)).toBeCloseTo(-1, 12);
    expect(channelValue({ logprob: [-1] }, 'kl', 0)).toBeNull();
  });
  it('colours unlikely tokens more strongly and leaves missing values blank', () => {
    expect(heatColor('logprob', -0.001, 6)).toBe('');
    expect(heatColor('logprob', -5, 6)).toMatch(/^rgba\(209, 66, 66/);
    expect(heatColor('entropy', null, 3)).toBe('');
  });
  it('is diverging for advantage, scaled by the largest magnitude', () => {
    const scale = channelScale([{ advantage: [0.5, -2] }], 'advantage', () => 2);
    expect(scale).toBe(2);
    expect(heatColor('advantage', 0.5, scale)).toMatch(/^rgba\(40, 119, 228/);
    expect(heatColor('advantage', -2, scale)).toMatch(/^rgba\(189, 98, 16, 0\.700/);
  });
  it('keeps the token text at 4.5:1 or more on every heat colour at full strength (WCAG AA), over every panel background', () => {
    const lin = (v: number) => (v / 255 <= 0.03928 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4);
    const lum = ([r, g, b]: readonly number[]) => 0.2126 * lin(r!) + 0.7152 * lin(g!) + 0.0722 * lin(b!);
    const hex = (h: string) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16));
    const text = lum(hex('#d7dce4'));
    for (const [name, [r, g, b, a]] of Object.entries(HEAT))
      for (const bg of ['#14161b', '#1b1e25', '#21252e', '#1c2432'].map(hex)) {
        const mixed = [r, g, b].map((c, i) => a * c + (1 - a) * bg[i]!);
        expect((text + 0.05) / (lum(mixed) + 0.05), name).toBeGreaterThanOrEqual(4.5);
      }
    // Opposite signs are told apart by hue without red/green: orange against blue.
    const [nr, , nb] = HEAT.negative;
    const [pr, , pb] = HEAT.positive;
    expect(nr > nb && pb > pr).toBe(true);
  });
  it('cycles through all channels with c', () => {
    let c: (typeof CHANNELS)[number] = CHANNELS[0];
    const seen = new Set<string>([c]);
    for (let i = 0; i < CHANNELS.length; i++) seen.add((c = nextChannel(c)));
    expect(c).toBe(nextChannel(CHANNELS[CHANNELS.length - 1]));
    expect(seen.size).toBe(CHANNELS.length);
  });
});

describe('form generation from the real experiment config schema', () => {
  const schema = experimentJsonSchema() as JsonSchema;
  it('understands the nested sections and field kinds', () => {
    const root = unwrap(schema, schema);
    expect(fieldKind(root, schema)).toBe('object');
    const rollout = unwrap(root.properties!.rollout, schema);
    expect(fieldKind(rollout, schema)).toBe('object');
    expect(fieldKind(rollout.properties!.n, schema)).toBe('integer');
    const task = unwrap(root.properties!.task, schema);
    expect(fieldKind(task.properties!.kind, schema)).toBe('enum');
    expect(fieldKind(task.properties!.hops, schema)).toBe('scalar-array');
  });
  it('starts from defaults that, with the one required choice made, validate in the engine', () => {
    const d = defaultsOf(schema) as Record<string, unknown>;
    const withModel = setPath(d, ['model', 'init'], 'tiny');
    expect(() => validateConfig(withModel)).not.toThrow();
  });
  it('setPath copies instead of mutating and deletes on undefined', () => {
    const a = { x: { y: 1, z: 2 } };
    const b = setPath(a, ['x', 'y'], undefined);
    expect(a.x.y).toBe(1);
    expect(b).toEqual({ x: { z: 2 } });
  });
});

describe('chart alignment', () => {
  it('merges series with different steps onto one x axis with gaps', () => {
    const [xs, a, b] = alignSeries([
      { xs: [0, 2], ys: [1, 3] },
      { xs: [1, 2], ys: [10, 20] },
    ]);
    expect(xs).toEqual([0, 1, 2]);
    expect(a).toEqual([1, null, 3]);
    expect(b).toEqual([null, 10, 20]);
  });
});

describe('heat map auto range and the group view odd ones out', () => {
  it('scales a channel by the trajectory’s own largest magnitude when asked (entropy of a tiny model), but never the clipped categories', () => {
    const turns = [{ entropy: [0.01, 0.04, 0.02], ratio: [1, 1.1, 0.95], clipped: [0, 1, -1] }];
    const n = () => 3;
    expect(channelScale(turns, 'entropy', n)).toBe(3);
    expect(channelScale(turns, 'entropy', n, true)).toBeCloseTo(0.04, 12);
    expect(channelScale(turns, 'ratio', n, true)).toBeCloseTo(0.1, 9);
    expect(channelScale(turns, 'clipped', n, true)).toBe(1);
    // Nothing recorded: the absolute scale stays.
    expect(channelScale([{}], 'entropy', n, true)).toBe(3);
    expect(heatColor('entropy', 0.04, channelScale(turns, 'entropy', n, true))).toMatch(/0\.750\)$/);
  });
  it('marks the samples whose reward is unlike the group’s most common one', () => {
    expect([...oddSamples([0, 0, 0, 1, 0, 0, 0, 0])]).toEqual([3]);
    expect([...oddSamples([1, 1, 0, 1])]).toEqual([2]);
    expect([...oddSamples([1, 1, 0, 0])]).toEqual([]);
    expect([...oddSamples([0.5, 0.5, 0.5])]).toEqual([]);
    expect([...oddSamples([0, 0, 1, 0.5])]).toEqual([2, 3]);
  });
});

describe('chart units', () => {
  it('reads a reward component as a reward whatever its name (reward/length is not in tokens)', async () => {
    // uPlot (imported with the chart) reads the device pixel ratio through matchMedia, which jsdom lacks.
    (window as { matchMedia?: unknown }).matchMedia ??= () => ({
      matches: false,
      addListener() {},
      removeListener() {},
      addEventListener() {},
      removeEventListener() {},
    });
    const { unitOf } = await import('../../renderer/src/components/MetricChart');
    expect(unitOf('reward/length')).toBe('reward');
    expect(unitOf('reward/mean')).toBe('reward');
    expect(unitOf('response_length/mean')).toBe('tokens');
    expect(unitOf('time/rollout_s')).toBe('s');
  });
});

describe('channel notes', () => {
  it('says why a channel with values draws nothing: neutral by design', () => {
    const t = (o: Record<string, number[]>) => [{ tokens: ['a', 'b'], lossMask: [1, 1], ...o }];
    expect(neutralNote(t({ ratio: [1, 1] }), 'ratio')).toMatch(/every ratio is 1/);
    expect(neutralNote(t({ ratio: [1, 1.2] }), 'ratio')).toBeNull();
    expect(neutralNote(t({ clipped: [0, 0] }), 'clipped')).toMatch(/no token .* was clipped/);
    expect(neutralNote(t({ clipped: [0, 1] }), 'clipped')).toBeNull();
    expect(neutralNote(t({ advantage: [0, 0] }), 'advantage')).toMatch(/every advantage is 0/);
    expect(neutralNote(t({}), 'ratio')).toBeNull();
  });
});
