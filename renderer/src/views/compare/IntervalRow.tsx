import { fmt } from '../../components/MetricChart';

/** One metric of a group table: its numbers, then its 95% interval [lo, hi]. */
export function IntervalRow({ metric, values, lo, hi }: { metric: string; values: (string | number)[]; lo: number; hi: number }) {
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
