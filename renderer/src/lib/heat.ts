// Colour scales of the token heat map. Each channel maps a per-token value to a background on
// an absolute scale (the same for every trajectory, numbered in the legend), so a uniform 0.54
// advantage looks weaker than a 2.47 one:
//  logprob      sequential, confident (0) transparent → unlikely (≤ −6) red
//  entropy      sequential, 0 transparent → high (≥ 3 nats) amber
//  advantage    diverging around 0 (±2): negative orange, positive blue (told apart with any
//               colour vision, unlike red/green); adv-outcome and
//  adv-process  its outcome and process parts (same scale)
//  kl           per-token log(π/π_ref) = logprob − ref_logprob, diverging (±1)
//  ratio        importance ratio π/π_old at the update, diverging around 1 (0.5 … 1.5)
//  clipped      which bound cut the token's gradient: upper (violet), lower (blue), dual clip (orange)
//  weight       the token's weight in the aggregated loss (loss_agg_mode), sequential from 0 to the
//               largest weight of the trajectory (numbered: the legend says which)
//  value        the critic's value (PPO), diverging (±1)
//  teacher      algorithm.distill: the teacher's logprob of the token, as logprob
//  teacher-kl   log π_student − log π_teacher per token (the reverse KL estimate the distillation
//               advantage is minus), diverging (±1)

export const CHANNELS = [
  'logprob',
  'entropy',
  'advantage',
  'kl',
  'ratio',
  'clipped',
  'weight',
  'value',
  'adv-outcome',
  'adv-process',
  'teacher',
  'teacher-kl',
] as const;
export type Channel = (typeof CHANNELS)[number];

export function nextChannel(c: Channel): Channel {
  return CHANNELS[(CHANNELS.indexOf(c) + 1) % CHANNELS.length];
}

/** Per-token arrays of one turn; missing arrays mean the value was not recorded. */
export interface TokenValues {
  logprob?: ArrayLike<number> | null;
  refLogprob?: ArrayLike<number> | null;
  entropy?: ArrayLike<number> | null;
  advantage?: ArrayLike<number> | null;
  ratio?: ArrayLike<number> | null;
  clipped?: ArrayLike<number> | null;
  lossWeight?: ArrayLike<number> | null;
  value?: ArrayLike<number> | null;
  advOutcome?: ArrayLike<number> | null;
  advProcess?: ArrayLike<number> | null;
  teacherLogprob?: ArrayLike<number> | null;
  lossMask?: ArrayLike<number> | null;
}

/** Channels that only exist on tokens the model generated (loss mask 1). */
const TRAINED: ReadonlySet<Channel> = new Set(['ratio', 'clipped', 'weight', 'adv-outcome', 'adv-process', 'teacher', 'teacher-kl']);

export function channelValue(v: TokenValues, c: Channel, i: number): number | null {
  const pick = (a?: ArrayLike<number> | null) => (a && i < a.length && Number.isFinite(a[i]) ? a[i] : null);
  if (TRAINED.has(c) && v.lossMask && v.lossMask[i] === 0) return null;
  switch (c) {
    case 'logprob':
      return pick(v.logprob);
    case 'entropy':
      return pick(v.entropy);
    case 'advantage':
      return pick(v.advantage);
    case 'kl': {
      const lp = pick(v.logprob);
      const ref = pick(v.refLogprob);
      return lp == null || ref == null ? null : lp - ref;
    }
    case 'ratio':
      return pick(v.ratio);
    case 'clipped':
      return pick(v.clipped);
    case 'weight':
      return pick(v.lossWeight);
    case 'value':
      return pick(v.value);
    case 'adv-outcome':
      return pick(v.advOutcome);
    case 'adv-process':
      return pick(v.advProcess);
    case 'teacher':
      return pick(v.teacherLogprob);
    case 'teacher-kl': {
      const lp = pick(v.logprob);
      const t = pick(v.teacherLogprob);
      return lp == null || t == null ? null : lp - t;
    }
  }
}

/** Fixed scales: the value at which the colour saturates. */
const FIXED: Partial<Record<Channel, number>> = {
  logprob: 6,
  teacher: 6,
  'teacher-kl': 1,
  entropy: 3,
  advantage: 2,
  'adv-outcome': 2,
  'adv-process': 2,
  kl: 1,
  ratio: 0.5,
  clipped: 1,
  value: 1,
};

/**
 * The scale of a channel: fixed (absolute) for all but `weight`, whose scale is its largest value in
 * the given turns. `auto` (the view's "auto range"): every channel but `clipped` (three categories)
 * scaled by its largest magnitude in the given turns instead (for ratio, the largest |ratio − 1|), so
 * a tiny model's entropy of 0.05 nats is not lost on the 0–3 scale; the legend's numbers say which.
 */
export function channelScale(turns: TokenValues[], c: Channel, count: (t: TokenValues) => number, auto = false): number {
  const fixed = FIXED[c];
  if (fixed !== undefined && !(auto && c !== 'clipped')) return fixed;
  let m = 0;
  for (const t of turns) {
    const n = count(t);
    for (let i = 0; i < n; i++) {
      const x = channelValue(t, c, i);
      if (x != null) m = Math.max(m, Math.abs(c === 'ratio' ? x - 1 : x));
    }
  }
  return m > 0 ? m : (fixed ?? 1);
}

