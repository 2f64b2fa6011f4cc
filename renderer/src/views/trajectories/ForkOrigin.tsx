import type { TrajectoryView } from '../../api/types';
import { useArbor } from '../../store/react';
import { ForkIcon } from './turns/ForkIcon';
import { weightsNote } from './fork/weights';

/** A what-if replay: where it left its parent, with which edit and checkpoint; the parent one click away. */
export function ForkOrigin({ traj }: { traj: TrajectoryView }) {
  const open = useArbor((s) => s.trajActions.openById);
  const f = traj.fork!;
  return (
    <span data-testid="traj-fork-origin">
      <span className="branch-mark fork">
        <ForkIcon />
      </span>{' '}
      what-if replay of{' '}
      <a href="#" onClick={(e) => (e.preventDefault(), void open(f.parent))} data-testid="traj-fork-parent">
        trajectory {f.parent}
      </a>{' '}
      at turn {f.turn + 1}
      {f.token !== null ? `, token ${f.token}` : ''}
      {f.edit ? `, ${f.edit.kind} edited` : ''} · checkpoint {f.checkpoint.step !== undefined ? `step ${f.checkpoint.step}` : f.checkpoint.id}{' '}
      <span className="muted" data-testid="traj-fork-weights">
        ({weightsNote(f.checkpoint, traj)})
      </span>{' '}
      · T {f.sampling.temperature}
    </span>
  );
}
