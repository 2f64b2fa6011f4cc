import { fmt } from '../../../lib/format';
import { PALETTE } from '../../../components/MetricChart';

/** A small line of a series (the SFT loss curve; its full chart is under Charts → sft/loss). */
export function Sparkline({ xs, ys, label }: { xs: number[]; ys: (number | null)[]; label: string }) {
  const W = 320;
  const H = 64;
  const pts = xs.map((x, i) => [x, ys[i]] as const).filter((p): p is readonly [number, number] => p[1] != null && Number.isFinite(p[1]));
  if (pts.length < 2) return null;
  const [x0, x1] = [pts[0]![0], pts[pts.length - 1]![0]];
  const lo = Math.min(...pts.map((p) => p[1]));
  const hi = Math.max(...pts.map((p) => p[1]));
  const sx = (x: number) => 4 + ((x - x0) / Math.max(1e-12, x1 - x0)) * (W - 8);
  const sy = (y: number) => 4 + (hi === lo ? 0.5 : (hi - y) / (hi - lo)) * (H - 8);
  const d = pts.map((p, i) => `${i ? 'L' : 'M'}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join('');
  return (
    <svg
      width={W}
      height={H}
      role="img"
      aria-label={`${label}: ${fmt(pts[0]![1])} to ${fmt(pts[pts.length - 1]![1])}`}
      data-testid="sft-curve"
      style={{ display: 'block', margin: '4px 0' }}
    >
      <path d={d} fill="none" stroke={PALETTE[1]} strokeWidth={1.5} />
    </svg>
  );
}
