import { fmt } from '../../components/MetricChart';
import type { RunGroupComparison } from '../../api/types';
import { IntervalRow } from './IntervalRow';

/** Two groups: the difference of means (second − first) per metric with its bootstrap interval. */
export function RunGroupDiff({ diff, names }: { diff: RunGroupComparison; names: string[] }) {
  return (
    <div className="panel" data-testid="group-diff">
      <h3>
        {names[1]} − {names[0]}: difference of means (95% bootstrap interval)
      </h3>
      {diff.cells.length === 0 ? <div className="muted">The two groups share no configuration label.</div> : null}
      {diff.cells.map((c) => (
        <table key={`${c.cellA}|${c.cellB}`} className="grid">
          <thead>
            <tr>
              <th>metric{c.cellA !== 'base' || c.cellB !== 'base' ? ` (${c.cellB} − ${c.cellA})` : ''}</th>
              <th className="num">{names[0]}</th>
              <th className="num">{names[1]}</th>
              <th className="num">difference</th>
              <th>95% CI</th>
            </tr>
          </thead>
          <tbody>
            {Object.entries(c.metrics).map(([k, m]) => (
              <IntervalRow key={k} metric={k} values={[fmt(m.meanA), fmt(m.meanB), fmt(m.diff)]} lo={m.lo} hi={m.hi} />
            ))}
          </tbody>
        </table>
      ))}
    </div>
  );
}
