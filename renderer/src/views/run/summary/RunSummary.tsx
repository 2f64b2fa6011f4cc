// The run's story at the top of the Run view (W&B's run header, Inspect's score header): what the SFT
// warm start gave (its own run, the parent, with its loss curve and a link that opens it) and what RL
// added (held-out results before RL, at the best evaluation and at the end, by slice), a fork's parent
// with the config diff against it, and the wall time by phase. The numbers come from runs.learning
// (engine/train/run-story.ts), which `arbor show` prints too. An SFT warm start's own view names the RL
// run that began from it. Runs recorded before SFT runs existed keep their SFT curve as sft/* on
// themselves: shown as the run's first phase.
import { isSftWarmStart } from '../../../lib/lineage';
import type { Learning, RunDetail, Series } from '../../../api/types';
import { fmt, formatDuration } from '../../../lib/format';
import { ChildLinks } from './ChildLinks';
import { ParentLink } from './ParentLink';
import { Sparkline } from './Sparkline';

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
