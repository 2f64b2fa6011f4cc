import { useEffect, useMemo, useRef, useState } from 'react';
import { useArbor } from '../store/react';
import { isSftWarmStart } from '../lib/lineage';
import { MetricChart, PALETTE, fmt } from '../components/MetricChart';
import { ForkDialog } from './Runs';
import type { Checkpoint, ExportedFile, Series } from '../api/types';
import { groupMetricKeys } from '../lib/metricSections';
import { formatDuration } from '../lib/format';
import { HarnessPanel, LearnPanel, useLearning } from '../components/LearnPanel';
import { RunSummary } from '../components/RunSummary';
import { sortForMetric } from '../store/trajectories';

export function SmoothingSlider() {
  const smoothing = useArbor((s) => s.smoothing);
  const setSmoothing = useArbor((s) => s.setSmoothing);
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

export function RunView() {
  const run = useArbor((s) => s.run);
  const runId = useArbor((s) => s.runId);
  const series = useArbor((s) => s.series);
  const log = useArbor((s) => s.log);
  const smoothing = useArbor((s) => s.smoothing);
  const stopRun = useArbor((s) => s.stopRun);
  const pauseRun = useArbor((s) => s.pauseRun);
  const resumeRun = useArbor((s) => s.resumeRun);
  const openTrajectories = useArbor((s) => s.openTrajectories);
  const runs = useArbor((s) => s.runs);
  const [forking, setForking] = useState<{ checkpoint?: Checkpoint } | null>(null);
  const [tab, setTab] = useState<'charts' | 'config' | 'log' | 'checkpoints'>('charts');
  const [metricFilter, setMetricFilter] = useState('');
  // A curve logged under several keys (exact_match and reward/exact_match, …) is drawn once, titled with all of them.
  const { keys, aliases } = useMemo(() => dedupeSeries(series, metricFilter), [series, metricFilter]);
  const learning = useLearning(runId, run?.step);

  if (!runId)
    return (
      <div className="view">
        <div className="empty">Open a run from the Runs table.</div>
      </div>
    );
  if (!run)
    return (
      <div className="view">
        <div className="empty">Loading run {runId}…</div>
      </div>
    );
  const live = run.status === 'running' || run.status === 'queued' || run.status === 'paused';
  // An SFT warm start's own run: its RL run resumes and forks it; it has no trajectories.
  const sftRun = isSftWarmStart(run);
  return (
    <div className="view" data-testid="view-run">
      <div className="toolbar">
        <h2>{run.name}</h2>
        <span className={`status-pill status-${run.status}`} data-testid="run-status">
          {run.status}
        </span>
        <span className="muted mono">{run.id}</span>
        <RunProgress />
        {run.tags.map((t) => (
          <span key={t} className="tag">
            {t}
          </span>
        ))}
        <span className="grow" />
        {run.status === 'running' ? (
          <button onClick={() => void pauseRun(run.id)} title="hold the run before its next step">
            Pause
          </button>
        ) : null}
        {run.status === 'paused' ? <button onClick={() => void resumeRun(run.id)}>Resume</button> : null}
        {live ? (
          <button onClick={() => void stopRun(run.id)}>Stop</button>
        ) : (
          <button
            onClick={() => void resumeRun(run.id)}
            disabled={run.status === 'completed' || sftRun}
            title={sftRun ? 'an SFT warm start continues when its RL run is resumed' : undefined}
          >
            Resume
          </button>
        )}
        <button
          onClick={() => setForking({})}
          disabled={sftRun}
          title={sftRun ? 'fork the RL run that began from this SFT warm start' : "a new run from this one's config (edit it first)"}
        >
          Fork…
        </button>
        <button onClick={() => void openTrajectories(run.id)} disabled={sftRun} title={sftRun ? 'SFT stores no trajectories' : undefined}>
          Trajectories
        </button>
        <ExportButton />
      </div>
      <RunNotes />
      {run.error ? (
        <div className="error-msg">
          <strong>Run failed:</strong>
          <pre>{run.error}</pre>
        </div>
      ) : null}
      <RunSummary run={run} series={series} learning={learning} />
      <div className="tabs">
        {(['charts', 'config', 'log', 'checkpoints'] as const).map((t) => (
          <button key={t} className={tab === t ? 'active' : ''} onClick={() => setTab(t)} data-testid={`tab-${t}`}>
            {t}
            {t === 'checkpoints' ? ` (${run.checkpoints.length})` : ''}
          </button>
        ))}
      </div>
      {tab === 'charts' ? (
        <>
          <LearnPanel runId={run.id} series={series} learning={learning} />
          <HarnessPanel metrics={run.metrics} />
          <div className="toolbar">
            <input placeholder="filter metrics" aria-label="filter metrics" value={metricFilter} onChange={(e) => setMetricFilter(e.target.value)} />
            <SmoothingSlider />
            <span className="muted">
              {keys.length} metrics{live ? ' · live' : ''}
            </span>
          </div>
          {keys.length === 0 ? (
            <div className="empty">
              No metrics logged yet
              {live && run.parentId && run.step === 0 && isSftWarmStart(runs.find((r) => r.id === run.parentId))
                ? ': the SFT warm start trains first, in its own run (the parent above); the RL charts appear with RL’s first step.'
                : live
                  ? '; charts appear with the first step.'
                  : '.'}
            </div>
          ) : null}
          {groupMetricKeys(keys).map((g) => (
            <section key={g.title} className="chart-section">
              <h3>{g.title}</h3>
              <div className="charts">
                {g.keys.map((k) => (
                  <MetricChart
                    key={k}
                    title={k}
                    aliases={aliases[k]}
                    smoothing={smoothing}
                    series={[{ label: run.name, xs: series[k].step, ys: series[k].value, color: PALETTE[0] }]}
                    syncKey={`run-${run.id}`}
                    {...(pickable(k)
                      ? { onPick: (step: number) => void openTrajectories(run.id, step, sortForMetric(k)), pickHint: 'click: this step’s trajectories' }
                      : {})}
                  />
                ))}
              </div>
            </section>
          ))}
        </>
      ) : null}
      {tab === 'config' ? (
        <pre className="log" data-testid="run-config">
          {JSON.stringify(run.config, null, 2)}
        </pre>
      ) : null}
      {tab === 'log' ? (
        <pre className="log" data-testid="run-log">
          {log.length === 0 ? 'No log lines yet.' : null}
          {log.map((l, i) => (
            <div key={`${l.seq}-${i}`} style={{ color: l.level === 'error' ? 'var(--err)' : l.level === 'warn' ? 'var(--warn, #f5d76e)' : undefined }}>
              {`${new Date(l.time).toLocaleTimeString()} ${l.level.padEnd(5)} ${l.text}`}
            </div>
          ))}
        </pre>
      ) : null}
      {tab === 'checkpoints' ? (
        <table className="grid">
          <thead>
            <tr>
              <th className="num">step</th>
              <th>id</th>
              <th>path</th>
              <th>metrics</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {run.checkpoints.map((c) => (
              <tr key={c.id}>
                <td className="num">{c.step}</td>
                <td className="mono">{c.id}</td>
                <td className="mono muted">{c.path}</td>
                <td className="mono">
                  {Object.entries(c.metrics ?? {})
                    .map(([k, v]) => `${k}=${fmt(v)}`)
                    .join('  ')}
                </td>
                <td>
                  <button
                    onClick={() => setForking({ checkpoint: c })}
                    disabled={sftRun}
                    title={
                      sftRun
                        ? "fork the RL run at its step 0: that checkpoint is this SFT warm start's weights"
                        : "a new run starting from this checkpoint's weights"
                    }
                  >
                    Fork from here…
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {forking ? <ForkDialog runId={run.id} checkpoint={forking.checkpoint} onClose={() => setForking(null)} /> : null}
    </div>
  );
}

/** Export the run's metrics (CSV) and trajectories (JSONL); says where the files went. */
function ExportButton() {
  const exportRun = useArbor((s) => s.exportRun);
  const [busy, setBusy] = useState(false);
  const [files, setFiles] = useState<ExportedFile[] | null>(null);
  return (
    <>
      <button
        disabled={busy}
        title="metrics as CSV (every step) and trajectories as JSONL, into the workspace's exports/ folder"
        onClick={async () => {
          setBusy(true);
          setFiles(await exportRun());
          setBusy(false);
        }}
      >
        {busy ? 'Exporting…' : 'Export'}
      </button>
      {files ? (
        <span className="muted mono" data-testid="export-result" title="written by the engine">
          {files.map((f) => `${f.path} (${f.count} ${f.kind === 'metrics' ? 'steps' : 'trajectories'})`).join(' · ')}
        </span>
      ) : null}
    </>
  );
}

/** The run's tags and notes, edited in place and saved to the workspace. */
function RunNotes() {
  const run = useArbor((s) => s.run)!;
  const saveNotes = useArbor((s) => s.saveNotes);
  const saveTags = useArbor((s) => s.saveTags);
  const [notes, setNotes] = useState(run.notes);
  const [tags, setTags] = useState(run.tags.join(', '));
  const [saved, setSaved] = useState<string | null>(null);
  useEffect(() => setNotes(run.notes), [run.id, run.notes]);
  useEffect(() => setTags(run.tags.join(', ')), [run.id, run.tags]);
  const commitTags = async () => {
    const next = tags
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    if (next.join(',') !== run.tags.join(',') && (await saveTags(next))) setSaved('tags saved');
  };
  return (
    <div className="toolbar run-notes">
      <label className="muted">
        tags{' '}
        <input
          data-testid="run-tags-edit"
          value={tags}
          placeholder="comma-separated"
          onChange={(e) => setTags(e.target.value)}
          onBlur={() => void commitTags()}
          onKeyDown={(e) => e.key === 'Enter' && void commitTags()}
        />
      </label>
      <textarea
        data-testid="run-notes"
        aria-label="notes"
        className="grow"
        rows={1}
        placeholder="notes: what this run tests, what you saw (saved when you leave the field)"
        value={notes}
        onChange={(e) => setNotes(e.target.value)}
        onBlur={async () => {
          if (notes !== run.notes && (await saveNotes(notes))) setSaved('notes saved');
        }}
      />
      {saved ? (
        <span className="muted" data-testid="run-notes-saved">
          {saved}
        </span>
      ) : null}
    </div>
  );
}

/** Charts whose x axis is an RL step with stored trajectories (not the SFT warm start's own steps). */
function pickable(key: string): boolean {
  return !key.startsWith('sft/');
}

/** Series keys with identical curves folded into the first key (its aliases listed), filtered by text. */
export function dedupeSeries(series: Record<string, Series>, filter: string): { keys: string[]; aliases: Record<string, string[]> } {
  const byCurve = new Map<string, string>();
  const aliases: Record<string, string[]> = {};
  const keys: string[] = [];
  // The headline key of a set of identical curves comes first (reward/mean over exact_match, …).
  const rank = (k: string) => (k === 'reward/mean' ? 0 : 1);
  for (const k of Object.keys(series).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0))) {
    if (!k.includes(filter)) continue;
    const s = series[k]!;
    const sig = s.step.length > 1 ? `${s.step.join(',')}|${s.value.join(',')}` : `${k}`;
    const first = byCurve.get(sig);
    if (first) (aliases[first] ??= []).push(k);
    else {
      byCurve.set(sig, k);
      keys.push(k);
    }
  }
  return { keys, aliases };
}

/** The header's progress: phase (SFT warm start or RL), step of its total and, while live, an ETA from the steps seen. */
function RunProgress() {
  const run = useArbor((s) => s.run)!;
  const series = useArbor((s) => s.series);
  const live = run.status === 'running' || run.status === 'queued';
  const cfg = run.config as { steps?: number; sft?: { warm_start?: boolean; epochs?: number; demos?: number; batch_size?: number } };
  const sftSeries = series['sft/loss'];
  const sftStep = sftSeries?.step.length ? sftSeries.step[sftSeries.step.length - 1]! : 0;
  const sft = cfg.sft;
  const sftTotal = sft?.warm_start && sft.demos && sft.batch_size && sft.epochs ? Math.ceil(sft.demos / sft.batch_size) * sft.epochs : undefined;
  // An SFT warm start's own run: its steps are SFT steps; its RL run, before RL, shows the SFT run's (its parent's) step.
  const parent = useArbor((s) => (run.parentId ? s.runs.find((r) => r.id === run.parentId) : undefined));
  const sftOwn = isSftWarmStart(run) ? run.step : live && run.step === 0 && isSftWarmStart(parent) ? (parent?.step ?? 0) : 0;
  const phase = isSftWarmStart(run) ? 'SFT' : run.step > 0 ? 'RL' : sftStep > 0 || sftOwn > 0 ? 'SFT' : live ? 'starting' : '';
  const step = phase === 'SFT' ? Math.max(sftStep, sftOwn) : run.step;
  const total = phase === 'SFT' ? sftTotal : cfg.steps;
  // ETA from the steps seen while this view is open: (elapsed / steps done) × steps left.
  const seen = useRef<{ phase: string; step: number; t: number } | null>(null);
  const now = Date.now();
  if (!seen.current || seen.current.phase !== phase || step < seen.current.step) seen.current = { phase, step, t: now };
  const done = step - seen.current.step;
  const eta = live && total && done > 0 ? ((now - seen.current.t) / done) * (total - step) : undefined;
  return (
    <span className="muted" data-testid="run-progress">
      {phase ? `${phase} · ` : ''}step {step}
      {total ? `/${total}` : ''}
      {live ? (eta !== undefined ? ` · ETA ${formatDuration(eta)}` : ' · ETA after the next step') : ''}
    </span>
  );
}
