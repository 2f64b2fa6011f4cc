import { useEffect, useMemo, useRef } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import { useArbor } from '../../store/react';
import type { TrajectorySummary } from '../../api/types';
import { TrajectoryRow } from './TrajectoryRow';

/** Keys (`step:group`) of the flat groups: every sample has the same reward and no advantage (zero variance: no learning signal). */
function flatGroupKeys(list: TrajectorySummary[]): Set<string> {
  const by = new Map<string, TrajectorySummary[]>();
  for (const t of list) by.set(`${t.step}:${t.group}`, [...(by.get(`${t.step}:${t.group}`) ?? []), t]);
  return new Set([...by].filter(([, ts]) => ts.length > 1 && ts.every((t) => t.reward === ts[0]!.reward && Math.abs(t.advantage ?? 0) < 1e-9)).map(([k]) => k));
}

/** The step's trajectories, virtualised, the open one selected and scrolled into view. */
export function TrajectoryList() {
  const list = useArbor((s) => s.trajList.items);
  const step = useArbor((s) => s.trajList.step);
  const sampleIndex = useArbor((s) => s.traj.index);
  const openSample = useArbor((s) => s.trajActions.openSample);
  const flatGroups = useMemo(() => flatGroupKeys(list), [list]);
  const listRef = useRef<HTMLDivElement>(null);
  const virt = useVirtualizer({ count: list.length, getScrollElement: () => listRef.current, estimateSize: () => 24, overscan: 20 });
  useEffect(() => {
    if (sampleIndex >= 0) virt.scrollToIndex(sampleIndex, { align: 'auto' });
  }, [sampleIndex, virt]);
  return (
    <div className="list" ref={listRef} style={{ height: 'calc(100vh - 120px)' }} data-testid="traj-list">
      <div className="list-row muted" style={{ cursor: 'default', position: 'sticky', top: 0, background: 'var(--panel)', zIndex: 1 }}>
        <span>grp</span>
        <span>smp</span>
        <span>prompt</span>
        <span style={{ textAlign: 'right' }}>reward</span>
        <span style={{ textAlign: 'right' }}>adv</span>
      </div>
      <div style={{ height: virt.getTotalSize(), position: 'relative' }}>
        {virt.getVirtualItems().map((v) => (
          <TrajectoryRow
            key={list[v.index].id}
            t={list[v.index]}
            selected={v.index === sampleIndex}
            flat={flatGroups.has(`${list[v.index].step}:${list[v.index].group}`)}
            top={v.start}
            onOpen={() => void openSample(v.index)}
          />
        ))}
      </div>
      {list.length === 0 ? <div className="empty">No trajectories{step == null ? ' stored for this run yet' : ' match'}.</div> : null}
    </div>
  );
}
