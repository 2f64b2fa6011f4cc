// "Why didn't it learn?" in the Run view: the warnings a run earned (groups flat for 10 steps, no
// more tool calls), the steps where little or nothing was learned with the reasons, each linking to
// the trajectories behind it (the zero-variance groups of that step), and the latest figures.
// The engine flags the steps (runs.learning, engine/train/diagnostics.ts), so `arbor show` and this
// panel agree; it is asked again when the run's step moves (at most every few seconds while live).
import { useEffect, useRef, useState } from 'react';
import { useArborStore } from '../store/react';
import type { Learning, Series, TrajSummary } from '../api/types';
import { fmt } from '../lib/format';

/** Groups of a step whose samples all got the same reward (no signal), from the step's trajectory summaries. */
export function zeroVarianceGroups(list: TrajSummary[]): { group: number; reward: number; samples: TrajSummary[] }[] {
  const by = new Map<number, TrajSummary[]>();
  for (const t of list) by.set(t.group, [...(by.get(t.group) ?? []), t]);
  return [...by.entries()]
    .filter(([, ts]) => ts.every((t) => t.reward === ts[0]!.reward))
    .sort((a, b) => a[0] - b[0])
    .map(([group, ts]) => ({ group, reward: ts[0]!.reward, samples: ts.sort((a, b) => a.sample - b.sample) }));
}

const FIGURES: [string, string, (v: number) => string][] = [
  ['learn/zero_variance_groups', 'zero-variance groups', (v) => `${(v * 100).toFixed(0)}%`],
  ['learn/gradient_share', 'tokens with gradient', (v) => `${(v * 100).toFixed(0)}%`],
  ['actor/clip_low_fraction', 'clipped low', (v) => `${(v * 100).toFixed(1)}%`],
  ['actor/clip_high_fraction', 'clipped high', (v) => `${(v * 100).toFixed(1)}%`],
  ['truncated_rate', 'truncated', (v) => `${(v * 100).toFixed(0)}%`],
  ['format_rate', 'format errors', (v) => `${((1 - v) * 100).toFixed(0)}%`],
  ['advantage/p05', 'advantage p05', fmt],
  ['advantage/p50', 'p50', fmt],
  ['advantage/p95', 'p95', fmt],
];

export function LearnPanel({ runId, step, series }: { runId: string; step: number; series: Record<string, Series> }) {
  const store = useArborStore();
  const [learning, setLearning] = useState<Learning | null>(null);
  const asked = useRef(0);
  useEffect(() => {
    const wait = Math.max(0, asked.current + 3000 - Date.now());
    const t = setTimeout(() => {
      asked.current = Date.now();
      void store
        .getState()
        .fetchLearning(runId)
        .then((l) => l && setLearning(l));
    }, wait);
    return () => clearTimeout(t);
  }, [runId, step, store]);
  const [open, setOpen] = useState<number | null>(null);
  const [showAll, setShowAll] = useState(false);
  if (!learning || (!learning.steps && !learning.warnings.length)) return null;
  const { flagged: flags, warnings, steps } = learning;
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

function FlagRow({ runId, step, reasons, open, onToggle }: { runId: string; step: number; reasons: string[]; open: boolean; onToggle: () => void }) {
  const store = useArborStore();
  const [groups, setGroups] = useState<ReturnType<typeof zeroVarianceGroups> | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    onToggle();
    if (groups || open) return;
    try {
      setGroups(zeroVarianceGroups(await store.getState().fetchTrajectorySummaries(runId, step)));
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  const openGroup = async (g: { samples: TrajSummary[] }) => {
    const s = store.getState();
    await s.openTrajectories(runId, step);
    await store.getState().openTrajectoryById(g.samples[0]!.id);
    await store.getState().setGroupView(true);
  };
  return (
    <>
      <tr data-testid={`learn-flag-${step}`}>
        <td className="num">{step}</td>
        <td>{reasons.join('; ')}</td>
        <td>
          <button onClick={() => void load()} data-testid="learn-flag-open">
            {open ? 'hide' : 'trajectories'}
          </button>
        </td>
      </tr>
      {open ? (
        <tr>
          <td />
          <td colSpan={2} data-testid="learn-flag-groups">
            {error ? <span className="error-msg">{error}</span> : null}
            {groups === null && !error ? <span className="muted">loading…</span> : null}
            {groups?.length === 0 ? (
              <span className="muted">no zero-variance group at this step (no stored trajectories, or the reasons above are others)</span>
            ) : null}
            {groups?.length ? <span className="muted">zero-variance groups: </span> : null}
            {groups?.map((g) => (
              <button key={g.group} className="tag" data-testid="zv-group" onClick={() => void openGroup(g)} title="open this group's samples in Trajectories">
                group {g.group} · reward {fmt(g.reward)} × {g.samples.length}
              </button>
            ))}
          </td>
        </tr>
      ) : null}
    </>
  );
}

/** The evaluation harness's results stored with the run (`arbor eval <run> --k N`): harness/* metrics. */
export function HarnessPanel({ metrics }: { metrics: Record<string, number> }) {
  const keys = Object.keys(metrics).filter((k) => k.startsWith('harness/'));
  if (!keys.length) return null;
  // harness/<metric> (all questions) and harness/<field>=<value>/<metric>.
  const cols = [
    'all',
    ...new Set(
      keys
        .map((k) => k.slice(8))
        .filter((k) => k.includes('/'))
        .map((k) => k.slice(0, k.lastIndexOf('/'))),
    ),
  ];
  const rows = [...new Set(keys.map((k) => k.slice(k.lastIndexOf('/') + 1)))];
  const value = (col: string, row: string) => metrics[col === 'all' ? `harness/${row}` : `harness/${col}/${row}`];
  return (
    <div className="panel" data-testid="harness-panel">
      <h3>
        Evaluation harness <span className="muted">(arbor eval --k; latest)</span>
      </h3>
      <table className="grid">
        <thead>
          <tr>
            <th>metric</th>
            {cols.map((c) => (
              <th key={c} className="num">
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r}>
              <td className="mono">{r}</td>
              {cols.map((c) => (
                <td key={c} className="num">
                  {value(c, r) === undefined ? '—' : fmt(value(c, r)!)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
