import type { TrajectoryView } from '../../api/types';
import { useArbor } from '../../store/react';
import { CHANNELS, channelValue, neutralNote, type Channel } from '../../lib/heat';
import { ChannelLegend } from './ChannelLegend';

/** Whether any token of the trajectory has a value on this channel. */
function hasChannel(t: TrajectoryView, c: Channel): boolean {
  return t.turnsData.some((u) => u.tokens.some((_, i) => channelValue(u, c, i) != null));
}

/** Why the open trajectory shows no colour on this channel: nothing stored for it. */
function missingNote(channel: Channel): string {
  if (channel === 'kl') return 'no reference logprobs stored for this trajectory (the run had no KL term)';
  if (channel === 'value') return 'no critic values stored (the run did not use PPO with a critic)';
  return `no ${channel} values stored for this trajectory`;
}

/** The heat map's channel, its legend and scale, what a blank channel means, and the group view switch. */
export function ChannelBar() {
  const traj = useArbor((s) => s.traj.current);
  const channel = useArbor((s) => s.traj.channel);
  const autoRange = useArbor((s) => s.traj.autoRange);
  const groupView = useArbor((s) => s.traj.groupView);
  const a = useArbor((s) => s.trajActions);
  const stored = traj ? hasChannel(traj, channel) : false;
  const neutral = traj && stored ? neutralNote(traj.turnsData, channel) : null;
  return (
    <div className="toolbar">
      <span className="muted">colour</span>
      {CHANNELS.map((c) => (
        <button key={c} className={c === channel ? 'primary' : ''} onClick={() => a.setChannel(c)} data-testid={`channel-${c}`}>
          {c}
        </button>
      ))}
      <ChannelLegend traj={traj} channel={channel} />
      <label className="muted" title="scale the colours by this trajectory's own range (largest |value|) instead of the channel's absolute scale">
        <input type="checkbox" checked={autoRange} onChange={(e) => a.setAutoRange(e.target.checked)} data-testid="auto-range" /> auto range
      </label>
      {traj && !stored ? (
        <span className="muted" style={{ fontSize: 11 }} data-testid="channel-missing">
          {missingNote(channel)}
        </span>
      ) : null}
      {neutral ? (
        <span className="muted" style={{ fontSize: 11 }} data-testid="channel-neutral">
          {neutral}
        </span>
      ) : null}
      <span className="grow" />
      <label className="muted">
        <input type="checkbox" checked={groupView} onChange={(e) => void a.setGroupView(e.target.checked)} data-testid="group-toggle" /> group view
      </label>
    </div>
  );
}
