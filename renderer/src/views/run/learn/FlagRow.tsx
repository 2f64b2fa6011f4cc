import { useState } from 'react';
import { useArborStore } from '../../../store/react';
import type { TrajectorySummary } from '../../../api/types';
import { fmt } from '../../../lib/format';
import { zeroVarianceGroups } from './learning';

/** One flagged step and its reasons; opened, the step's zero-variance groups, each opening its group in the replay. */
export function FlagRow({ runId, step, reasons, open, onToggle }: { runId: string; step: number; reasons: string[]; open: boolean; onToggle: () => void }) {
  const store = useArborStore();
  const [groups, setGroups] = useState<ReturnType<typeof zeroVarianceGroups> | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    onToggle();
    if (groups || open) return;
    try {
      setGroups(zeroVarianceGroups(await store.getState().runActions.fetchTrajectorySummaries(runId, step)));
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  const openGroup = async (g: { samples: TrajectorySummary[] }) => {
    const s = store.getState();
    await s.trajListActions.open(runId, step);
    await store.getState().trajActions.openById(g.samples[0]!.id);
    await store.getState().trajActions.setGroupView(true);
  };
  return (
    <>
      <tr data-testid={`learn-flag-${step}`}>
        <td className="num">{step}</td>
        <td>{reasons.join('; ')}</td>
        <td>
          <button onClick={() => void load()} data-testid="learn-flag-open">
            {open ? 'hide' : 'trajectories'}
          </button>
        </td>
      </tr>
      {open ? (
        <tr>
          <td />
          <td colSpan={2} data-testid="learn-flag-groups">
            {error ? <span className="error-msg">{error}</span> : null}
            {groups === null && !error ? <span className="muted">loading…</span> : null}
            {groups?.length === 0 ? (
              <span className="muted">no zero-variance group at this step (no stored trajectories, or the reasons above are others)</span>
            ) : null}
            {groups?.length ? <span className="muted">zero-variance groups: </span> : null}
            {groups?.map((g) => (
              <button key={g.group} className="tag" data-testid="zv-group" onClick={() => void openGroup(g)} title="open this group's samples in Trajectories">
                group {g.group} · reward {fmt(g.reward)} × {g.samples.length}
              </button>
            ))}
          </td>
        </tr>
      ) : null}
    </>
  );
}
