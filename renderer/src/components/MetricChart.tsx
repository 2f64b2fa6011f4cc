// One metric chart: any number of series (one per run in Compare), each drawn smoothed with the
// raw curve faint behind it, and a hover legend with the values at the cursor. uPlot draws to a
// canvas, so thousands of points per series stay cheap; the engine already downsamples to ~1.5k.
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './metric-chart.css';
import { timeWeightedEma } from '../lib/smoothing';
import { alignSeries } from '../lib/align';
import { fmt } from '../lib/format';
export { fmt };

export interface ChartSeries {
  label: string;
  xs: number[];
  ys: (number | null)[];
  color: string;
  /** An interval around the line (a group's 95% interval of the mean per step), drawn as a shaded band. */
  band?: { lo: (number | null)[]; hi: (number | null)[] };
}

/** The unit a metric's values are in, from its key (for the y axis label); '' when it has none. */
export function unitOf(key: string): string {
  const k = key.toLowerCase();
  // A reward component is a reward whatever its name says (reward/length is not in tokens).
  if (/^(eval\/)?reward\//.test(k)) return 'reward';
  if (/tokens_per_s$/.test(k)) return 'tokens/s';
  if (/^time\/|_s$|seconds/.test(k)) return 's';
  if (/_ms$/.test(k)) return 'ms';
  if (/length|_tokens$|tokens\/|model_tokens/.test(k)) return 'tokens';
  if (/per_episode/.test(k)) return 'per episode';
  if (/rate|fraction|share|exact_match|pass@|mean@|format|accuracy|zero_variance/.test(k)) return 'fraction';
  if (/(^|\/)lr$/.test(k)) return 'learning rate';
  if (/reward|advantage/.test(k)) return 'reward';
  return '';
}

export const PALETTE = ['#5aa9ff', '#ff8a5b', '#6dd39a', '#d98cff', '#f5d76e', '#ff6b8b', '#4fd1c5', '#b0b7c3'];

export function MetricChart({
  title,
  series,
  smoothing,
  height = 180,
  aliases,
  syncKey,
  onPick,
  pickHint,
}: {
  title: string;
  series: ChartSeries[];
  smoothing: number;
  height?: number;
  /** Other metric keys with the same curve, drawn here once. */
  aliases?: string[];
  /** Charts with the same key move one cursor together (uPlot's cursor sync): hover one, read all at that step. */
  syncKey?: string;
  /** A click on the plot (not a drag-zoom) picks the step under the cursor. */
  onPick?: (step: number) => void;
  /** What a click does, for the tooltip. */
  pickHint?: string;
}) {
  const pick = useRef(onPick);
  pick.current = onPick;
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = series.map((s) => `${s.label}${s.band ? '+band' : ''}`).join('|') + `|${smoothing > 0}`;
  const bands = series.filter((s) => s.band).length;
  const unit = unitOf(title);

  // Build the plot when the set of series changes; later data updates go through setData.
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const uSeries: uPlot.Series[] = [{ label: 'step' }];
    const uBands: uPlot.Band[] = [];
    // Legend rows that are not a run's value: the faint raw curves and the band edges.
    const hidden = new Set<number>();
    for (const s of series) {
      if (smoothing > 0) {
        hidden.add(uSeries.length);
        uSeries.push({ label: `${s.label} (raw)`, stroke: s.color + '40', width: 1, spanGaps: true, show: true });
      }
      uSeries.push({ label: s.label, stroke: s.color, width: 1.5, spanGaps: true, value: (_u, v) => (v == null ? '—' : fmt(v)) });
      if (s.band) {
        const hi = uSeries.length;
        hidden.add(hi).add(hi + 1);
        uSeries.push({ label: `${s.label} (95% hi)`, stroke: s.color + '00', width: 0, spanGaps: true, points: { show: false } });
        uSeries.push({ label: `${s.label} (95% lo)`, stroke: s.color + '00', width: 0, spanGaps: true, points: { show: false } });
        uBands.push({ series: [hi, hi + 1], fill: s.color + '33' });
      }
    }
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      series: uSeries,
      bands: uBands,
      legend: { live: true },
      cursor: { drag: { x: true, y: false }, ...(syncKey ? { sync: { key: syncKey, setSeries: false } } : {}) },
      scales: { x: { time: false }, y: { range: yRange } },
      axes: [
        // Steps are integers: no 1.5 ticks.
        {
          label: 'step',
          labelSize: 14,
          labelFont: '11px sans-serif',
          stroke: '#8a93a3',
          grid: { stroke: '#2a2f3a', width: 1 },
          ticks: { stroke: '#2a2f3a' },
          incrs: STEP_INCRS,
          values: (_u, vals) => vals.map((v) => String(v)),
        },
        {
          stroke: '#8a93a3',
          grid: { stroke: '#2a2f3a', width: 1 },
          ticks: { stroke: '#2a2f3a' },
          ...(unit ? { label: unit, labelSize: 14, labelFont: '11px sans-serif' } : {}),
          size: 60,
          // Our own ticks: uPlot's search over its fixed increments builds one tick per increment over
          // the whole range, which for a metric of huge magnitude (1e20 …) is an array too long to allocate.
          splits: (_u, _ax, min, max) => niceTicks(min, max),
          values: (_u, vals) => vals.map((v) => tickLabel(v, vals.length > 1 ? Math.abs(vals[1]! - vals[0]!) : 0)),
        },
      ],
      hooks: {
        // The faint raw curves and band edges stay out of the legend; it lists the smoothed value per run.
        init: [(u) => u.root.querySelectorAll<HTMLElement>('.u-legend .u-series').forEach((row, i) => hidden.has(i) && (row.style.display = 'none'))],
        // Away from the cursor the legend shows the last step's values instead of dashes.
        setCursor: [(u) => u.cursor.idx == null && showLast(u)],
        setData: [(u) => u.cursor.idx == null && showLast(u)],
      },
    };
    const u = new uPlot(opts, buildData(series, smoothing), el);
    plot.current = u;
    // A click picks the step under the cursor; a drag (uPlot's zoom) does not.
    let downX = 0;
    const onDown = (e: MouseEvent) => (downX = e.clientX);
    const onClick = (e: MouseEvent) => {
      if (!pick.current || Math.abs(e.clientX - downX) > 3) return;
      // The point nearest the pointer (not uPlot's cursor index, which follows mousemove a frame later).
      const idx = u.posToIdx(e.clientX - u.over.getBoundingClientRect().left);
      const step = idx == null ? undefined : u.data[0][idx];
      if (step != null) pick.current(step);
    };
    u.over.addEventListener('mousedown', onDown);
    u.over.addEventListener('mouseup', onClick);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.over.removeEventListener('mousedown', onDown);
      u.over.removeEventListener('mouseup', onClick);
      plot.current?.destroy();
      plot.current = null;
    };
    // Deliberately only shape and height: the data is pushed into the existing plot separately.
  }, [shape, height, syncKey]);

  useEffect(() => {
    plot.current?.setData(buildData(series, smoothing) as uPlot.AlignedData);
  }, [series, smoothing]);

  // The header's last value is the one the legend shows at the last step: the smoothed curve's when smoothing.
  const last = series.map((s) => lastFinite(smoothing > 0 ? timeWeightedEma(s.xs, s.ys, smoothing) : s.ys));
  return (
    <div className="chart" data-testid={`chart-${title}`} data-bands={bands}>
      <div className="chart-title">
        <span>
          {title}
          {aliases?.length ? <span className="muted" data-testid="chart-aliases">{` = ${aliases.join(' = ')}`}</span> : null}
        </span>
        <span className="chart-last" data-testid="chart-points">
          {series.length === 1
            ? `${series[0].xs.length} pts · last ${last[0] == null ? '—' : fmt(last[0])}${smoothing > 0 ? ' (smoothed)' : ''}`
            : `${series.length} ${bands ? 'lines' : 'runs'}`}
        </span>
      </div>
      <div ref={host} className={onPick ? 'chart-pickable' : undefined} title={onPick ? pickHint : undefined} />
    </div>
  );
}

