import { useEffect, useMemo, useState } from 'react';
import { useArbor } from '../store/react';
import { MetricChart, PALETTE, fmt, type ChartSeries } from '../components/MetricChart';
import { configDiff, formatValue } from '../lib/configDiff';
import { SmoothingSlider } from './run/SmoothingSlider';
import { groupMetricKeys } from '../lib/metricSections';
import type { GroupComparison, GroupReport } from '../api/types';

export function CompareView() {
  const compare = useArbor((s) => s.compare);
  const smoothing = useArbor((s) => s.run.smoothing);
  const compareIds = useArbor((s) => s.runList.compareIds);
  const loadCompare = useArbor((s) => s.compareActions.load);
  const groups = useArbor((s) => s.groups);
  const refreshGroups = useArbor((s) => s.groupActions.refresh);
  useEffect(() => void refreshGroups(), [refreshGroups]);
  const diff = useMemo(() => configDiff(compare.runs.map((r) => r.config)), [compare.runs]);
  // One line per group configuration (cell): the mean over its runs, with the 95% interval as a band.
  const groupLines = useMemo(
    () =>
      groups.reports.flatMap((rep) =>
        Object.entries(groups.series[rep.group.id] ?? {}).map(([cell, bands]) => ({
          label: rep.cells.length > 1 ? `${rep.group.name} · ${cell}` : rep.group.name,
          bands,
        })),
      ),
    [groups],
  );
  const keys = useMemo(() => {
    const all = new Set<string>();
    for (const s of Object.values(compare.series)) for (const k of Object.keys(s)) all.add(k);
    for (const l of groupLines) for (const k of Object.keys(l.bands)) all.add(k);
    return groupMetricKeys([...all]);
  }, [compare.series, groupLines]);
  const nRuns = compare.runs.length;

  return (
    <div className="view" data-testid="view-compare">
      <div className="toolbar">
        <h2>Compare</h2>
        {compare.runs.map((r, i) => (
          <span key={r.id} className="tag" style={{ color: PALETTE[i % PALETTE.length] }}>
            ■ {r.name}
          </span>
        ))}
        {groupLines.map((l, i) => (
          <span key={l.label} className="tag" style={{ color: PALETTE[(nRuns + i) % PALETTE.length] }} data-testid="group-line">
            ▬ {l.label}
          </span>
        ))}
        <GroupPicker />
        <span className="grow" />
        <SmoothingSlider />
      </div>
      {nRuns === 0 && groups.reports.length === 0 ? (
        <div className="empty">
          Tick two or more runs in the Runs table, then press Compare, or add a run group (a seed sweep: `arbor train &lt;config&gt; --seeds 0,1,2,3`).{' '}
          {compareIds.length >= 2 ? <button onClick={() => void loadCompare(compareIds)}>Load {compareIds.length} selected runs</button> : null}
        </div>
      ) : null}
      {nRuns > 0 ? (
        <div className="panel">
          <h3>Config · differences only ({diff.length})</h3>
          {diff.length === 0 ? (
            <div className="muted">The configs are identical.</div>
          ) : (
            <table className="grid" data-testid="config-diff">
              <thead>
                <tr>
                  <th>key</th>
                  {compare.runs.map((r, i) => (
                    <th key={r.id} style={{ color: PALETTE[i % PALETTE.length] }}>
                      {r.name}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {diff.map((row) => (
                  <tr key={row.path}>
                    <td className="mono">{row.path}</td>
                    {row.values.map((v, i) => (
                      <td key={i} className="mono">
                        {formatValue(v)}
                      </td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      ) : null}
      {groups.reports.map((rep, i) => (
        <GroupPanel key={rep.group.id} report={rep} color={PALETTE[(nRuns + i) % PALETTE.length]} />
      ))}
      {groups.diff ? <GroupDiff diff={groups.diff} names={groups.reports.map((r) => r.group.name)} /> : null}
      {keys.map((g) => (
        <section key={g.title} className="chart-section">
          <h3>{g.title}</h3>
          <div className="charts">
            {g.keys.map((k) => {
              const series: ChartSeries[] = compare.runs
                .map((r, i) => ({ r, i, s: compare.series[r.id]?.[k] }))
                .filter((x) => x.s)
                .map(({ r, i, s }) => ({ label: r.name, xs: s!.step, ys: s!.value, color: PALETTE[i % PALETTE.length] }));
              groupLines.forEach((l, i) => {
                const b = l.bands[k];
                if (b) series.push({ label: l.label, xs: b.step, ys: b.mean, color: PALETTE[(nRuns + i) % PALETTE.length], band: { lo: b.lo, hi: b.hi } });
              });
              return <MetricChart key={k} title={k} smoothing={smoothing} series={series} syncKey="compare" />;
            })}
          </div>
        </section>
      ))}
    </div>
  );
}

/** Add a run group (seed sweep or grid) to the comparison. */
function GroupPicker() {
  const all = useArbor((s) => s.groups.items);
  const shown = useArbor((s) => s.groups.reports);
  const add = useArbor((s) => s.groupActions.addToCompare);
  const left = all.filter((g) => !shown.some((r) => r.group.id === g.id));
  const [pick, setPick] = useState('');
  if (!all.length) return null;
  return (
    <label className="muted">
      group{' '}
      <select data-testid="group-select" value={pick} onChange={(e) => setPick(e.target.value)}>
        <option value="">(choose)</option>
        {left.map((g) => (
          <option key={g.id} value={g.id}>
            {g.name} · {g.runs}/{g.planned} runs · {g.status}
          </option>
        ))}
      </select>{' '}
      <button data-testid="group-add" disabled={!pick} onClick={() => void add(pick).then(() => setPick(''))}>
        Add group
      </button>
    </label>
  );
}

/** A group: its statistics per configuration and metric, whether it is partial, and its runs. */
function GroupPanel({ report, color }: { report: GroupReport; color: string }) {
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

/** Two groups: the difference of means (second − first) per metric with its bootstrap interval. */
function GroupDiff({ diff, names }: { diff: GroupComparison; names: string[] }) {
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

/** One metric of a group table: its numbers, then its 95% interval [lo, hi]. */
function IntervalRow({ metric, values, lo, hi }: { metric: string; values: (string | number)[]; lo: number; hi: number }) {
  return (
    <tr>
      <td className="mono">{metric}</td>
      {values.map((v, i) => (
        <td key={i} className="num">
          {v}
        </td>
      ))}
      <td className="mono">
        [{fmt(lo)}, {fmt(hi)}]
      </td>
    </tr>
  );
}
