import { useEffect, useMemo, useRef } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import { useArbor } from '../../store/react';
import type { TrajSummary } from '../../api/types';
import { ForkIcon } from '../../components/Turns';
import { taskMessage } from '../../components/Verdict';

/** Keys (`step:group`) of the flat groups: every sample has the same reward and no advantage (zero variance: no learning signal). */
function flatGroupKeys(list: TrajSummary[]): Set<string> {
  const by = new Map<string, TrajSummary[]>();
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

/** One row: group, sample (a branch marked), the task's question with its flags, reward and advantage. */
function TrajectoryRow({ t, selected, flat, top, onOpen }: { t: TrajSummary; selected: boolean; flat: boolean; top: number; onOpen: () => void }) {
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
