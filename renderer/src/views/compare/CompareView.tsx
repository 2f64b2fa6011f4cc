// The Compare view: ticked runs side by side (their config differences and metric curves) and run
// groups (seed sweeps, grids) with their statistics, each group's mean curve with its 95% band.
import { useEffect, useMemo } from 'react';
import { useArbor } from '../../store/react';
import { MetricChart, PALETTE, type ChartSeries } from '../../components/MetricChart';
import { configDiff, formatValue } from '../../lib/configDiff';
import { SmoothingSlider } from '../../components/SmoothingSlider';
import { groupMetricKeys } from '../../lib/metricSections';
import { RunGroupPicker } from './RunGroupPicker';
import { RunGroupPanel } from './RunGroupPanel';
import { RunGroupDiff } from './RunGroupDiff';

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
        <RunGroupPicker />
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
        <RunGroupPanel key={rep.group.id} report={rep} color={PALETTE[(nRuns + i) % PALETTE.length]} />
      ))}
      {groups.diff ? <RunGroupDiff diff={groups.diff} names={groups.reports.map((r) => r.group.name)} /> : null}
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
