import type { TrajectorySummary } from '../../api/types';
import { ForkIcon } from './turns/ForkIcon';
import { taskMessage } from './Verdict';

/** One row: group, sample (a branch marked), the task's question with its flags, reward and advantage. */
export function TrajectoryRow({ t, selected, flat, top, onOpen }: { t: TrajectorySummary; selected: boolean; flat: boolean; top: number; onOpen: () => void }) {
  return (
    <div
      className={`list-row ${selected ? 'sel' : ''}`}
      style={{ position: 'absolute', top: 0, left: 0, right: 0, transform: `translateY(${top}px)` }}
      onClick={onOpen}
      data-testid="traj-row"
    >
      <span className="mono">{t.group}</span>
      <span className="mono" title={t.branch ? `branched from sample ${t.branch.parent}` : undefined}>
        {t.sample}
        {t.branch ? (
          <span className="branch-mark fork">
            <ForkIcon />
          </span>
        ) : null}
      </span>
      <span className="q" title={t.prompt} data-testid="traj-row-text">
        {t.hasError ? <span style={{ color: 'var(--err)' }}>⚠ </span> : null}
        {flat ? (
          <span
            className="flag"
            title="every sample of this group has the same reward and no advantage: zero variance, no learning signal"
            data-testid="flat-flag"
          >
            flat
          </span>
        ) : null}
        {t.signal?.dropped ? (
          <span
            className="flag"
            title="dynamic sampling dropped this flat group: stored as a sample so it can be read, never trained on"
            data-testid="dropped-flag"
          >
            dropped
          </span>
        ) : null}
        {(t.outcomeData as { truncated?: boolean }).truncated ? (
          <span className="flag" title="a limit (turns, tokens) ended this episode" data-testid="truncated-flag">
            truncated
          </span>
        ) : null}{' '}
        {taskMessage(t)}
      </span>
      <span className="mono" style={{ textAlign: 'right', color: t.reward > 0 ? 'var(--ok)' : undefined }}>
        {t.reward.toFixed(3)}
      </span>
      <span className="mono" style={{ textAlign: 'right' }}>
        {t.advantage == null ? '—' : t.advantage.toFixed(2)}
      </span>
    </div>
  );
}
