// The run's story at the top of the Run view (W&B's run header, Inspect's score header): what the SFT
// warm start gave (its phase, with its loss curve) and what RL added (held-out results before RL, at
// the best evaluation and at the end, by slice), the parent run with the config diff against it, and
// the wall time by phase. The numbers come from runs.learning (engine/train/run-story.ts), which
// `arbor show` prints too.
import { useEffect, useState } from 'react';
import { useArbor } from '../store/react';
import type { Learning, RunDetail, Series } from '../api/types';
import { configDiff, formatValue } from '../lib/configDiff';
import { fmt, formatDuration } from '../lib/format';
import { PALETTE } from './MetricChart';

export function RunSummary({ run, series, learning }: { run: RunDetail; series: Record<string, Series>; learning: Learning | null }) {
  const sft = series['sft/loss'];
  const held = learning?.heldOut;
  const times = Object.entries(learning?.phaseTimes ?? {});
  if (!sft?.step.length && !held?.columns.length && !run.parentId && !times.length) return null;
  const loss = sft ? sft.value.filter((v): v is number => v != null) : [];
  return (
    <section className="panel run-summary" data-testid="run-summary" aria-label="run summary">
      <h3>Run summary</h3>
      <div className="run-summary-grid">
        <div>
          <div data-testid="run-lineage">
            {run.parentId ? <ParentLink parentId={run.parentId} /> : null}
            {sft?.step.length ? (
              <div data-testid="sft-phase">
                <strong>SFT warm start</strong> (phase 1 of this run): {sft.step.length} steps, loss {fmt(loss[0]!)} → {fmt(loss[loss.length - 1]!)}
                {' · then '}
                <strong>RL</strong> to step {run.step}
              </div>
            ) : null}
          </div>
          {sft && loss.length > 1 ? <Sparkline xs={sft.step} ys={sft.value} label="SFT loss by SFT step" /> : null}
          {times.length ? (
            <div className="muted" data-testid="phase-times">
              wall time by phase: {times.map(([k, v]) => `${k} ${formatDuration(v * 1000)}`).join(' · ')}
            </div>
          ) : null}
        </div>
        {held?.columns.length ? (
          <table className="grid" data-testid="heldout-table">
            <caption className="muted">held-out evaluation (best by eval/{held.bestMetric})</caption>
            <thead>
              <tr>
                <th scope="col">metric</th>
                {held.columns.map((c) => (
                  <th key={c.label} scope="col" className="num" data-testid={`heldout-col-${c.label.replace(/ /g, '-')}`}>
                    {c.label}
                    <span className="muted"> · step {c.step}</span>
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {held.metrics.map((m) => (
                <tr key={m} data-testid="heldout-row" data-metric={m}>
                  <th scope="row" className="mono" style={{ fontWeight: 'normal' }}>
                    {m}
                  </th>
                  {held.columns.map((c) => (
                    <td key={c.label} className="num mono">
                      {c.values[m] === undefined ? '—' : fmt(c.values[m])}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
      </div>
    </section>
  );
}

/** The parent run (a fork's origin) with a link and the config paths that differ from it. */
function ParentLink({ parentId }: { parentId: string }) {
  const fetchRun = useArbor((s) => s.fetchRun);
  const openRun = useArbor((s) => s.openRun);
  const run = useArbor((s) => s.run);
  const [parent, setParent] = useState<RunDetail | null>(null);
  useEffect(() => {
    let live = true;
    void fetchRun(parentId).then((p) => live && setParent(p));
    return () => {
      live = false;
    };
  }, [fetchRun, parentId]);
  const diff = parent && run ? configDiff([parent.config, run.config]) : [];
  return (
    <div data-testid="run-parent">
      parent run:{' '}
      <a
        href="#"
        onClick={(e) => {
          e.preventDefault();
          void openRun(parentId);
        }}
      >
        {parent?.name ?? parentId}
      </a>
      {parent ? (
        <details>
          <summary className="muted">config diff against the parent ({diff.length} keys)</summary>
          <table className="grid" data-testid="parent-diff">
            <thead>
              <tr>
                <th scope="col">key</th>
                <th scope="col">parent</th>
                <th scope="col">this run</th>
              </tr>
            </thead>
            <tbody>
              {diff.map((d) => (
                <tr key={d.path}>
                  <td className="mono">{d.path}</td>
                  <td className="mono">{formatValue(d.values[0])}</td>
                  <td className="mono">{formatValue(d.values[1])}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </details>
      ) : null}
    </div>
  );
}

/** A small line of a series (the SFT loss curve; its full chart is under Charts → sft/loss). */
function Sparkline({ xs, ys, label }: { xs: number[]; ys: (number | null)[]; label: string }) {
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
