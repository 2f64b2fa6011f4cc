/**
 * Statistics over a group of runs (seed sweeps): mean, sample standard deviation, min/max and a
 * percentile-bootstrap 95% interval of the mean; the difference of two groups' means with its
 * bootstrap interval; a t-interval of the mean per step for the Compare view's bands.
 * Hand-written (tiny); no Node imports, so the renderer may use it too.
 */
import { Rng } from '../base/rng';

export interface Summary {
  n: number;
  mean: number;
  sd: number;
  min: number;
  max: number;
  /** 95% bootstrap interval of the mean (percentile method); equal to the mean for n = 1. */
  lo: number;
  hi: number;
}

export const BOOTSTRAP_RESAMPLES = 2000;

export function mean(xs: readonly number[]): number {
  return xs.length ? xs.reduce((a, x) => a + x, 0) / xs.length : NaN;
}

/** Sample standard deviation (n − 1); 0 for one value. */
export function sd(xs: readonly number[]): number {
  if (xs.length < 2) return xs.length ? 0 : NaN;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
}

/** The q-quantile of sorted values, linear between order statistics (numpy's default). */
export function quantile(sorted: readonly number[], q: number): number {
  if (!sorted.length) return NaN;
  const pos = (sorted.length - 1) * q;
  const i = Math.floor(pos);
  const f = pos - i;
  return i + 1 < sorted.length ? sorted[i]! * (1 - f) + sorted[i + 1]! * f : sorted[i]!;
}

function resampleMeans(xs: readonly number[], rng: Rng, b: number): Float64Array {
  const out = new Float64Array(b);
  const n = xs.length;
  for (let r = 0; r < b; r++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += xs[Math.floor(rng.next() * n)]!;
    out[r] = s / n;
  }
  return out;
}

/** Mean, sd, min/max and the bootstrap 95% interval of the mean of finite values (seeded: the same input gives the same interval). */
export function summarize(values: readonly number[], opts: { resamples?: number; seed?: number } = {}): Summary {
  const xs = values.filter((v) => Number.isFinite(v));
  const n = xs.length;
  if (n === 0) return { n: 0, mean: NaN, sd: NaN, min: NaN, max: NaN, lo: NaN, hi: NaN };
  const m = mean(xs);
  const boot = Array.from(resampleMeans(xs, new Rng(opts.seed ?? 12345), opts.resamples ?? BOOTSTRAP_RESAMPLES)).sort((a, b) => a - b);
  return { n, mean: m, sd: sd(xs), min: Math.min(...xs), max: Math.max(...xs), lo: quantile(boot, 0.025), hi: quantile(boot, 0.975) };
}

/** Difference of means (b − a) with a 95% bootstrap interval, each group resampled on its own. */
export function diffOfMeans(
  a: readonly number[],
  b: readonly number[],
  opts: { resamples?: number; seed?: number } = {},
): { diff: number; lo: number; hi: number; na: number; nb: number } {
  const xa = a.filter((v) => Number.isFinite(v));
  const xb = b.filter((v) => Number.isFinite(v));
  if (!xa.length || !xb.length) return { diff: NaN, lo: NaN, hi: NaN, na: xa.length, nb: xb.length };
  const B = opts.resamples ?? BOOTSTRAP_RESAMPLES;
  const rng = new Rng(opts.seed ?? 54321);
  const ma = resampleMeans(xa, rng, B);
  const mb = resampleMeans(xb, rng, B);
  const d = Array.from(mb, (v, i) => v - ma[i]!).sort((x, y) => x - y);
  return { diff: mean(xb) - mean(xa), lo: quantile(d, 0.025), hi: quantile(d, 0.975), na: xa.length, nb: xb.length };
}

// Two-sided 95% Student t quantiles for 1..30 degrees of freedom; 1.96 beyond.
const T95 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069,
  2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/** 95% t-interval of the mean (a band per step: cheap enough for every point of every chart). */
export function tInterval(xs: readonly number[]): { mean: number; lo: number; hi: number; n: number } {
  const v = xs.filter((x) => Number.isFinite(x));
  const m = mean(v);
  if (v.length < 2) return { mean: m, lo: m, hi: m, n: v.length };
  const half = (T95[v.length - 2] ?? 1.96) * (sd(v) / Math.sqrt(v.length));
  return { mean: m, lo: m - half, hi: m + half, n: v.length };
}

/**
 * Per-step mean and 95% t-interval over several runs' series of one metric: at each step, the runs
 * that logged it (steps are aligned exactly; downsampled series keep the same step grid per run).
 */
export function bandSeries(runs: readonly { step: readonly number[]; value: readonly (number | null)[] }[]): {
  step: number[];
  mean: (number | null)[];
  lo: (number | null)[];
  hi: (number | null)[];
  n: number[];
} {
  const at = new Map<number, number[]>();
  for (const r of runs)
    r.step.forEach((s, i) => {
      const v = r.value[i];
      if (v == null || !Number.isFinite(v)) return;
      const a = at.get(s);
      if (a) a.push(v);
      else at.set(s, [v]);
    });
  const steps = [...at.keys()].sort((a, b) => a - b);
  const out = { step: steps, mean: [] as (number | null)[], lo: [] as (number | null)[], hi: [] as (number | null)[], n: [] as number[] };
  for (const s of steps) {
    const t = tInterval(at.get(s)!);
    out.mean.push(t.mean);
    out.lo.push(t.lo);
    out.hi.push(t.hi);
    out.n.push(t.n);
  }
  return out;
}
