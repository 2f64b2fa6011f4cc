// The run's story at the top of the Run view (W&B's run header, Inspect's score header): what the SFT
// warm start gave (its own run, the parent, with its loss curve and a link that opens it) and what RL
// added (held-out results before RL, at the best evaluation and at the end, by slice), a fork's parent
// with the config diff against it, and the wall time by phase. The numbers come from runs.learning
// (engine/train/run-story.ts), which `arbor show` prints too. An SFT warm start's own view names the RL
// run that began from it. Runs recorded before SFT runs existed keep their SFT curve as sft/* on
// themselves: shown as the run's first phase.
import { useEffect, useState } from 'react';
import { isSftWarmStart } from '../lib/lineage';
import { useArbor } from '../store/react';
import type { Learning, RunDetail, Series } from '../api/types';
import { configDiff, formatValue } from '../lib/configDiff';
import { fmt, formatDuration } from '../lib/format';
import { PALETTE } from './MetricChart';

export function RunSummary({ run, series, learning }: { run: RunDetail; series: Record<string, Series>; learning: Learning | null }) {
  const sft = series['sft/loss'];
  const held = learning?.heldOut;
  const times = Object.entries(learning?.phaseTimes ?? {});
  const sftRun = isSftWarmStart(run);
  if (!sft?.step.length && !held?.columns.length && !run.parentId && !times.length && !sftRun) return null;
  const loss = sft ? sft.value.filter((v): v is number => v != null) : [];
  return (
    <section className="panel run-summary" data-testid="run-summary" aria-label="run summary">
      <h3>Run summary</h3>
      <div className="run-summary-grid">
        <div>
          <div data-testid="run-lineage">
            {run.parentId ? <ParentLink parentId={run.parentId} step={run.step} /> : null}
            {sftRun ? (
              <div data-testid="sft-run-of">
                <strong>SFT warm start</strong>: {sft?.step.length ?? 0} steps
                {loss.length ? `, loss ${fmt(loss[0]!)} → ${fmt(loss[loss.length - 1]!)}` : ''}
                {' · then '}
                <ChildLinks id={run.id} />
              </div>
            ) : sft?.step.length ? (
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

/** The runs that began from this SFT warm start (the RL run), each a link that opens it. */
function ChildLinks({ id }: { id: string }) {
  const children = useArbor((s) => s.runList.runs).filter((r) => r.parentId === id);
  const openRun = useArbor((s) => s.runActions.open);
  if (!children.length) return <span className="muted">no RL run recorded from it</span>;
  return (
    <>
      {children.map((c, i) => (
        <span key={c.id}>
          {i ? ', ' : ''}
          <strong>RL</strong> in run{' '}
          <a
            href="#"
            data-testid="sft-child-link"
            onClick={(e) => {
              e.preventDefault();
              void openRun(c.id);
            }}
          >
            {c.name}
          </a>{' '}
          <span className="muted">
            ({c.status}, step {c.step})
          </span>
        </span>
      ))}
    </>
  );
}

/**
 * The parent run with a link that opens it: the SFT warm start this run began from (its loss curve,
 * live while it trains), or a fork's origin with the config paths that differ from it.
 */
function ParentLink({ parentId, step }: { parentId: string; step: number }) {
  const fetchRun = useArbor((s) => s.runActions.fetch);
  const fetchSeries = useArbor((s) => s.runActions.fetchSeries);
  const openRun = useArbor((s) => s.runActions.open);
  const run = useArbor((s) => s.run.detail);
  // The parent as the runs list has it (live events): its curve is reloaded as its step or status moves.
  const live = useArbor((s) => s.runList.runs.find((r) => r.id === parentId));
  const [parent, setParent] = useState<RunDetail | null>(null);
  const [loss, setLoss] = useState<Series | null>(null);
  const sft = isSftWarmStart(parent);
  useEffect(() => {
    let on = true;
    void fetchRun(parentId).then((p) => on && setParent(p));
    return () => {
      on = false;
    };
  }, [fetchRun, parentId, live?.status, live?.step]);
  useEffect(() => {
    if (!sft) return;
    let on = true;
    void fetchSeries(parentId, ['sft/loss']).then((s) => on && setLoss(s?.['sft/loss'] ?? null));
    return () => {
      on = false;
    };
  }, [fetchSeries, parentId, sft, live?.status, live?.step]);
  const link = (
    <a
      href="#"
      data-testid="run-parent-link"
      onClick={(e) => {
        e.preventDefault();
        void openRun(parentId);
      }}
    >
      {parent?.name ?? parentId}
    </a>
  );
  if (parent && sft) {
    const ys = loss ? loss.value.filter((v): v is number => v != null) : [];
    return (
      <div data-testid="run-parent" data-parent-kind="sft">
        parent run: {link} · <strong>SFT warm start</strong> <span className="muted">({live?.status ?? parent.status})</span>
        {loss?.step.length ? (
          <span data-testid="sft-parent-summary">
            : {loss.step.length} steps, loss {fmt(ys[0]!)} → {fmt(ys[ys.length - 1]!)}
          </span>
        ) : null}
        {' · then '}
        <strong>RL</strong> (this run){step > 0 ? ` to step ${step}` : ', after it'}
        {loss && ys.length > 1 ? <Sparkline xs={loss.step} ys={loss.value} label="SFT loss by SFT step (the parent run)" /> : null}
      </div>
    );
  }
  const diff = parent && run ? configDiff([parent.config, run.config]) : [];
  return (
    <div data-testid="run-parent" data-parent-kind="run">
      parent run: {link}
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
