import type { TrajectoryView } from '../../api/types';
import { useArbor } from '../../store/react';
import { siblingsOf } from '../../store/trajectories';
import type { BranchTree } from '../../lib/branchTree';
import { ForkIcon } from './turns/ForkIcon';
import { BranchPointBadge } from './branch-tree/BranchPointBadge';
import { AdvantageSummary } from './AdvantageSummary';
import { ForkOrigin } from './ForkOrigin';
import { stepLabel } from './stepLabel';

/** The open trajectory in a line: step, group and sample (or what-if fork), reward and its parts, advantage, where it branched. */

export function TrajectoryHeader({ traj, tree }: { traj: TrajectoryView; tree: BranchTree | null }) {
  const list = useArbor((s) => s.trajList.items);
  const sibs = siblingsOf(list, traj);
  return (
    <div className="panel" style={{ display: 'flex', gap: 14, flexWrap: 'wrap', alignItems: 'baseline' }} data-testid="traj-header">
      <span>
        step <b className="mono">{stepLabel(traj.step)}</b>
      </span>
      {traj.fork ? (
        // A what-if child is not one of the group's samples: its own label, not "sample 0 of 8".
        <span data-testid="traj-fork-label">
          <b>what-if fork</b> · continuation <b className="mono">{traj.fork.sampling.index + 1}</b> of {traj.fork.sampling.n}
        </span>
      ) : (
        <span>
          group <b className="mono">{traj.group}</b> · sample <b className="mono">{traj.sample}</b> of {sibs.length}
        </span>
      )}
      <span>
        reward{' '}
        <b className="mono" data-testid="traj-reward">
          {traj.reward.toFixed(4)}
        </b>
      </span>
      {Object.entries(traj.rewardBreakdown).map(([k, v]) => (
        <span key={k} className="muted">
          {k} <span className="mono">{Number(v).toFixed(3)}</span>
        </span>
      ))}
      <AdvantageSummary traj={traj} />
      {traj.outcome ? <span className="tag">{traj.outcome}</span> : null}
      {traj.branch ? (
        <span data-testid="traj-branch">
          <span className="branch-mark fork">
            <ForkIcon />
          </span>{' '}
          branched from sample <b className="mono">{traj.branch.parent}</b> after turn {traj.branch.turn} <BranchPointBadge branch={traj.branch} />
        </span>
      ) : tree ? (
        <span className="muted" data-testid="traj-branch">
          root sample · {tree.byId.get(traj.id)?.children.length ?? 0} branch(es) taken from it
        </span>
      ) : null}
      {traj.fork ? <ForkOrigin traj={traj} /> : null}
      {traj.task ? <span className="muted">task {traj.task}</span> : null}
      <span className="muted mono" style={{ fontSize: 11 }}>
        {traj.id}
      </span>
    </div>
  );
}
