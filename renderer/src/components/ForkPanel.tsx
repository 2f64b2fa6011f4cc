// What-if replay from the workbench (engine/replay through replay.fork): pick a turn (or a token
// of a model turn), optionally edit the tool's observation or the model's text there, pick a
// checkpoint of the run (or any stored one), and sample the rest N times. The continuations are
// stored linked to the trajectory and shown here beside it with their rewards and answers, with
// the shared prefix's per-token logprob under the checkpoint against the stored one.
import { weightsNote } from './Weights';
import { useEffect, useMemo, useState } from 'react';
import { TemperatureField } from './TemperatureField';
import { NumberField } from './NumberField';
import type { Checkpoint, ForkResult, Trajectory, TrajSummary } from '../api/types';
import { useArbor, useArborStore } from '../store/react';

export function ForkPanel({ traj }: { traj: Trajectory }) {
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

/** The last fork: its prefix (and the edit as tokens) and the score graph of the prefix. */
function ForkResultView({ result, traj }: { result: ForkResult; traj: Trajectory }) {
  const f = result.fork;
  return (
    <div data-testid="fork-result">
      <div className="muted">
        kept {f.prefixTokens} stored tokens (up to turn {f.turn + 1}
        {f.token !== null ? `, token ${f.token}` : ''})
        {f.edit ? (
          <>
            , then the {f.edit.kind} edit as {f.edit.ids.length} tokens:{' '}
            <span className="mono" data-testid="fork-edit-ids">
              [{f.edit.ids.join(' ')}]
            </span>
            {f.edit.replaced === 'result' ? " (the tool's result replaced inside the observation)" : ''}
          </>
        ) : null}{' '}
        · checkpoint {f.checkpoint.id} <span data-testid="fork-weights">({weightsNote(f.checkpoint, traj)})</span> · T {f.sampling.temperature} · seed{' '}
        {f.sampling.seed}
      </div>
      <ScoreGraph original={result.prefix.original} checkpoint={result.prefix.checkpoint} shared={f.prefixTokens} />
    </div>
  );
}

/** Per-token logprob of the shared prefix: stored (as sampled) against the checkpoint's, over the model's tokens. */
function ScoreGraph({ original, checkpoint, shared }: { original: (number | null)[]; checkpoint: number[]; shared: number }) {
  const W = 560;
  const H = 90;
  const pts = useMemo(() => {
    const n = checkpoint.length;
    const lo = -8;
    const x = (i: number) => (n <= 1 ? 0 : (i / (n - 1)) * W);
    const y = (v: number) => Math.min(H, (Math.max(lo, v) / lo) * H);
    const line = (vals: (number | null)[]) =>
      vals
        .map((v, i) => (v === null || !Number.isFinite(v) ? null : `${x(i).toFixed(1)},${y(v).toFixed(1)}`))
        .filter(Boolean)
        .join(' ');
    const modelOnly = checkpoint.map((v, i) => (original[i] === null || i >= shared ? null : v));
    return { orig: line(original), ck: line(modelOnly), all: line(checkpoint), edge: x(shared) };
  }, [original, checkpoint, shared]);
  const mean = (a: (number | null)[]) => {
    const v = a.filter((x): x is number => x !== null && Number.isFinite(x));
    return v.length ? (v.reduce((p, q) => p + q, 0) / v.length).toFixed(3) : '—';
  };
  return (
    <div data-testid="fork-score">
      <svg width={W} height={H} style={{ background: '#14161b', border: '1px solid var(--line)' }} aria-label="prefix logprob: stored vs checkpoint">
        <polyline points={pts.all} fill="none" stroke="#555" strokeWidth={1} />
        <polyline points={pts.orig} fill="none" stroke="#e0b050" strokeWidth={1.5} />
        <polyline points={pts.ck} fill="none" stroke="#5fb0ff" strokeWidth={1.5} />
        <line x1={pts.edge} x2={pts.edge} y1={0} y2={H} stroke="#d98cff" strokeDasharray="3 3" />
      </svg>
      <div className="muted">
        logprob per token (0 top, −8 bottom) of the prefix: <span style={{ color: '#e0b050' }}>stored (sampled) mean {mean(original)}</span> ·{' '}
        <span style={{ color: '#5fb0ff' }}>
          checkpoint on the model's tokens mean {mean(checkpoint.map((v, i) => (original[i] === null || i >= shared ? null : v)))}
        </span>{' '}
        · grey: every token under the checkpoint · dashed: the fork point
      </div>
    </div>
  );
}

/** Every stored continuation of the trajectory, beside it: reward, answer, where it forked, with which checkpoint. */
function ForkList({ forks, parent }: { forks: TrajSummary[]; parent: Trajectory }) {
  const open = useArbor((s) => s.trajActions.openById);
  return (
    <div>
      <div className="muted">
        {forks.length} continuation(s) of this trajectory (reward {parent.reward.toFixed(3)}):
      </div>
      <div className="fork-children" data-testid="fork-children">
        {forks.map((c) => (
          <div key={c.id} className="fork-child" onClick={() => void open(c.id)} data-testid="fork-child" data-id={c.id}>
            <div>
              reward{' '}
              <b
                className="mono"
                style={{ color: c.reward > parent.reward ? 'var(--ok)' : c.reward < parent.reward ? 'var(--err)' : undefined }}
                data-testid="fork-child-reward"
              >
                {c.reward.toFixed(3)}
              </b>{' '}
              {(c.outcomeData as { truncated?: boolean }).truncated ? <span className="flag">truncated</span> : null}
            </div>
            <div className="mono">answer {c.outcome === undefined ? '—' : JSON.stringify(c.outcome)}</div>
            <div className="muted">
              turn {(c.fork?.turn ?? 0) + 1}
              {c.fork?.edit ? ` · ${c.fork.edit.kind} edited` : ''} ·{' '}
              {c.fork?.checkpoint.step !== undefined ? `step ${c.fork.checkpoint.step}` : c.fork?.checkpoint.id} · T {c.fork?.sampling.temperature}
            </div>
          </div>
        ))}
      </div>
    </div>
  );
}
