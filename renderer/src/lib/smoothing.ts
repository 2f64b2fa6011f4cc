// Time-weighted exponential moving average, as W&B draws smoothed curves.
// The decay between two points depends on how far apart they are on the x axis, so a series
// with irregular steps (or one downsampled by the engine) smooths the same as a dense one, and
// the running average is debiased so the first points are not pulled towards zero.

/**
 * @param xs x values, non-decreasing (step or wall time)
 * @param ys y values; non-finite values are passed through as null and do not update the average
 * @param amount smoothing in [0, 1): 0 = none, 0.99 = heavy
 */
export function timeWeightedEma(xs: ArrayLike<number>, ys: ArrayLike<number | null>, amount: number): (number | null)[] {
  const n = Math.min(xs.length, ys.length);
  const out: (number | null)[] = new Array(n);
  if (!(amount > 0)) {
    for (let i = 0; i < n; i++) {
      const y = ys[i];
      out[i] = y == null || !Number.isFinite(y) ? null : y;
    }
    return out;
  }
  // One typical point spacing (the x range over the point count) decays by `weight`: a 20-step run
  // smooths as visibly as a 1500-point one (scaling by the whole range left short runs raw).
  const weight = Math.min(Math.sqrt(amount), 0.999);
  const spacing = n > 1 ? (xs[n - 1] - xs[0]) / (n - 1) : 0;
  let acc = 0;
  let debias = 0;
  let prevX = n > 0 ? xs[0] : 0;
  for (let i = 0; i < n; i++) {
    const y = ys[i];
    if (y == null || !Number.isFinite(y)) {
      out[i] = null;
      continue;
    }
    const dx = spacing > 0 ? (xs[i] - prevX) / spacing : 1;
    const w = Math.pow(weight, dx);
    acc = acc * w + y;
    debias = debias * w + 1;
    out[i] = acc / debias;
    prevX = xs[i];
  }
  return out;
}
