import { useMemo } from 'react';
import type { TrajectoryView } from '../../api/types';
import { useArbor } from '../../store/react';
import type { Channel } from '../../lib/heat';
import { turnOrigins, type BranchTree } from '../../lib/branchTree';
import type { TurnDrift } from './turns/DriftNote';
import { VerdictStrip } from './Verdict';
import { TokenInspector } from './TokenInspector';
import { ForkPanel } from './fork/ForkPanel';
import { TrajectoryHeader } from './TrajectoryHeader';
import { DriftSummary } from './DriftSummary';
import { TurnList } from './TurnList';

/** One open trajectory: its header, verdict and drift, its turns beside the token inspector, and the What-if fork panel. */

export function TrajectoryPane({ traj, channel, tree }: { traj: TrajectoryView; channel: Channel; tree: BranchTree | null }) {
  const turnIndex = useArbor((s) => s.traj.turn);
  const driftReport = useArbor((s) => s.traj.drift);
  const cursor = useArbor((s) => s.traj.cursor);
  const setCursor = useArbor((s) => s.trajActions.setCursor);
  const autoRange = useArbor((s) => s.traj.autoRange);
  const drift = useMemo(() => {
    const m = new Map<number, TurnDrift>();
    if (driftReport) for (const d of driftReport.turns) m.set(d.turn, d);
    return m;
  }, [driftReport]);
  const origins = useMemo(() => (tree && traj.branch ? turnOrigins(traj, tree) : undefined), [traj, tree]);
  return (
    <>
      <TrajectoryHeader traj={traj} tree={tree} />
      <VerdictStrip traj={traj} />
      <DriftSummary traj={traj} />
      <div className="replay-body">
        <div className="turns-col">
          <TurnList
            traj={traj}
            channel={channel}
            turnIndex={turnIndex}
            height="max(300px, calc(100vh - 420px))"
            origins={origins}
            drift={drift}
            cursor={cursor}
            setCursor={setCursor}
            autoRange={autoRange}
          />
        </div>
        <TokenInspector traj={traj} />
      </div>
      <ForkPanel key={traj.id} traj={traj} />
    </>
  );
}
