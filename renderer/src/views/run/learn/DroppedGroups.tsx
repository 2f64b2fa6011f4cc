import { useEffect, useState } from 'react';
import { useArborStore } from '../../../store/react';
import type { TrajectorySummary } from '../../../api/types';
import { fmt } from '../../../lib/format';
import { zeroVarianceGroups } from './learning';

/** A flat group's verdict: all right (saturated), all wrong (failed), or mixed verdicts under one reward. */
function verdictOf(samples: TrajectorySummary[]): string {
  const em = samples.map((t) => (t.outcomeData as { exactMatch?: boolean } | null)?.exactMatch === true);
  return em.every(Boolean) ? 'all right' : em.some(Boolean) ? 'mixed' : 'all wrong';
}

/** The flat groups dynamic sampling dropped and stored (a sample per step, flagged `dropped`): open one in Trajectories. */
export function DroppedGroups({ runId, steps }: { runId: string; steps: { step: number; dropped: number }[] }) {
  const store = useArborStore();
  const [step, setStep] = useState(steps[steps.length - 1]!.step);
  const [groups, setGroups] = useState<ReturnType<typeof zeroVarianceGroups> | null>(null);
  useEffect(() => {
    let live = true;
    setGroups(null);
    void store
      .getState()
      .runActions.fetchTrajectorySummaries(runId, step)
      .then((list) => live && setGroups(zeroVarianceGroups(list.filter((t) => t.signal?.dropped))))
      .catch(() => live && setGroups([]));
    return () => {
      live = false;
    };
  }, [runId, step, store]);
  const openGroup = async (g: { samples: TrajectorySummary[] }) => {
    await store.getState().trajListActions.open(runId, step);
    await store.getState().trajActions.openById(g.samples[0]!.id);
    await store.getState().trajActions.setGroupView(true);
  };
  const dropped = steps.find((s) => s.step === step)?.dropped ?? 0;
  return (
    <div className="toolbar" data-testid="learn-dropped">
      <label htmlFor="dropped-step" className="muted">
        groups dynamic sampling dropped at step
      </label>
      <select id="dropped-step" value={step} onChange={(e) => setStep(Number(e.target.value))} data-testid="dropped-step">
        {steps.map((s) => (
          <option key={s.step} value={s.step}>
            {s.step} ({s.dropped} dropped)
          </option>
        ))}
      </select>
      {groups === null ? <span className="muted">loading…</span> : null}
      {groups?.length ? <span className="muted">{`${groups.length} of ${dropped} stored:`}</span> : null}
      {groups?.length === 0 ? <span className="muted">none stored at this step</span> : null}
      {groups?.map((g) => (
        <button
          key={g.group}
          className="tag"
          data-testid="dropped-group"
          onClick={() => void openGroup(g)}
          title="open this dropped group in Trajectories (group view)"
        >
          group {g.group} · {verdictOf(g.samples)} · reward {fmt(g.reward)} × {g.samples.length}
        </button>
      ))}
    </div>
  );
}
