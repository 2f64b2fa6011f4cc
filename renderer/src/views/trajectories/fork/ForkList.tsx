import type { TrajectoryView, TrajectorySummary } from '../../../api/types';
import { useArbor } from '../../../store/react';

/** Every stored continuation of the trajectory, beside it: reward, answer, where it forked, with which checkpoint. */
export function ForkList({ forks, parent }: { forks: TrajectorySummary[]; parent: TrajectoryView }) {
  const open = useArbor((s) => s.trajActions.openById);
  return (
    <div>
      <div className="muted">
        {forks.length} continuation(s) of this trajectory (reward {parent.reward.toFixed(3)}):
      </div>
      <div className="fork-children" data-testid="fork-children">
        {forks.map((c) => (
          <div key={c.id} className="fork-child" onClick={() => void open(c.id)} data-testid="fork-child" data-id={c.id}>
            <div>
              reward{' '}
              <b
                className="mono"
                style={{ color: c.reward > parent.reward ? 'var(--ok)' : c.reward < parent.reward ? 'var(--err)' : undefined }}
                data-testid="fork-child-reward"
              >
                {c.reward.toFixed(3)}
              </b>{' '}
              {(c.outcomeData as { truncated?: boolean }).truncated ? <span className="flag">truncated</span> : null}
            </div>
            <div className="mono">answer {c.outcome === undefined ? '—' : JSON.stringify(c.outcome)}</div>
            <div className="muted">
              turn {(c.fork?.turn ?? 0) + 1}
              {c.fork?.edit ? ` · ${c.fork.edit.kind} edited` : ''} ·{' '}
              {c.fork?.checkpoint.step !== undefined ? `step ${c.fork.checkpoint.step}` : c.fork?.checkpoint.id} · T {c.fork?.sampling.temperature}
            </div>
          </div>
        ))}
      </div>
    </div>
  );
}
