import { useMemo } from 'react';

/** Per-token logprob of the shared prefix: stored (as sampled) against the checkpoint's, over the model's tokens. */
export function ScoreGraph({ original, checkpoint, shared }: { original: (number | null)[]; checkpoint: number[]; shared: number }) {
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
