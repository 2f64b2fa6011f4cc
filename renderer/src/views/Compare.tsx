import { useMemo } from 'react';
import { useArbor } from '../store/react';
import { MetricChart, PALETTE } from '../components/MetricChart';
import { configDiff, formatValue } from '../lib/configDiff';
import { SmoothingSlider } from './Run';
import { groupMetricKeys } from '../lib/metricSections';

export function CompareView() {
  const compare = useArbor((s) => s.compare);
  const smoothing = useArbor((s) => s.smoothing);
  const compareIds = useArbor((s) => s.compareIds);
  const loadCompare = useArbor((s) => s.loadCompare);
  const diff = useMemo(() => configDiff(compare.runs.map((r) => r.config)), [compare.runs]);
  const keys = useMemo(() => {
    const all = new Set<string>();
    for (const s of Object.values(compare.series)) for (const k of Object.keys(s)) all.add(k);
    return groupMetricKeys([...all]);
  }, [compare.series]);

  if (compare.runs.length === 0)
    return (
      <div className="view">
        <div className="empty">
          Tick two or more runs in the Runs table, then press Compare.{' '}
          {compareIds.length >= 2 ? <button onClick={() => void loadCompare(compareIds)}>Load {compareIds.length} selected runs</button> : null}
        </div>
      </div>
    );
  return (
    <div className="view" data-testid="view-compare">
      <div className="toolbar">
        <h2>Compare</h2>
        {compare.runs.map((r, i) => (
          <span key={r.id} className="tag" style={{ color: PALETTE[i % PALETTE.length] }}>
            ■ {r.name}
          </span>
        ))}
        <span className="grow" />
        <SmoothingSlider />
      </div>
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
      {keys.map((g) => (
        <section key={g.title} className="chart-section">
          <h3>{g.title}</h3>
          <div className="charts">
            {g.keys.map((k) => (
              <MetricChart
                key={k}
                title={k}
                smoothing={smoothing}
                series={compare.runs
                  .map((r, i) => ({ r, i, s: compare.series[r.id]?.[k] }))
                  .filter((x) => x.s)
                  .map(({ r, i, s }) => ({ label: r.name, xs: s!.step, ys: s!.value, color: PALETTE[i % PALETTE.length] }))}
              />
            ))}
          </div>
        </section>
      ))}
    </div>
  );
}
