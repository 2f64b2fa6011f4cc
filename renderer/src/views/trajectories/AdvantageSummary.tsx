import { useMemo } from 'react';
import type { TrajectoryView } from '../../api/types';

/**
 * The trajectory's advantage as its tokens carry it: the mean over the model's tokens (what the
 * stored summary holds), the range of the per-token values, the outcome and process parts, and the
 * group's reward mean and std that normalised it.
 */
export function AdvantageSummary({ traj }: { traj: TrajectoryView }) {
  const st = useMemo(() => {
    let n = 0;
    let sum = 0;
    let lo = Infinity;
    let hi = -Infinity;
    let out = 0;
    let proc = 0;
    let parts = false;
    for (const u of traj.turnsData)
      u.tokenIds.forEach((_, i) => {
        if (u.lossMask && u.lossMask[i] === 0) return;
        const a = u.advantage?.[i];
        if (a == null || !Number.isFinite(a)) return;
        n++;
        sum += a;
        lo = Math.min(lo, a);
        hi = Math.max(hi, a);
        if (u.advOutcome && u.advProcess) {
          parts = true;
          out += u.advOutcome[i] ?? 0;
          proc += u.advProcess[i] ?? 0;
        }
      });
    return n ? { n, mean: sum / n, lo, hi, out: out / n, proc: proc / n, parts } : null;
  }, [traj]);
  const g = traj.signal?.group;
  if (!st) return traj.advantage != null ? <span>advantage {traj.advantage.toFixed(3)}</span> : null;
  return (
    <span data-testid="traj-advantage">
      advantage{' '}
      <b className="mono" title={`mean over the ${st.n} model tokens`} data-testid="traj-advantage-mean">
        {st.mean.toFixed(3)}
      </b>
      <span className="muted">
        {' '}
        (mean of {st.n} tokens{st.hi - st.lo > 1e-6 ? `, per token ${st.lo.toFixed(3)} … ${st.hi.toFixed(3)}` : ''}
        {st.parts ? ` = outcome ${st.out.toFixed(3)} + process ${st.proc.toFixed(3)}` : ''})
      </span>
      {g ? (
        <span className="muted" data-testid="traj-group-stats">
          {' '}
          · group reward mean {g.mean.toFixed(3)}, std {g.std.toFixed(3)} (n {g.n})
        </span>
      ) : null}
    </span>
  );
}
