import { useEffect, useMemo, useRef } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import type { TrajectoryView } from '../../api/types';
import { useArbor } from '../../store/react';
import { channelScale } from '../../lib/heat';
import { oddSamples } from '../../lib/group';
import { isWordLevel } from './turns/rows';
import { JudgePanel } from './judge/JudgePanel';
import { GroupColumn } from './GroupColumn';

/** Length of the token prefix every sample of the group shares (the prompt, at least). */
function sharedPrefix(group: TrajectoryView[]): number {
  if (!group.length) return 0;
  const flat = group.map((g) => g.turnsData.flatMap((u) => u.tokenIds));
  const n = Math.min(...flat.map((f) => f.length));
  let p = 0;
  while (p < n && flat.every((f) => f[p] === flat[0]![p])) p++;
  return p;
}

const COLUMN = 320;

/**
 * All samples of the prompt side by side, aligned: the prefix they share is collapsed into one
 * line (the prompt and any common opening), each column starts where its sample leaves the
 * others, with that first divergent token marked. The header has the group's reward mean and
 * std. Columns are virtualised (only the visible ones exist in the DOM).
 */
export function GroupPane() {
  const group = useArbor((s) => s.traj.group);
  const traj = useArbor((s) => s.traj.current);
  const channel = useArbor((s) => s.traj.channel);
  const openById = useArbor((s) => s.trajActions.openById);
  const auto = useArbor((s) => s.traj.autoRange);
  const scale = useMemo(
    () =>
      channelScale(
        group.flatMap((g) => g.turnsData),
        channel,
        (t) => (t as { tokens: string[] }).tokens.length,
        auto,
      ),
    [group, channel, auto],
  );
  const words = useMemo(() => group.some(isWordLevel), [group]);
  const prefix = useMemo(() => sharedPrefix(group), [group]);
  const mean = group.length ? group.reduce((a, g) => a + g.reward, 0) / group.length : 0;
  const std = group.length > 1 ? Math.sqrt(group.reduce((a, g) => a + (g.reward - mean) ** 2, 0) / (group.length - 1)) : 0;
  const host = useRef<HTMLDivElement>(null);
  const virt = useVirtualizer({ horizontal: true, count: group.length, getScrollElement: () => host.current, estimateSize: () => COLUMN, overscan: 3 });
  const prefixText = useMemo(() => {
    const g = group[0];
    if (!g) return '';
    const toks = g.turnsData.flatMap((u) => u.tokens).slice(0, prefix);
    const tail = toks.slice(-12).join(words ? ' ' : '');
    return tail.length < toks.join('').length ? `… ${tail}` : tail;
  }, [group, prefix, words]);
  // The samples whose reward is not the group's most common one (the odd one out: the one success
  // among failures, or the reverse): marked in the jump strip, since 8 columns do not fit on screen.
  const odd = useMemo(() => oddSamples(group.map((g) => g.reward)), [group]);
  const selIndex = group.findIndex((g) => g.id === traj?.id);
  // The open sample's column is scrolled into view when the group opens or the sample changes.
  useEffect(() => {
    if (selIndex >= 0) virt.scrollToIndex(selIndex, { align: 'auto' });
  }, [selIndex, group.length, virt]);
  // A trajectory is always in its own group: an empty one is still loading (not "0 samples, prefix 0").
  if (!group.length) return <div className="panel muted">loading the group's samples…</div>;
  return (
    <div style={{ display: 'flex', flexDirection: 'column', gap: 6, minWidth: 0 }}>
      <div className="panel" data-testid="group-stats" style={{ fontSize: 12 }}>
        {group.length} samples · reward mean <b className="mono">{mean.toFixed(3)}</b> · std <b className="mono">{std.toFixed(3)}</b>
        {std === 0 && group.length > 1 ? <span className="flag">flat: no GRPO signal</span> : null} · shared prefix{' '}
        <b className="mono" data-testid="group-prefix-tokens">
          {prefix}
        </b>{' '}
        tokens, collapsed: <span className="mono muted">{prefixText}</span>
      </div>
      <JudgePanel group={group} />
      <div className="toolbar group-jump" data-testid="group-jump" aria-label="scroll to a sample">
        {group.map((g, i) => (
          <button
            key={g.id}
            className={`tag${odd.has(i) ? ' odd' : ''}${g.id === traj?.id ? ' active' : ''}`}
            data-testid="group-jump-sample"
            data-odd={odd.has(i) ? 'true' : undefined}
            title={odd.has(i) ? 'reward unlike the rest of the group' : undefined}
            onClick={() => virt.scrollToIndex(i, { align: 'center' })}
          >
            {g.sample}: {g.reward.toFixed(2)}
            {odd.has(i) ? ' ◆' : ''}
          </button>
        ))}
      </div>
      <div
        ref={host}
        className="group-grid"
        data-testid="group-view"
        tabIndex={0}
        role="region"
        aria-label={`${group.length} samples of the group, side by side`}
        style={{ overflowX: 'auto', position: 'relative', height: 'calc(100vh - 290px)', display: 'block' }}
      >
        <div style={{ width: virt.getTotalSize(), height: '100%', position: 'relative' }}>
          {virt.getVirtualItems().map((v) => (
            <GroupColumn
              key={group[v.index]!.id}
              g={group[v.index]!}
              left={v.start}
              width={COLUMN - 8}
              prefix={prefix}
              mean={mean}
              open={group[v.index]!.id === traj?.id}
              odd={odd.has(v.index)}
              channel={channel}
              scale={scale}
              words={words}
              onOpen={() => void openById(group[v.index]!.id)}
            />
          ))}
        </div>
      </div>
    </div>
  );
}
