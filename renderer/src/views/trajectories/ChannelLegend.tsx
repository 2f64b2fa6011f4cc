import { useMemo } from 'react';
import type { TrajectoryView } from '../../api/types';
import { useArbor } from '../../store/react';
import { channelScale, rampCss, scaleTicks, type Channel } from '../../lib/heat';

/** The active channel with its ramp and the numbers of its scale (absolute: the same for every trajectory). */
export function ChannelLegend({ traj, channel }: { traj: TrajectoryView | null; channel: Channel }) {
  const auto = useArbor((s) => s.traj.autoRange);
  const scale = useMemo(() => channelScale(traj?.turnsData ?? [], channel, (t) => (t as { tokens: string[] }).tokens.length, auto), [traj, channel, auto]);
  const [lo, mid, hi] = scaleTicks(channel, scale);
  return (
    <span className="legend-bar" data-testid="channel-legend">
      <span style={{ display: 'inline-flex', flexDirection: 'column' }}>
        <span className="ramp" style={{ background: rampCss(channel) }} />
        <span className="legend-ticks" data-testid="channel-ticks">
          <span>{lo}</span>
          <span>{mid}</span>
          <span>{hi}</span>
        </span>
      </span>{' '}
      <span data-testid="channel-active">{channel}</span>
    </span>
  );
}
