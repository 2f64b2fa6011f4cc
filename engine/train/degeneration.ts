/**
 * Collapse and degeneration detectors over a run's per-step series: response length rising,
 * truncations rising, format rate falling, repeated n-grams in model turns, entropy collapsing, KL
 * spiking. Each is flagged at the step where it starts (the first step of a sustained departure from
 * the run's own recent level), so the Run view and `arbor show` can point at the trajectories that
 * show it. Pure (no Node imports): the engine's runs.learning and the CLI share it.
 *
 * The rule, per detector: the baseline at step i is the median of the WINDOW points before it (at
 * least MIN_BASE of them); step i departs when the detector's test holds against that baseline; a
 * departure is flagged at its first step when it holds for SUSTAIN consecutive points (a spike
 * detector: one). A detector is flagged again only after it has stopped holding.
 */

type SeriesMap = Record<string, { step: number[]; value: (number | null)[] } | undefined>;

export const WINDOW = 10;
export const MIN_BASE = 3;
export const SUSTAIN = 2;

export interface Detector {
  kind: string;
  /** The metric keys it reads, the first present wins. */
  keys: string[];
  /** Whether value v departs from the baseline b. */
  departs(v: number, b: number): boolean;
  /** Points in a row the departure must last (1: a spike). */
  sustain: number;
  /** What is wrong, for the message. */
  describe(v: number, b: number, key: string): string;
}

const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
const num = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toPrecision(3));

export const DETECTORS: Detector[] = [
  {
    kind: 'length_rising',
    keys: ['response_length/mean'],
    departs: (v, b) => v >= b * 1.5 && v - b >= 8,
    sustain: SUSTAIN,
    describe: (v, b) => `response length rising: ${num(b)} → ${num(v)} tokens per episode`,
  },
  {
    kind: 'truncation_rising',
    keys: ['truncated_rate'],
    departs: (v, b) => v - b >= 0.2 && v >= 0.25,
    sustain: SUSTAIN,
    describe: (v, b) => `truncations rising: ${pct(b)} → ${pct(v)} of episodes cut at the limit`,
  },
  {
    kind: 'format_falling',
    keys: ['format_rate'],
    departs: (v, b) => b - v >= 0.15,
    sustain: SUSTAIN,
    describe: (v, b) => `format rate falling: ${pct(b)} → ${pct(v)}`,
  },
  {
    kind: 'repeated_ngrams',
    keys: ['repeat_ngram_rate'],
    departs: (v, b) => v - b >= 0.2 && v >= 0.25,
    sustain: SUSTAIN,
    describe: (v, b) => `repeated n-grams: ${pct(b)} → ${pct(v)} of episodes loop a phrase in a model turn`,
  },
  {
    kind: 'entropy_collapse',
    keys: ['entropy', 'actor/entropy'],
    departs: (v, b) => b > 0.05 && v <= b * 0.3,
    sustain: SUSTAIN,
    describe: (v, b, key) => `entropy collapsing (${key}): ${num(b)} → ${num(v)} nats`,
  },
  {
    kind: 'kl_spike',
    keys: ['actor/kl', 'kl'],
    departs: (v, b) => v >= Math.max(5 * Math.abs(b), Math.abs(b) + 0.05),
    sustain: 1,
    describe: (v, b, key) => `KL spike (${key}): ${num(v)} against ${num(b)} before`,
  },
];

/** Every metric key a detector may read (what a caller must load). */
export const DEGENERATION_KEYS = [...new Set(DETECTORS.flatMap((d) => d.keys))];

export interface Degeneration {
  kind: string;
  /** The step where it starts. */
  step: number;
  metric: string;
  /** The baseline before it and the value at its start. */
  before: number;
  value: number;
  message: string;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The detections of one detector over one series (step-sorted points with finite values). */
export function detect(d: Detector, key: string, points: { step: number; value: number }[]): Degeneration[] {
  const out: Degeneration[] = [];
  let inside = false;
  for (let i = MIN_BASE; i < points.length; i++) {
    const base = median(points.slice(Math.max(0, i - WINDOW), i).map((p) => p.value));
    const p = points[i]!;
    if (!d.departs(p.value, base)) {
      inside = false;
      continue;
    }
    if (inside) continue;
    // Sustained: the next sustain−1 points depart from the same baseline too (the series' end counts as holding).
    let holds = true;
    for (let k = 1; k < d.sustain && i + k < points.length; k++) if (!d.departs(points[i + k]!.value, base)) holds = false;
    if (!holds) continue;
    inside = true;
    out.push({ kind: d.kind, step: p.step, metric: key, before: base, value: p.value, message: `step ${p.step}: ${d.describe(p.value, base, key)}` });
  }
  return out;
}

/** Every detection over a run's series, by step. */
export function degenerations(series: SeriesMap): Degeneration[] {
  const out: Degeneration[] = [];
  for (const d of DETECTORS) {
    const key = d.keys.find((k) => series[k]?.step.length);
    if (!key) continue;
    const s = series[key]!;
    const points = s.step
      .map((step, i) => ({ step, value: s.value[i] }))
      .filter((p): p is { step: number; value: number } => p.value != null && Number.isFinite(p.value) && p.step >= 0)
      .sort((a, b) => a.step - b.step);
    out.push(...detect(d, key, points));
  }
  return out.sort((a, b) => a.step - b.step || a.kind.localeCompare(b.kind));
}
