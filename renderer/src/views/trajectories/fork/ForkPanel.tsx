// What-if replay from the workbench (engine/replay through replay.fork): pick a turn (or a token
// of a model turn), optionally edit the tool's observation or the model's text there, pick a
// checkpoint of the run (or any stored one), and sample the rest N times. The continuations are
// stored linked to the trajectory and shown here beside it with their rewards and answers, with
// the shared prefix's per-token logprob under the checkpoint against the stored one.
import { useEffect, useState } from 'react';
import { TemperatureField } from '../../../components/TemperatureField';
import { NumberField } from '../../../components/NumberField';
import type { Checkpoint, TrajectoryView } from '../../../api/types';
import { useArbor, useArborStore } from '../../../store/react';
import { ForkResultView } from './ForkResultView';
import { ForkList } from './ForkList';

export function ForkPanel({ traj }: { traj: TrajectoryView }) {
  const store = useArborStore();
  const forks = useArbor((s) => s.forks.items);
  const forking = useArbor((s) => s.forks.running);
  const progress = useArbor((s) => s.forks.progress);
  const result = useArbor((s) => s.forks.result);
  const runs = useArbor((s) => s.runList.runs);
  const [checkpoints, setCheckpoints] = useState<Checkpoint[]>([]);
  const firstTool = traj.turnsData.findIndex((u, i) => i > 0 && u.role !== 'model');
  const [turn, setTurn] = useState(firstTool > 0 ? firstTool : Math.min(1, traj.turnsData.length - 1));
  const [token, setToken] = useState('');
  const [edit, setEdit] = useState('');
  const [checkpoint, setCheckpoint] = useState('');
  const [n, setN] = useState(4);
  const [temperature, setTemperature] = useState(1);
  useEffect(() => {
    let live = true;
    void store
      .getState()
      .forkActions.listAllCheckpoints()
      .then((cks) => {
        if (!live) return;
        setCheckpoints(cks);
        // Default: this run's checkpoint before the trajectory's step (the weights that sampled it), else its latest.
        const own = cks.filter((c) => c.runId === traj.runId);
        const before = own.filter((c) => c.step < traj.step);
        setCheckpoint((before[before.length - 1] ?? own[own.length - 1] ?? cks[cks.length - 1])?.id ?? '');
      });
    return () => {
      live = false;
    };
  }, [store, traj.runId, traj.step]);
  const u = traj.turnsData[turn];
  const isModel = u?.role === 'model';
  const runName = (id: string) => runs.find((r) => r.id === id)?.name ?? id.slice(0, 8);
  const go = () => {
    const tokNum = token === '' ? undefined : Number(token);
    void store.getState().forkActions.fork({
      turn,
      ...(isModel && tokNum !== undefined ? { token: tokNum } : {}),
      ...(edit ? (isModel ? { text: edit } : { observation: edit }) : {}),
      checkpoint,
      n,
      temperature,
    });
  };
  return (
    <div className="panel fork-panel" data-testid="fork-panel">
      <div className="row">
        <b>What if…</b>
        <label>
          fork at{' '}
          <select value={turn} onChange={(e) => setTurn(Number(e.target.value))} data-testid="fork-turn">
            {traj.turnsData.map((t, i) => (
              <option key={i} value={i}>
                turn {i + 1} · {t.role}
              </option>
            ))}
          </select>
        </label>
        {isModel ? (
          <label>
            after token{' '}
            <input
              type="number"
              min={0}
              max={u.tokenIds.length}
              style={{ width: 56 }}
              value={token}
              placeholder="0"
              onChange={(e) => setToken(e.target.value)}
              data-testid="fork-token"
            />
          </label>
        ) : null}
        <label>
          checkpoint{' '}
          <select value={checkpoint} onChange={(e) => setCheckpoint(e.target.value)} data-testid="fork-checkpoint">
            {checkpoints.map((c) => (
              <option key={c.id} value={c.id}>
                {runName(c.runId)} · {c.step === 0 ? 'SFT checkpoint (step 0)' : `step ${c.step}`}
              </option>
            ))}
          </select>
        </label>
        <NumberField label="n" min={1} max={64} width={48} value={n} onChange={(raw) => setN(Math.max(1, Number(raw) || 1))} testId="fork-n" />
        <TemperatureField value={temperature} onChange={(t) => setTemperature(t ?? 0)} testId="fork-temperature" />
        <button className="primary" disabled={forking || !checkpoint || !u} onClick={go} data-testid="fork-run">
          {forking ? `sampling ${progress ? `${progress.done}/${progress.total}` : '…'}` : 'Re-sample'}
        </button>
      </div>
      {u && u.role !== 'env' ? (
        <textarea
          rows={2}
          value={edit}
          onChange={(e) => setEdit(e.target.value)}
          aria-label={isModel ? 'text the model writes after the kept tokens' : "the tool's result the model sees instead"}
          placeholder={
            isModel
              ? 'optional: text the model writes after the kept tokens (then it continues)'
              : "optional: the tool's result the model sees instead (empty: keep the stored observation)"
          }
          data-testid="fork-edit"
        />
      ) : null}
      {result ? <ForkResultView result={result} traj={traj} /> : null}
      {forks.length ? <ForkList forks={forks} parent={traj} /> : null}
    </div>
  );
}
