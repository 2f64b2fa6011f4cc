// "Why didn't it learn?" in the Run view: the warnings a run earned (groups flat for 10 steps, no
// more tool calls), the steps where little or nothing was learned with the reasons, each linking to
// the trajectories behind it (the zero-variance groups of that step), and the latest figures.
// The engine flags the steps (runs.learning, engine/train/diagnostics.ts), so `arbor show` and this
// panel agree; it is asked again when the run's step moves (at most every few seconds while live).
import { useEffect, useRef, useState } from 'react';
import { useArborStore } from '../store/react';
import type { Learning, Series, TrajSummary } from '../api/types';
import { fmt } from '../lib/format';
import { sortForMetric } from '../store/trajectories';

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

/** The run's runs.learning answer, asked again when its step moves (at most every 3 s while live). */
export function useLearning(runId: string | null, step: number | undefined): Learning | null {
  const store = useArborStore();
  const [learning, setLearning] = useState<{ runId: string; l: Learning } | null>(null);
  const asked = useRef(0);
  useEffect(() => {
    if (!runId) return;
    const wait = Math.max(0, asked.current + 3000 - Date.now());
    const t = setTimeout(() => {
      asked.current = Date.now();
      void store
        .getState()
        .runActions.fetchLearning(runId)
        .then((l) => l && setLearning({ runId, l }));
    }, wait);
    return () => clearTimeout(t);
  }, [runId, step, store]);
  return learning?.runId === runId ? learning.l : null;
}

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

function FlagRow({ runId, step, reasons, open, onToggle }: { runId: string; step: number; reasons: string[]; open: boolean; onToggle: () => void }) {
  const store = useArborStore();
  const [groups, setGroups] = useState<ReturnType<typeof zeroVarianceGroups> | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    onToggle();
    if (groups || open) return;
    try {
      setGroups(zeroVarianceGroups(await store.getState().runActions.fetchTrajectorySummaries(runId, step)));
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  const openGroup = async (g: { samples: TrajSummary[] }) => {
    const s = store.getState();
    await s.trajListActions.open(runId, step);
    await store.getState().trajActions.openById(g.samples[0]!.id);
    await store.getState().trajActions.setGroupView(true);
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

/** A flat group's verdict: all right (saturated), all wrong (failed), or mixed verdicts under one reward. */
function verdictOf(samples: TrajSummary[]): string {
  const em = samples.map((t) => (t.outcomeData as { exactMatch?: boolean } | null)?.exactMatch === true);
  return em.every(Boolean) ? 'all right' : em.some(Boolean) ? 'mixed' : 'all wrong';
}

/** The flat groups dynamic sampling dropped and stored (a sample per step, flagged `dropped`): open one in Trajectories. */
function DroppedGroups({ runId, steps }: { runId: string; steps: { step: number; dropped: number }[] }) {
  const store = useArborStore();
  const [step, setStep] = useState(steps[steps.length - 1]!.step);
  const [groups, setGroups] = useState<ReturnType<typeof zeroVarianceGroups> | null>(null);
  useEffect(() => {
    let live = true;
    setGroups(null);
    void store
      .getState()
      .runActions.fetchTrajectorySummaries(runId, step)
      .then((list) => live && setGroups(zeroVarianceGroups(list.filter((t) => t.signal?.dropped))))
      .catch(() => live && setGroups([]));
    return () => {
      live = false;
    };
  }, [runId, step, store]);
  const openGroup = async (g: { samples: TrajSummary[] }) => {
    await store.getState().trajListActions.open(runId, step);
    await store.getState().trajActions.openById(g.samples[0]!.id);
    await store.getState().trajActions.setGroupView(true);
  };
  const dropped = steps.find((s) => s.step === step)?.dropped ?? 0;
  return (
    <div className="toolbar" data-testid="learn-dropped">
      <label htmlFor="dropped-step" className="muted">
        groups dynamic sampling dropped at step
      </label>
      <select id="dropped-step" value={step} onChange={(e) => setStep(Number(e.target.value))} data-testid="dropped-step">
        {steps.map((s) => (
          <option key={s.step} value={s.step}>
            {s.step} ({s.dropped} dropped)
          </option>
        ))}
      </select>
      {groups === null ? <span className="muted">loading…</span> : null}
      {groups?.length ? <span className="muted">{`${groups.length} of ${dropped} stored:`}</span> : null}
      {groups?.length === 0 ? <span className="muted">none stored at this step</span> : null}
      {groups?.map((g) => (
        <button
          key={g.group}
          className="tag"
          data-testid="dropped-group"
          onClick={() => void openGroup(g)}
          title="open this dropped group in Trajectories (group view)"
        >
          group {g.group} · {verdictOf(g.samples)} · reward {fmt(g.reward)} × {g.samples.length}
        </button>
      ))}
    </div>
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
