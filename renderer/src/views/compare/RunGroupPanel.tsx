import { useArbor } from '../../store/react';
import { fmt } from '../../components/MetricChart';
import type { RunGroupReport } from '../../api/types';
import { IntervalRow } from './IntervalRow';

/** A group: its statistics per configuration and metric, whether it is partial, and its runs. */
export function RunGroupPanel({ report, color }: { report: RunGroupReport; color: string }) {
  const remove = useArbor((s) => s.groupActions.removeFromCompare);
  const openRun = useArbor((s) => s.runActions.open);
  const runs = report.cells.flatMap((c) => c.runs.map((r) => ({ ...r, cell: c.cell })));
  return (
    <div className="panel" data-testid="group-panel">
      <h3 style={{ color }}>
        ▬ {report.group.name} <span className="muted mono">{report.group.id}</span>{' '}
        <span className="muted">
          {report.group.kind} · {runs.length}/{report.group.planned} runs · {report.group.status}
        </span>{' '}
        <button onClick={() => void remove(report.group.id)} title="take this group out of the comparison">
          ×
        </button>
      </h3>
      {report.partial ? (
        <div className="error-msg" data-testid="group-partial">
          <strong>Partial group:</strong> {report.notes.join('; ')}
        </div>
      ) : null}
      {report.cells.map((c) => (
        <table key={c.cell} className="grid" data-testid="group-stats">
          <thead>
            <tr>
              <th>{c.cell === 'base' ? 'metric' : `${c.cell}: metric`}</th>
              <th className="num">n</th>
              <th className="num">mean</th>
              <th className="num">sd</th>
              <th className="num">min</th>
              <th className="num">max</th>
              <th>95% CI of the mean (bootstrap)</th>
            </tr>
          </thead>
          <tbody>
            {Object.entries(c.metrics).map(([k, m]) => (
              <IntervalRow key={k} metric={k} values={[m.n, fmt(m.mean), fmt(m.sd), fmt(m.min), fmt(m.max)]} lo={m.lo} hi={m.hi} />
            ))}
          </tbody>
        </table>
      ))}
      <div className="muted" data-testid="group-runs">
        runs:{' '}
        {runs.map((r) => (
          <span key={r.id} style={{ marginRight: 12 }}>
            <a href="#" onClick={(e) => (e.preventDefault(), void openRun(r.id))}>
              {r.id}
            </a>{' '}
            seed {r.seed ?? '?'}
            {r.cell !== 'base' ? ` · ${r.cell}` : ''} · {r.status}
          </span>
        ))}
      </div>
    </div>
  );
}
