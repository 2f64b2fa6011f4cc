// Colour scales of the token heat map. Each channel maps a per-token value to a background:
//  logprob   sequential, confident (≈0) transparent → unlikely (≤ -6) red
//  entropy   sequential, 0 transparent → high (≥ 3 nats) amber
//  advantage diverging around 0: negative red, positive green, scaled by the largest |A| in view
//  kl        per-token log(π/π_ref) = logprob - ref_logprob, diverging, scaled by max |value|

export const CHANNELS = ['logprob', 'entropy', 'advantage', 'kl'] as const;
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
}

export function channelValue(v: TokenValues, c: Channel, i: number): number | null {
  const pick = (a?: ArrayLike<number> | null) => (a && i < a.length && Number.isFinite(a[i]) ? a[i] : null);
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
  }
}

/** The scale used to normalise diverging channels: max |value| across the given turns. */
export function channelScale(turns: TokenValues[], c: Channel, count: (t: TokenValues) => number): number {
  if (c === 'logprob') return 6;
  if (c === 'entropy') return 3;
  let m = 0;
  for (const t of turns) {
    const n = count(t);
    for (let i = 0; i < n; i++) {
      const x = channelValue(t, c, i);
      if (x != null) m = Math.max(m, Math.abs(x));
    }
  }
  return m > 0 ? m : 1;
}

/** CSS background for a value, or '' when there is none. */
export function heatColor(c: Channel, value: number | null, scale: number): string {
  if (value == null) return '';
  if (c === 'logprob') {
    const a = Math.min(1, Math.max(0, -value / scale));
    return a < 0.02 ? '' : `rgba(255, 80, 80, ${(0.75 * a).toFixed(3)})`;
  }
  if (c === 'entropy') {
    const a = Math.min(1, Math.max(0, value / scale));
    return a < 0.02 ? '' : `rgba(245, 180, 60, ${(0.75 * a).toFixed(3)})`;
  }
  const a = Math.min(1, Math.abs(value) / scale);
  if (a < 0.02) return '';
  return value > 0 ? `rgba(80, 210, 130, ${(0.7 * a).toFixed(3)})` : `rgba(255, 80, 80, ${(0.7 * a).toFixed(3)})`;
}

export function rampCss(c: Channel): string {
  if (c === 'logprob') return 'linear-gradient(90deg, rgba(255,80,80,.75), transparent)';
  if (c === 'entropy') return 'linear-gradient(90deg, transparent, rgba(245,180,60,.75))';
  return 'linear-gradient(90deg, rgba(255,80,80,.7), transparent, rgba(80,210,130,.7))';
}
