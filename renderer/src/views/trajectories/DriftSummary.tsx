import type { TrajectoryView } from '../../api/types';
import { useArbor } from '../../store/react';

/** Retokenisation drift of the open trajectory, in a line (the drifted turns are marked in place). */
export function DriftSummary({ traj }: { traj: TrajectoryView }) {
  const drift = useArbor((s) => s.traj.drift);
  const err = useArbor((s) => s.traj.driftError);
  if (err) return null;
  if (!drift) return null;
  return (
    <div className="muted" style={{ fontSize: 11 }} data-testid="drift-summary" data-drifted={drift.drifted ? 'true' : 'false'}>
      {drift.drifted
        ? `⚠ retokenisation drift in ${drift.turns.length} of ${drift.checked} turns (turn ${drift.turns.map((d) => d.turn + 1).join(', ')}): their ids differ from their text re-rendered by the run's tokenizer`
        : `no retokenisation drift: the ids of all ${drift.checked} turns of trajectory ${traj.id} equal their text re-rendered`}
    </div>
  );
}