function showLast(u: uPlot): void {
  const n = u.data[0]?.length ?? 0;
  if (n > 0) u.setLegend({ idx: n - 1 });
}

const STEP_INCRS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 100000];

/** y range with some headroom; a flat series gets a band around its value instead of uPlot's 0..100. */
function yRange(_u: uPlot, min: number | null, max: number | null): uPlot.Range.MinMax {
  if (min == null || max == null || !Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
  if (min === max) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.05;
    return [min - pad, max + pad];
  }
  const pad = (max - min) * 0.08;
  return [min - pad, max + pad];
}

/** About `n` round ticks (1, 2 or 5 × 10^k apart) between min and max, for any magnitude; [] for a non-finite range. */
export function niceTicks(min: number, max: number, n = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max) || max < min) return [];
  if (max === min) return [min];
  const raw = (max - min) / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  if (!(step > 0) || !Number.isFinite(step)) return [min, max];
  const out: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9 && out.length < 50; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

/** Axis tick label with as many decimals as the tick spacing needs (5.2331, 5.2332 … not 5.233 three times). */
export function tickLabel(v: number, incr: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || (a < 1e-3 && incr < 1e-3)) return v.toExponential(1);
  const decimals = incr > 0 ? Math.max(0, Math.min(8, -Math.floor(Math.log10(incr) + 1e-9))) : 2;
  return v.toFixed(decimals);
}

function buildData(series: ChartSeries[], smoothing: number): uPlot.AlignedData {
  const cols: { xs: number[]; ys: (number | null)[] }[] = [];
  const smooth = (xs: number[], ys: (number | null)[]) => (smoothing > 0 ? timeWeightedEma(xs, ys, smoothing) : ys);
  for (const s of series) {
    if (smoothing > 0) cols.push({ xs: s.xs, ys: s.ys });
    cols.push({ xs: s.xs, ys: smooth(s.xs, s.ys) });
    // The band is smoothed like its line, so the line stays inside it.
    if (s.band) cols.push({ xs: s.xs, ys: smooth(s.xs, s.band.hi) }, { xs: s.xs, ys: smooth(s.xs, s.band.lo) });
  }
  return alignSeries(cols) as unknown as uPlot.AlignedData;
}

function lastFinite(ys: (number | null)[]): number | null {
  for (let i = ys.length - 1; i >= 0; i--) if (ys[i] != null && Number.isFinite(ys[i])) return ys[i];
  return null;
}
