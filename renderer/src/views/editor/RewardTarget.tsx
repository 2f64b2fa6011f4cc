import { useArbor } from '../../store/react';

/** Which stored trajectory a reward is tried on: a run, then one of its trajectories (by id, with a list to pick from). */
export function RewardTarget() {
  const runs = useArbor((s) => s.runList.runs);
  const tryRunId = useArbor((s) => s.editor.tryRunId);
  const tryTraj = useArbor((s) => s.editor.tryTrajectoryId);
  const tryTrajs = useArbor((s) => s.editor.tryTrajectories);
  const loadTryTrajectories = useArbor((s) => s.editorActions.loadTryTrajectories);
  const setTryTrajectory = useArbor((s) => s.editorActions.setTryTrajectory);
  const t = tryTrajs.find((x) => x.id === tryTraj);
  return (
    <>
      <label className="muted" htmlFor="try-run">
        score a stored trajectory of
      </label>
      <select id="try-run" value={tryRunId} onChange={(e) => void loadTryTrajectories(e.target.value)} data-testid="try-run">
        <option value="">(run)</option>
        {runs.map((r) => (
          <option key={r.id} value={r.id}>
            {r.name}
          </option>
        ))}
      </select>
      <input
        value={tryTraj}
        onChange={(e) => setTryTrajectory(e.target.value)}
        placeholder="trajectory id"
        aria-label="trajectory id"
        list="try-trajs"
        style={{ width: 110 }}
        data-testid="try-trajectory"
        className="mono"
      />
      <datalist id="try-trajs">
        {tryTrajs.map((t) => (
          <option key={t.id} value={t.id}>{`step ${t.step} · group ${t.group} · sample ${t.sample} · stored reward ${t.reward.toFixed(3)}`}</option>
        ))}
      </datalist>
      {t ? (
        <span className="muted">
          step {t.step} · group {t.group} · sample {t.sample} · stored reward <span className="mono">{t.reward.toFixed(3)}</span>
        </span>
      ) : null}
    </>
  );
}
