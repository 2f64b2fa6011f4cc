// "Why didn't it learn?" in the Run view: the warnings a run earned (groups flat for 10 steps, no
// more tool calls), the steps where little or nothing was learned with the reasons, each linking to
// the trajectories behind it (the zero-variance groups of that step), and the latest figures.
// The engine flags the steps (runs.learning, engine/train/diagnostics.ts), so `arbor show` and this
// panel agree; it is asked again when the run's step moves (at most every few seconds while live).
import { useState } from 'react';
import { useArborStore } from '../../../store/react';
import type { Learning, Series } from '../../../api/types';
import { fmt } from '../../../lib/format';
import { sortForMetric } from '../../../store/trajectories';
import { FlagRow } from './FlagRow';
import { DroppedGroups } from './DroppedGroups';

const FIGURES: [string, string, (v: number) => string][] = [
  // Before dynamic sampling (every group sampled; groups/flat_fraction), split by the environment's verdict.
  ['groups/flat_fraction', 'flat groups before dynamic sampling', (v) => `${(v * 100).toFixed(0)}%`],
  ['groups/flat_all_right', 'all right', (v) => `${(v * 100).toFixed(0)}%`],
  ['groups/flat_all_wrong', 'all wrong', (v) => `${(v * 100).toFixed(0)}%`],
  ['dynamic_sampling/dropped_groups', 'dropped groups', (v) => v.toFixed(0)],
  // After it: the batch that was trained on.
  ['learn/zero_variance_groups', 'zero-variance groups in the trained batch', (v) => `${(v * 100).toFixed(0)}%`],
  ['learn/gradient_share', 'tokens with gradient', (v) => `${(v * 100).toFixed(0)}%`],
  ['actor/clip_low_fraction', 'clipped low', (v) => `${(v * 100).toFixed(1)}%`],
  ['actor/clip_high_fraction', 'clipped high', (v) => `${(v * 100).toFixed(1)}%`],
  ['truncated_rate', 'truncated', (v) => `${(v * 100).toFixed(0)}%`],
  ['format_rate', 'format errors', (v) => `${((1 - v) * 100).toFixed(0)}%`],
  ['advantage/p05', 'advantage p05', fmt],
  ['advantage/p50', 'p50', fmt],
  ['advantage/p95', 'p95', fmt],
];

export function LearnPanel({ runId, series, learning }: { runId: string; series: Record<string, Series>; learning: Learning | null }) {
  const store = useArborStore();
  const [open, setOpen] = useState<number | null>(null);
  const [showAll, setShowAll] = useState(false);
  if (!learning || (!learning.steps && !learning.warnings.length && !learning.degeneration.length)) return null;
  const { flagged: flags, warnings, steps, degeneration, droppedSteps } = learning;
  const last = (k: string) => {
    const s = series[k];
    if (!s) return undefined;
    for (let i = s.value.length - 1; i >= 0; i--) if (s.value[i] != null) return s.value[i] as number;
    return undefined;
  };
  const shown = showAll ? flags : flags.slice(-12);
  return (
    <div className="panel" data-testid="learn-panel">
      <h3>
        Why didn&apos;t it learn? <span className="muted">{flags.length ? `${flags.length} of ${steps} steps flagged` : `no step flagged in ${steps}`}</span>
      </h3>
      {warnings.map((w) => (
        <div key={`${w.step}-${w.message.slice(0, 20)}`} className="error-msg" data-testid="learn-warning" style={{ borderColor: 'var(--warn, #f5d76e)' }}>
          <strong>step {w.step}:</strong> {w.message}
        </div>
      ))}
      {degeneration.length ? (
        <table className="grid" data-testid="learn-degeneration">
          <thead>
            <tr>
              <th className="num">from step</th>
              <th>collapse or degeneration</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {degeneration.map((d) => (
              <tr key={`${d.kind}-${d.step}`} data-testid={`degeneration-${d.kind}`} data-step={d.step}>
                <td className="num">{d.step}</td>
                <td>{d.message.replace(/^step \d+: /, '')}</td>
                <td>
                  <button onClick={() => void store.getState().trajListActions.open(runId, d.step, sortForMetric(d.metric))} data-testid="degeneration-open">
                    trajectories at step {d.step}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {droppedSteps.length ? <DroppedGroups runId={runId} steps={droppedSteps} /> : null}
      <div className="muted mono" data-testid="learn-figures" style={{ display: 'flex', gap: 14, flexWrap: 'wrap', margin: '4px 0' }}>
        last step:
        {FIGURES.map(([k, label, f]) => {
          const v = last(k);
          return v === undefined ? null : (
            <span key={k} title={k}>
              {label} {f(v)}
            </span>
          );
        })}
      </div>
      {flags.length ? (
        <table className="grid" data-testid="learn-flags">
          <thead>
            <tr>
              <th className="num">step</th>
              <th>why little or nothing was learned</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {shown.map((f) => (
              <FlagRow
                key={f.step}
                runId={runId}
                step={f.step}
                reasons={f.reasons}
                open={open === f.step}
                onToggle={() => setOpen(open === f.step ? null : f.step)}
              />
            ))}
          </tbody>
        </table>
      ) : null}
      {flags.length > shown.length ? (
        <button onClick={() => setShowAll(true)} data-testid="learn-show-all">
          show all {flags.length} flagged steps
        </button>
      ) : null}
    </div>
  );
}
