import { fmt } from '../../../lib/format';

/** The evaluation harness's results stored with the run (`arbor eval <run> --k N`): harness/* metrics. */
export function HarnessPanel({ metrics }: { metrics: Record<string, number> }) {
  const keys = Object.keys(metrics).filter((k) => k.startsWith('harness/'));
  if (!keys.length) return null;
  // harness/<metric> (all questions) and harness/<field>=<value>/<metric>.
  const cols = [
    'all',
    ...new Set(
      keys
        .map((k) => k.slice(8))
        .filter((k) => k.includes('/'))
        .map((k) => k.slice(0, k.lastIndexOf('/'))),
    ),
  ];
  const rows = [...new Set(keys.map((k) => k.slice(k.lastIndexOf('/') + 1)))];
  const value = (col: string, row: string) => metrics[col === 'all' ? `harness/${row}` : `harness/${col}/${row}`];
  return (
    <div className="panel" data-testid="harness-panel">
      <h3>
        Evaluation harness <span className="muted">(arbor eval --k; latest)</span>
      </h3>
      <table className="grid">
        <thead>
          <tr>
            <th>metric</th>
            {cols.map((c) => (
              <th key={c} className="num">
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r}>
              <td className="mono">{r}</td>
              {cols.map((c) => (
                <td key={c} className="num">
                  {value(c, r) === undefined ? '—' : fmt(value(c, r)!)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
