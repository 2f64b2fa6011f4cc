import type { RunSummary } from '../../api/types';
import { useArbor } from '../../store/react';
import { fmt } from '../../components/MetricChart';
import { formatDuration } from '../../lib/format';
import { Lineage } from './Lineage';
import { RunControls } from '../../components/RunControls';

/** A time in the table: hh:mm:ss today, else the date and hh:mm. */
function shortTime(ms: number): string {
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today
    ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
    : d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' + d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

/** One run in the table: select for Compare, name (with project and lineage), actions, status, tags, step, seed, algorithm, duration, metrics, created. */
export function RunRow({ r, metricCols, onFork }: { r: RunSummary; metricCols: string[]; onFork: () => void }) {
  const runs = useArbor((s) => s.runList.runs);
  const openRun = useArbor((s) => s.runActions.open);
  const compareIds = useArbor((s) => s.runList.compareIds);
  const toggleCompare = useArbor((s) => s.runListActions.toggleCompare);
  return (
    <tr data-testid="run-row" data-run-id={r.id}>
      <td>
        <input
          type="checkbox"
          checked={compareIds.includes(r.id)}
          onChange={() => toggleCompare(r.id)}
          title="select for Compare"
          aria-label={`select ${r.name} for Compare`}
        />
      </td>
      <td>
        <a href="#" onClick={(e) => (e.preventDefault(), void openRun(r.id))} style={{ color: 'var(--text)' }}>
          {r.name}
        </a>{' '}
        <span className="muted mono">{r.id.slice(0, 8)}</span>
        {r.project ? (
          <span className="muted" data-testid="run-project-name">
            {' '}
            · {r.project}
          </span>
        ) : null}
        <Lineage run={r} runs={runs} open={(id) => void openRun(id)} />
      </td>
      <td>
        <div style={{ display: 'flex', gap: 4, whiteSpace: 'nowrap' }}>
          <RunControls run={r} onFork={onFork} />
        </div>
      </td>
      <td>
        <span className={`status-pill status-${r.status}`} data-testid="run-status" title={r.error}>
          {r.status}
        </span>
      </td>
      <td>
        {r.tags.map((t) => (
          <span key={t} className="tag">
            {t}
          </span>
        ))}
      </td>
      <td className="num">{r.step ?? '—'}</td>
      <td className="num" data-testid="run-seed">
        {r.seed ?? '—'}
      </td>
      <td className="mono" data-testid="run-algorithm">
        {r.algorithm ?? '—'}
      </td>
      <td className="num" data-testid="run-duration" style={{ whiteSpace: 'nowrap' }}>
        {r.startedAt ? formatDuration((r.endedAt ?? Date.now()) - r.startedAt) : '—'}
      </td>
      {metricCols.map((k) => (
        <td key={k} className="num">
          {r.metrics[k] === undefined ? '—' : fmt(r.metrics[k])}
        </td>
      ))}
      <td className="muted" title={new Date(r.createdAt).toLocaleString()} style={{ whiteSpace: 'nowrap' }}>
        {shortTime(r.createdAt)}
      </td>
    </tr>
  );
}
