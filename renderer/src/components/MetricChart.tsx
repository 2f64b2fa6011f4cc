// One metric chart: any number of series (one per run in Compare), each drawn smoothed with the
// raw curve faint behind it, and a hover legend with the values at the cursor. uPlot draws to a
// canvas, so thousands of points per series stay cheap; the engine already downsamples to ~1.5k.
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { timeWeightedEma } from '../lib/smoothing';
import { alignSeries } from '../lib/align';
import { fmt } from '../lib/format';
export { fmt };

export interface ChartSeries {
  label: string;
  xs: number[];
  ys: (number | null)[];
  color: string;
}

export const PALETTE = ['#5aa9ff', '#ff8a5b', '#6dd39a', '#d98cff', '#f5d76e', '#ff6b8b', '#4fd1c5', '#b0b7c3'];

export function MetricChart({ title, series, smoothing, height = 180 }: { title: string; series: ChartSeries[]; smoothing: number; height?: number }) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((s) => s.label).join('|') + `|${smoothing > 0}`;

  // Build the plot when the set of series changes; later data updates go through setData.
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const uSeries: uPlot.Series[] = [{ label: 'step' }];
    for (const s of series) {
      if (smoothing > 0) uSeries.push({ label: `${s.label} (raw)`, stroke: s.color + '40', width: 1, spanGaps: true, show: true });
      uSeries.push({ label: s.label, stroke: s.color, width: 1.5, spanGaps: true, value: (_u, v) => (v == null ? '—' : fmt(v)) });
    }
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      series: uSeries,
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: false } },
      axes: [
        { stroke: '#8a93a3', grid: { stroke: '#2a2f3a', width: 1 }, ticks: { stroke: '#2a2f3a' } },
        { stroke: '#8a93a3', grid: { stroke: '#2a2f3a', width: 1 }, ticks: { stroke: '#2a2f3a' }, size: 56, values: (_u, vals) => vals.map((v) => fmt(v)) },
      ],
    };
    plot.current = new uPlot(opts, buildData(series, smoothing), el);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shape, height]);

  useEffect(() => {
    plot.current?.setData(buildData(series, smoothing) as uPlot.AlignedData);
  }, [series, smoothing]);

  const last = series.map((s) => lastFinite(s.ys));
  return (
    <div className="chart" data-testid={`chart-${title}`}>
      <div className="chart-title">
        <span>{title}</span>
        <span className="chart-last" data-testid="chart-points">
          {series.length === 1 ? `${series[0].xs.length} pts · last ${last[0] == null ? '—' : fmt(last[0])}` : `${series.length} runs`}
        </span>
      </div>
      <div ref={host} />
    </div>
  );
}

function buildData(series: ChartSeries[], smoothing: number): uPlot.AlignedData {
  const cols: { xs: number[]; ys: (number | null)[] }[] = [];
  for (const s of series) {
    if (smoothing > 0) cols.push({ xs: s.xs, ys: s.ys });
    cols.push({ xs: s.xs, ys: smoothing > 0 ? timeWeightedEma(s.xs, s.ys, smoothing) : s.ys });
  }
  return alignSeries(cols) as unknown as uPlot.AlignedData;
}

function lastFinite(ys: (number | null)[]): number | null {
  for (let i = ys.length - 1; i >= 0; i--) if (ys[i] != null && Number.isFinite(ys[i])) return ys[i];
  return null;
}

