// The pinned inspector of the keyboard token cursor (h / l): every value stored for the token
// (sampling, reference, what training applied) and, on demand, the top-k alternatives at that
// position under the checkpoint that sampled it (replay.topk, computed through the model).
import { useEffect, useState } from 'react';
import type { Checkpoint, TrajectoryView } from '../../api/types';
import { useArbor, useArborStore } from '../../store/react';
import { weightsNote } from './fork/weights';

/** A probability as text: 4 decimals, or 2 significant digits when that would print 0.0000. */
export const probText = (p: number) => (p >= 5e-5 || p === 0 ? p.toFixed(4) : p.toExponential(1));
/** Whether a top-k request (its store key ends with the checkpoint asked for) named its checkpoint. */
const topkChosen = (key: string) => !key.endsWith(':');

const num = (v: number | null | undefined, d = 4) => (v == null || !Number.isFinite(v) ? '—' : v.toFixed(d));
const CLIP: Record<number, string> = {
  0: 'no',
  1: 'upper bound (A > 0, ratio > 1 + ε_high)',
  [-1]: 'lower bound (A < 0, ratio < 1 − ε_low)',
  2: 'dual clip (A < 0, ratio > c)',
};

export function TokenInspector({ traj }: { traj: TrajectoryView }) {
  const store = useArborStore();
  const cursor = useArbor((s) => s.traj.cursor);
  const topk = useArbor((s) => s.traj.topk);
  // The run's checkpoints (the SFT checkpoint at step 0 among them): top-k under weights of your choice.
  const [cks, setCks] = useState<Checkpoint[]>([]);
  const [pick, setPick] = useState('');
  useEffect(() => {
    let live = true;
    void store
      .getState()
      .forkActions.listAllCheckpoints()
      .then((all) => live && setCks(all.filter((c) => c.runId === traj.runId).sort((a, b) => a.step - b.step)));
    return () => {
      live = false;
    };
  }, [store, traj.runId]);
  if (!cursor) return null;
  const u = traj.turnsData[cursor.turn];
  if (!u) return null;
  const i = cursor.tok;
  const generated = !u.lossMask || u.lossMask[i] !== 0;
  const at = (a: ArrayLike<number> | null | undefined) => (a && i < a.length ? a[i] : undefined);
  const lp = generated ? at(u.logprob) : undefined;
  const ref = generated ? at(u.refLogprob) : undefined;
  const teach = generated ? at(u.teacherLogprob) : undefined;
  const clipped = at(u.clipped);
  const g = traj.signal?.group;
  const rows: [string, string, string][] = [
    ['token', JSON.stringify(u.tokens[i] ?? ''), 'token'],
    ['id', String(u.tokenIds[i] ?? '—'), 'id'],
    ['turn · position', `${cursor.turn + 1} · ${i}`, 'pos'],
    ['logprob', num(lp), 'logprob'],
    ['prob', lp == null ? '—' : Math.exp(lp).toFixed(4), 'prob'],
    ['entropy', num(generated ? at(u.entropy) : undefined), 'entropy'],
    ['advantage', num(generated ? at(u.advantage) : undefined), 'advantage'],
    ['· outcome part', num(generated ? at(u.advOutcome) : undefined), 'adv-outcome'],
    ['· process part', num(generated ? at(u.advProcess) : undefined), 'adv-process'],
    ['ratio π/π_old', num(generated ? at(u.ratio) : undefined), 'ratio'],
    ['clipped', generated && clipped !== undefined ? (CLIP[clipped] ?? String(clipped)) : '—', 'clipped'],
    [`loss weight (${traj.signal?.lossAggMode ?? '—'})`, generated && at(u.lossWeight) !== undefined ? at(u.lossWeight)!.toExponential(3) : '—', 'weight'],
    ['critic value', num(at(u.value)), 'value'],
    ['ref logprob', num(ref), 'ref'],
    ['kl (lp−ref)', lp == null || ref == null ? '—' : (lp - ref).toFixed(4), 'kl'],
    // algorithm.distill: the teacher's logprob and the per-token reverse KL estimate (rows only when the run stored them).
    ...(u.teacherLogprob
      ? ([
          ['teacher logprob', num(teach), 'teacher'],
          ['teacher kl (lp−teacher)', lp == null || teach == null ? '—' : (lp - teach).toFixed(4), 'teacher-kl'],
        ] as [string, string, string][])
      : []),
    ['loss mask', u.lossMask ? `${u.lossMask[i]}${generated ? '' : ' (not generated)'}` : '—', 'mask'],
  ];
  return (
    <div className="panel inspector" data-testid="token-inspector">
      <div className="muted" style={{ marginBottom: 4 }}>
        token cursor · <span className="kbd">h</span>/<span className="kbd">l</span> move · <span className="kbd">a</span> alternatives ·{' '}
        <span className="kbd">Esc</span> close
        {g ? (
          <span data-testid="inspector-group">
            {' '}
            · group reward mean {num(g.mean, 3)} std {num(g.std, 3)} (n {g.n})
          </span>
        ) : null}
      </div>
      <table>
        <tbody>
          {rows.map(([k, v, id]) => (
            <tr key={k}>
              <td className="muted">{k}</td>
              <td className="mono" data-testid={`inspector-${id}`}>
                {v}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <div style={{ marginTop: 6 }}>
        {cks.length ? (
          <label className="muted" style={{ display: 'block', marginBottom: 4 }}>
            weights{' '}
            <select
              value={pick}
              data-testid="inspector-topk-weights-pick"
              onChange={(e) => {
                setPick(e.target.value);
                if (topk) void store.getState().trajActions.loadTopK(e.target.value || undefined);
              }}
            >
              <option value="">the sampler's (or the nearest kept)</option>
              {cks.map((c) => (
                <option key={c.id} value={c.id}>
                  {c.step === 0 ? 'SFT checkpoint (step 0)' : `step ${c.step}`}
                </option>
              ))}
            </select>
          </label>
        ) : null}
        {!topk ? (
          <button
            onClick={() => void store.getState().trajActions.loadTopK(pick || undefined)}
            data-testid="inspector-topk-load"
            disabled={i === 0 && cursor.turn === 0}
          >
            Top-k alternatives here
          </button>
        ) : topk.error ? (
          <span className="err" data-testid="inspector-topk-error">
            {topk.error}
          </span>
        ) : !topk.result ? (
          <span className="muted">computing the alternatives…</span>
        ) : (
          <div data-testid="inspector-topk">
            <div className="muted">
              under <span data-testid="inspector-topk-weights">{weightsNote(topk.result.checkpoint, traj, topkChosen(topk.key))}</span>; the sampled token is
              rank {topk.result.sampled.rank} with p {probText(topk.result.sampled.prob)}
            </div>
            <table>
              <tbody>
                {topk.result.alternatives.map((a) => (
                  <tr key={a.id} className={`alt ${a.id === topk.result!.sampled.id ? 'sampled' : ''}`} data-testid="inspector-alt">
                    <td className="mono">{JSON.stringify(a.token)}</td>
                    <td className="mono">{probText(a.prob)}</td>
                    <td className="mono muted">{a.logprob.toFixed(3)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </div>
    </div>
  );
}