/** The numbers written under the legend's ramp: low end, middle, high end. */
export function scaleTicks(c: Channel, scale: number): [string, string, string] {
  const f = (x: number) => (Math.abs(x) >= 0.01 || x === 0 ? String(+x.toFixed(2)) : x.toExponential(1));
  if (c === 'logprob' || c === 'teacher') return [`≤ −${f(scale)}`, `−${f(scale / 2)}`, '0'];
  if (c === 'entropy') return ['0', f(scale / 2), `≥ ${f(scale)}`];
  if (c === 'ratio') return [`≤ ${f(1 - scale)}`, '1', `≥ ${f(1 + scale)}`];
  if (c === 'clipped') return ['lower', 'none', 'upper · dual'];
  if (c === 'weight') return ['0', f(scale / 2), f(scale)];
  return [`≤ −${f(scale)}`, '0', `≥ ${f(scale)}`];
}

/**
 * The heat colours. Each is dark enough that the token text (#d7dce4) keeps at least 4.5:1 (WCAG AA)
 * on it at full saturation, over any of the panels' backgrounds (tests/renderer/lib.test.ts checks).
 * The diverging channels go orange (negative) to blue (positive): a pair that stays apart under
 * protanopia, deuteranopia and tritanopia, where red/green does not.
 */
export const HEAT = {
  unlikely: [209, 66, 66, 0.75],
  entropy: [147, 108, 36, 0.75],
  upper: [144, 94, 217, 0.7],
  lower: [64, 120, 204, 0.7],
  dual: [168, 99, 26, 0.75],
  weight: [85, 121, 181, 0.7],
  negative: [189, 98, 16, 0.7],
  positive: [40, 119, 228, 0.7],
} as const satisfies Record<string, readonly [number, number, number, number]>;
type Heat = keyof typeof HEAT;
const rgba = (h: Heat, a = 1) => `rgba(${HEAT[h][0]}, ${HEAT[h][1]}, ${HEAT[h][2]}, ${(HEAT[h][3] * a).toFixed(3)})`;

/** CSS background for a value, or '' when there is none. */
export function heatColor(c: Channel, value: number | null, scale: number): string {
  if (value == null) return '';
  if (c === 'logprob' || c === 'teacher') {
    const a = Math.min(1, Math.max(0, -value / scale));
    return a < 0.02 ? '' : rgba('unlikely', a);
  }
  if (c === 'entropy') {
    const a = Math.min(1, Math.max(0, value / scale));
    return a < 0.02 ? '' : rgba('entropy', a);
  }
  if (c === 'clipped') {
    if (value === 1) return rgba('upper');
    if (value === -1) return rgba('lower');
    if (value === 2) return rgba('dual');
    return '';
  }
  if (c === 'weight') {
    const a = Math.min(1, Math.max(0, value / scale));
    return a < 0.02 ? '' : rgba('weight', a);
  }
  const d = c === 'ratio' ? value - 1 : value;
  const a = Math.min(1, Math.abs(d) / scale);
  if (a < 0.02) return '';
  return rgba(d > 0 ? 'positive' : 'negative', a);
}

export function rampCss(c: Channel): string {
  if (c === 'logprob' || c === 'teacher') return `linear-gradient(90deg, ${rgba('unlikely')}, transparent)`;
  if (c === 'entropy') return `linear-gradient(90deg, transparent, ${rgba('entropy')})`;
  if (c === 'clipped') return `linear-gradient(90deg, ${rgba('lower')} 33%, transparent 33% 66%, ${rgba('upper')} 66% 83%, ${rgba('dual')} 83%)`;
  if (c === 'weight') return `linear-gradient(90deg, transparent, ${rgba('weight')})`;
  return `linear-gradient(90deg, ${rgba('negative')}, transparent, ${rgba('positive')})`;
}

/**
 * Why a channel that has values draws nothing: every value is the neutral one by design (a ratio of 1
 * when the update saw the sampling weights, no clipped token, a zero advantage in a flat group); null otherwise.
 */
export function neutralNote(turns: (TokenValues & { tokens: ArrayLike<unknown> })[], c: Channel): string | null {
  const vals: number[] = [];
  for (const u of turns)
    for (let i = 0; i < u.tokens.length; i++) {
      const v = channelValue(u, c, i);
      if (v != null) vals.push(v);
    }
  if (!vals.length) return null;
  if (c === 'ratio' && vals.every((v) => Math.abs(v - 1) < 1e-6))
    return 'every ratio is 1: the update saw the weights that sampled these tokens (on-policy: one PPO epoch, one mini-batch), so there is nothing to colour';
  if (c === 'clipped' && vals.every((v) => v === 0)) return 'no token of this trajectory was clipped (every ratio within the clip range)';
  if ((c === 'advantage' || c === 'adv-outcome' || c === 'adv-process') && vals.every((v) => v === 0))
    return 'every advantage is 0: no learning signal for this trajectory (e.g. a flat group)';
  return null;
}
