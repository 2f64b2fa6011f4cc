import { useMemo } from 'react';
import type { RunSummary } from '../../api/types';
import { useArbor } from '../../store/react';
import { filterRuns, sortRuns, type SortKey } from '../../store/runs';
import { RunRow } from './RunRow';

/** Metrics shown as columns when present, in this order (at most MAX_METRIC_COLS); each entry
 * lists alternative names of one quantity, the first present wins. Others can be filtered on. */
const KEY_METRICS = [
  ['reward/mean', 'reward'],
  ['exact_match', 'em'],
  ['eval/exact_match'],
  ['actor/kl', 'kl'],
  ['actor/entropy', 'entropy'],
  ['actor/clip_fraction'],
  ['response_length/mean'],
  ['tool_calls_per_episode'],
  ['perf/tokens_per_s'],
  ['loss'],
];
const MAX_METRIC_COLS = 7;

/** The metric columns: the key metrics present (first name present of each), then others alphabetically, at most MAX_METRIC_COLS. */
function metricColumns(runs: RunSummary[]): string[] {
  const present = new Set<string>();
  for (const r of runs) for (const k of Object.keys(r.metrics)) present.add(k);
  const cols = KEY_METRICS.map((alts) => alts.find((k) => present.has(k)))
    .filter((k): k is string => !!k)
    .slice(0, MAX_METRIC_COLS);
  for (const k of [...present].sort()) if (cols.length < MAX_METRIC_COLS && !cols.includes(k)) cols.push(k);
  return cols;
}

/** The runs that pass the filter, in the chosen order (a click on a sortable header sorts by it). */
export function RunsTable({ onFork }: { onFork: (runId: string) => void }) {
  const runs = useArbor((s) => s.runList.runs);
  const filter = useArbor((s) => s.runList.filter);
  const sort = useArbor((s) => s.runList.sort);
  const setSort = useArbor((s) => s.runListActions.setSort);
  const metricCols = useMemo(() => metricColumns(runs), [runs]);
  const shown = useMemo(() => sortRuns(filterRuns(runs, filter), sort), [runs, filter, sort]);
  const th = (key: SortKey, label: string, cls = '') => (
    <th key={key} className={cls} onClick={() => setSort(key)}>
      {label}
      {sort.key === key ? (sort.desc ? ' ▾' : ' ▴') : ''}
    </th>
  );
  return (
    <div className="panel" style={{ padding: 0, overflowX: 'auto' }}>
      <table className="grid" data-testid="runs-table">
        <thead>
          <tr>
            <th style={{ width: 24 }} />
            {th('name', 'name')}
            <th>actions</th>
            {th('status', 'status')}
            <th>tags</th>
            <th className="num">step</th>
            <th className="num">seed</th>
            <th>algorithm</th>
            <th className="num">duration</th>
            {metricCols.map((k) => th(`metric:${k}`, k, 'num'))}
            {th('createdAt', 'created')}
          </tr>
        </thead>
        <tbody>
          {shown.map((r) => (
            <RunRow key={r.id} r={r} metricCols={metricCols} onFork={() => onFork(r.id)} />
          ))}
        </tbody>
      </table>
      {shown.length === 0 ? (
        <div className="empty">{runs.length ? 'No run matches the filter.' : 'No runs yet. Start one from a template with “New run…”.'}</div>
      ) : null}
    </div>
  );
}
