import './trajectories.css';
import { useArbor } from '../../store/react';
import { BranchTreePanel } from './branch-tree/BranchTreePanel';
import { useReplayKeys } from './useReplayKeys';
import { useBranchTree } from './useBranchTree';
import { TrajectoryToolbar } from './TrajectoryToolbar';
import { TrajectoryList } from './TrajectoryList';
import { ChannelBar } from './ChannelBar';
import { TrajectoryPane } from './TrajectoryPane';
import { GroupPane } from './GroupPane';

/** Replay a run's trajectories: the step's list on the left, the open trajectory (or its group, or its branch tree) on the right. */
export function TrajectoriesView() {
  const runId = useArbor((s) => s.trajList.runId);
  const listed = useArbor((s) => s.trajList.items.length > 0);
  const traj = useArbor((s) => s.traj.current);
  const channel = useArbor((s) => s.traj.channel);
  const groupView = useArbor((s) => s.traj.groupView);
  useReplayKeys(true);
  const tree = useBranchTree();
  return (
    <div className="view" data-testid="view-trajectories" style={{ height: '100%' }}>
      <TrajectoryToolbar branched={tree != null} />
      {!runId ? <div className="empty">Pick a run to replay its trajectories.</div> : null}
      {runId ? (
        <div className={`split ${tree && !groupView ? 'with-tree' : ''}`} style={{ minHeight: 0 }}>
          <TrajectoryList />
          <div style={{ minWidth: 0, display: 'flex', flexDirection: 'column', gap: 8 }}>
            <ChannelBar />
            {traj && !groupView && tree ? (
              <div className="branch-split">
                <BranchTreePanel tree={tree} />
                <div style={{ minWidth: 0, display: 'flex', flexDirection: 'column', gap: 8 }}>
                  <TrajectoryPane traj={traj} channel={channel} tree={tree} />
                </div>
              </div>
            ) : null}
            {traj && !groupView && !tree ? <TrajectoryPane traj={traj} channel={channel} tree={null} /> : null}
            {traj && groupView ? <GroupPane /> : null}
            {!traj && listed ? <div className="empty">Loading…</div> : null}
          </div>
        </div>
      ) : null}
    </div>
  );
}
