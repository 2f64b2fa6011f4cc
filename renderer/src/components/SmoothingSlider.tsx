import { useArbor } from '../store/react';

/** The charts' smoothing: a time-weighted, debiased EMA (lib/smoothing.ts) drawn over the faint raw curve. */
export function SmoothingSlider() {
  const smoothing = useArbor((s) => s.run.smoothing);
  const setSmoothing = useArbor((s) => s.runActions.setSmoothing);
  return (
    <label className="muted" title="time-weighted exponential moving average">
      smoothing{' '}
      <input
        type="range"
        min={0}
        max={0.99}
        step={0.01}
        value={smoothing}
        onChange={(e) => setSmoothing(Number(e.target.value))}
        style={{ verticalAlign: 'middle' }}
      />{' '}
      <span className="mono">{smoothing.toFixed(2)}</span>
    </label>
  );
}
