import type { Checkpoint, RunDetail } from '../../api/types';
import { fmt } from '../../components/MetricChart';

/** The run's checkpoints with their metrics; each can start a fork from its weights (not an SFT warm start's: fork its RL run at step 0). */
export function CheckpointTable({ run, forkable, onFork }: { run: RunDetail; forkable: boolean; onFork: (c: Checkpoint) => void }) {
  return (
    <table className="grid">
      <thead>
        <tr>
          <th className="num">step</th>
          <th>id</th>
          <th>path</th>
          <th>metrics</th>
          <th />
        </tr>
      </thead>
      <tbody>
        {run.checkpoints.map((c) => (
          <tr key={c.id}>
            <td className="num">{c.step}</td>
            <td className="mono">{c.id}</td>
            <td className="mono muted">{c.path}</td>
            <td className="mono">
              {Object.entries(c.metrics ?? {})
                .map(([k, v]) => `${k}=${fmt(v)}`)
                .join('  ')}
            </td>
            <td>
              <button
                onClick={() => onFork(c)}
                disabled={!forkable}
                title={
                  forkable
                    ? "a new run starting from this checkpoint's weights"
                    : "fork the RL run at its step 0: that checkpoint is this SFT warm start's weights"
                }
              >
                Fork from here…
              </button>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
