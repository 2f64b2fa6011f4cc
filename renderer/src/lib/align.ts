// uPlot wants all series on one x array.
/** Merge series with different x values onto one sorted x axis (uPlot wants aligned data). */
export function alignSeries(series: { xs: number[]; ys: (number | null)[] }[]): [number[], ...(number | null)[][]] {
  const all = new Set<number>();
  for (const s of series) for (const x of s.xs) all.add(x);
  const xs = [...all].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const cols = series.map((s) => {
    const col: (number | null)[] = new Array(xs.length).fill(null);
    s.xs.forEach((x, i) => (col[index.get(x)!] = s.ys[i]));
    return col;
  });
  return [xs, ...cols];
}
