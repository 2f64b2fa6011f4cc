import { useArbor } from '../../store/react';
import type { TrajSort } from '../../store/trajectories';
import { isSftWarmStart } from '../../lib/lineage';
import { stepLabel } from './stepLabel';
import { RewardBound } from './RewardBound';
import { KeyHints } from './KeyHints';

/** What the list shows: the run, the step, the filters, following a live run, the order; and the keys. */
export function TrajectoryToolbar({ branched }: { branched: boolean }) {
  const runs = useArbor((s) => s.runList.runs);
  const { runId, steps, step, filter, follow, sort } = useArbor((s) => s.trajList);
  const a = useArbor((s) => s.trajListActions);
  return (
    <div className="toolbar">
      <h2>Trajectories</h2>
      <select value={runId ?? ''} onChange={(e) => e.target.value && void a.open(e.target.value)} data-testid="traj-run" aria-label="run">
        <option value="">(run)</option>
        {/* SFT warm starts store no trajectories (their RL runs do). */}
        {runs
          .filter((r) => !isSftWarmStart(r))
          .map((r) => (
            <option key={r.id} value={r.id}>
              {r.name}
            </option>
          ))}
      </select>
      <label className="muted">step</label>
      <select value={step ?? ''} onChange={(e) => void a.setStep(Number(e.target.value))} data-testid="traj-step" aria-label="step">
        {steps.map((s) => (
          <option key={s} value={s}>
            {stepLabel(s)}
          </option>
        ))}
      </select>
      <RewardBound label="reward ≥" aria="reward at least" value={filter.minReward} onChange={(minReward) => void a.setFilter({ minReward })} />
      <RewardBound label="≤" aria="reward at most" value={filter.maxReward} onChange={(maxReward) => void a.setFilter({ maxReward })} />
      <label className="muted">
        <input type="checkbox" checked={filter.errorsOnly} onChange={(e) => void a.setFilter({ errorsOnly: e.target.checked })} /> errors
      </label>
      <input
        placeholder="task"
        aria-label="task filter"
        style={{ width: 100 }}
        value={filter.task}
        onChange={(e) => void a.setFilter({ task: e.target.value })}
      />
      <label className="muted">
        <input type="checkbox" checked={follow} onChange={(e) => void a.setFollow(e.target.checked)} data-testid="follow" /> follow live
      </label>
      <label className="muted">
        sort{' '}
        <select value={sort} onChange={(e) => a.setSort(e.target.value as TrajSort)} data-testid="traj-sort">
          <option value="order">group, sample</option>
          <option value="abs-advantage">|advantage|</option>
          <option value="clip-share">clipped share</option>
          <option value="kl">|KL|</option>
        </select>
      </label>
      <span className="grow" />
      <KeyHints branched={branched} />
    </div>
  );
}
