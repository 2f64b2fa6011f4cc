import { useEffect, useMemo, useState } from 'react';
import { useArbor } from '../store/react';
import type { RunDetail, RunSummary } from '../api/types';
import { filterRuns, sortRuns, type SortKey } from '../store/runs';
import { SchemaForm } from '../components/SchemaForm';
import { ModelPicker } from '../components/ModelPicker';
import { defaultsOf, unwrap, type JsonSchema } from '../lib/jsonSchema';
import { Modal } from '../components/Dialog';
import { fmt } from '../components/MetricChart';
import { formatDuration } from '../lib/format';
import { isSftWarmStart } from '../lib/lineage';

/** Metrics shown as columns when present, in this order (at most MAX_METRIC_COLS); each entry
 * lists alternative names of one quantity, the first present wins. Others can be filtered on. */
const KEY_METRICS = [
  ['reward/mean', 'reward'],
  ['exact_match', 'em'],
  ['eval/exact_match'],
  ['actor/kl', 'kl'],
  ['actor/entropy', 'entropy'],
  ['actor/clip_fraction'],
  ['response_length/mean'],
  ['tool_calls_per_episode'],
  ['perf/tokens_per_s'],
  ['loss'],
];
const MAX_METRIC_COLS = 7;

export function RunsView() {
  const runs = useArbor((s) => s.runs);
  const filter = useArbor((s) => s.runFilter);
  const sort = useArbor((s) => s.runSort);
  const setFilter = useArbor((s) => s.setRunFilter);
  const setSort = useArbor((s) => s.setRunSort);
  const openRun = useArbor((s) => s.openRun);
  const stopRun = useArbor((s) => s.stopRun);
  const pauseRun = useArbor((s) => s.pauseRun);
  const resumeRun = useArbor((s) => s.resumeRun);
  const compareIds = useArbor((s) => s.compareIds);
  const toggleCompare = useArbor((s) => s.toggleCompare);
  const go = useArbor((s) => s.go);
  const loadCompare = useArbor((s) => s.loadCompare);
  const openTrajectories = useArbor((s) => s.openTrajectories);
  const [launching, setLaunching] = useState(false);
  const [forking, setForking] = useState<string | null>(null);

  const metricCols = useMemo(() => {
    const present = new Set<string>();
    for (const r of runs) for (const k of Object.keys(r.metrics)) present.add(k);
    const cols = KEY_METRICS.map((alts) => alts.find((k) => present.has(k)))
      .filter((k): k is string => !!k)
      .slice(0, MAX_METRIC_COLS);
    for (const k of [...present].sort()) if (cols.length < MAX_METRIC_COLS && !cols.includes(k)) cols.push(k);
    return cols;
  }, [runs]);
  const shown = useMemo(() => sortRuns(filterRuns(runs, filter), sort), [runs, filter, sort]);
  const th = (key: SortKey, label: string, cls = '') => (
    <th key={key} className={cls} onClick={() => setSort(key)}>
      {label}
      {sort.key === key ? (sort.desc ? ' ▾' : ' ▴') : ''}
    </th>
  );

  return (
    <div className="view" data-testid="view-runs">
      <div className="toolbar">
        <h2>Runs</h2>
        <input
          aria-label="filter runs"
          placeholder="filter: words, tags, reward/mean>0.5"
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
          style={{ width: 300 }}
          data-testid="run-filter"
        />
        <span className="grow" />
        <button
          data-testid="compare-selected"
          disabled={compareIds.length < 2}
          onClick={() => {
            void loadCompare(compareIds);
            go('compare');
          }}
        >
          Compare {compareIds.length || ''}
        </button>
        <button className="primary" onClick={() => setLaunching(true)} data-testid="new-run">
          New run…
        </button>
      </div>
      <div className="panel" style={{ padding: 0, overflowX: 'auto' }}>
        <table className="grid" data-testid="runs-table">
          <thead>
            <tr>
              <th style={{ width: 24 }} />
              {th('name', 'name')}
              <th>actions</th>
              {th('status', 'status')}
              <th>tags</th>
              <th className="num">step</th>
              <th className="num">seed</th>
              <th>algorithm</th>
              <th className="num">duration</th>
              {metricCols.map((k) => th(`metric:${k}`, k, 'num'))}
              {th('createdAt', 'created')}
            </tr>
          </thead>
          <tbody>
            {shown.map((r) => (
              <tr key={r.id} data-testid="run-row" data-run-id={r.id}>
                <td>
                  <input
                    type="checkbox"
                    checked={compareIds.includes(r.id)}
                    onChange={() => toggleCompare(r.id)}
                    title="select for Compare"
                    aria-label={`select ${r.name} for Compare`}
                  />
                </td>
                <td>
                  <a href="#" onClick={(e) => (e.preventDefault(), void openRun(r.id))} style={{ color: 'var(--text)' }}>
                    {r.name}
                  </a>{' '}
                  <span className="muted mono">{r.id.slice(0, 8)}</span>
                  {r.project ? (
                    <span className="muted" data-testid="run-project-name">
                      {' '}
                      · {r.project}
                    </span>
                  ) : null}
                  <Lineage run={r} runs={runs} open={(id) => void openRun(id)} />
                </td>
                <td>
                  <div style={{ display: 'flex', gap: 4, whiteSpace: 'nowrap' }}>
                    {r.status === 'running' ? <button onClick={() => void pauseRun(r.id)}>Pause</button> : null}
                    {r.status === 'paused' ? <button onClick={() => void resumeRun(r.id)}>Resume</button> : null}
                    {r.status === 'running' || r.status === 'queued' || r.status === 'paused' ? (
                      <button onClick={() => void stopRun(r.id)}>Stop</button>
                    ) : (
                      <button
                        onClick={() => void resumeRun(r.id)}
                        disabled={r.status === 'completed' || isSftWarmStart(r)}
                        title={isSftWarmStart(r) ? 'an SFT warm start continues when its RL run is resumed' : undefined}
                      >
                        Resume
                      </button>
                    )}
                    <button
                      onClick={() => setForking(r.id)}
                      disabled={isSftWarmStart(r)}
                      title={isSftWarmStart(r) ? 'fork the RL run that began from this SFT warm start' : "a new run from this one's config (edit it first)"}
                    >
                      Fork…
                    </button>
                    <button
                      onClick={() => void openTrajectories(r.id)}
                      disabled={isSftWarmStart(r)}
                      title={isSftWarmStart(r) ? 'SFT stores no trajectories' : undefined}
                    >
                      Trajectories
                    </button>
                  </div>
                </td>
                <td>
                  <span className={`status-pill status-${r.status}`} data-testid="run-status" title={r.error}>
                    {r.status}
                  </span>
                </td>
                <td>
                  {r.tags.map((t) => (
                    <span key={t} className="tag">
                      {t}
                    </span>
                  ))}
                </td>
                <td className="num">{r.step ?? '—'}</td>
                <td className="num" data-testid="run-seed">
                  {r.seed ?? '—'}
                </td>
                <td className="mono" data-testid="run-algorithm">
                  {r.algorithm ?? '—'}
                </td>
                <td className="num" data-testid="run-duration" style={{ whiteSpace: 'nowrap' }}>
                  {r.startedAt ? formatDuration((r.endedAt ?? Date.now()) - r.startedAt) : '—'}
                </td>
                {metricCols.map((k) => (
                  <td key={k} className="num">
                    {r.metrics[k] === undefined ? '—' : fmt(r.metrics[k])}
                  </td>
                ))}
                <td className="muted" title={new Date(r.createdAt).toLocaleString()} style={{ whiteSpace: 'nowrap' }}>
                  {shortTime(r.createdAt)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {shown.length === 0 ? (
          <div className="empty">{runs.length ? 'No run matches the filter.' : 'No runs yet. Start one from a template with “New run…”.'}</div>
        ) : null}
      </div>
      {launching ? <LaunchDialog onClose={() => setLaunching(false)} /> : null}
      {forking ? <ForkDialog runId={forking} onClose={() => setForking(null)} /> : null}
    </div>
  );
}

/** Fork: the launch form prefilled with a run's template and config; the new run records its parent. */
export function ForkDialog({ runId, onClose, checkpoint }: { runId: string; onClose: () => void; checkpoint?: { id: string; step: number; path?: string } }) {
  const fetchRun = useArbor((s) => s.fetchRun);
  const [run, setRun] = useState<RunDetail | null>(null);
  useEffect(() => {
    void fetchRun(runId).then((r) => (r ? setRun(r) : onClose()));
    // Deliberately not onClose: a new callback each render must not refetch the run.
  }, [fetchRun, runId]);
  if (!run) return null;
  // From a checkpoint: the new run starts from that model folder instead of the original init.
  const config = checkpoint?.path ? { ...run.config, model: { path: checkpoint.path } } : run.config;
  return (
    <LaunchDialog
      onClose={onClose}
      fork={{ run, config, checkpoint: checkpoint?.id, name: checkpoint ? `${run.name}-from-${checkpoint.step}` : `${run.name}-fork` }}
    />
  );
}

export function LaunchDialog({
  onClose,
  fork,
}: {
  onClose: () => void;
  fork?: { run: RunDetail; config: Record<string, unknown>; checkpoint?: string; name: string };
}) {
  const templates = useArbor((s) => s.templates);
  const startRun = useArbor((s) => s.startRun);
  const forkRun = useArbor((s) => s.forkRun);
  const openRun = useArbor((s) => s.openRun);
  const [templateId, setTemplateId] = useState(fork?.run.template ?? templates[0]?.id ?? '');
  const template = templates.find((t) => t.id === templateId);
  const [config, setConfig] = useState<Record<string, unknown>>(() => (fork ? structuredClone(fork.config) : initialConfig(template)));
  const [name, setName] = useState(fork?.name ?? '');
  const [tags, setTags] = useState(fork?.run.tags.join(', ') ?? '');
  const [project, setProject] = useState(fork?.run.project ?? '');
  const [asJson, setAsJson] = useState(false);
  const [jsonText, setJsonText] = useState('');
  const [jsonError, setJsonError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const pick = (id: string) => {
    setTemplateId(id);
    setConfig(initialConfig(templates.find((t) => t.id === id)));
  };
  const start = async () => {
    if (!template) return;
    setBusy(true);
    const tagList = tags
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    const id = fork
      ? await forkRun(fork.run.id, { checkpoint: fork.checkpoint, config, name: name || undefined })
      : await startRun(template.id, config, name || undefined, tagList, project.trim() || undefined);
    setBusy(false);
    if (id) {
      onClose();
      await openRun(id);
    }
  };
  const essential = template ? essentialPaths(template.schema) : [];
  return (
    <Modal
      title={fork ? `Fork ${fork.run.name}${fork.checkpoint ? ` from checkpoint ${fork.checkpoint}` : ''}` : 'Start a run'}
      onClose={onClose}
      closeButton
      testId="launch-dialog"
      footer={
        <>
          <span className="muted">{asJson ? 'the whole config as JSON' : 'empty fields take their default'}</span>
          <span className="grow" />
          <button onClick={onClose}>Cancel</button>
          <button className="primary" disabled={!template || busy || !!jsonError} onClick={() => void start()} data-testid="start-run">
            {busy ? 'Starting…' : fork ? 'Start fork' : 'Start'}
          </button>
        </>
      }
    >
      {templates.length === 0 ? <div className="empty">The engine reports no run templates.</div> : null}
      <div className="toolbar">
        <label htmlFor="launch-template">template</label>
        <select id="launch-template" value={templateId} onChange={(e) => pick(e.target.value)} data-testid="template-select" disabled={!!fork}>
          {templates.map((t) => (
            <option key={t.id} value={t.id}>
              {t.name}
            </option>
          ))}
        </select>
        <span className="muted">{template?.description}</span>
      </div>
      <div className="toolbar">
        {/* The run's name (the config's own top-level `name` is left out of the form below: one name field). */}
        <label htmlFor="launch-name">name</label>
        <input id="launch-name" value={name} onChange={(e) => setName(e.target.value)} placeholder="(generated)" data-testid="run-name" />
        <label htmlFor="launch-tags">tags</label>
        <input id="launch-tags" value={tags} onChange={(e) => setTags(e.target.value)} placeholder="comma-separated" data-testid="run-tags" />
        <label htmlFor="launch-project">project</label>
        <input
          id="launch-project"
          value={project}
          onChange={(e) => setProject(e.target.value)}
          placeholder="(none)"
          disabled={!!fork}
          title={fork ? "a fork stays in its run's project" : 'group runs by project (filter the table by its name)'}
          data-testid="run-project"
          style={{ width: 120 }}
        />
        <span className="grow" />
        <label>
          <input
            type="checkbox"
            checked={asJson}
            onChange={(e) => {
              setAsJson(e.target.checked);
              setJsonText(JSON.stringify(config, null, 2));
              setJsonError(null);
            }}
          />{' '}
          edit as JSON
        </label>
      </div>
      {template && !asJson ? (
        <>
          {/* The essentials (model, task, algorithm, steps); everything else under "advanced", collapsed. */}
          {essential.includes('model.path') ? (
            <ModelPicker
              value={(config.model as { path?: string } | undefined)?.path}
              onPick={(m) => {
                // model.path and model.init are one choice: a picked model replaces the tiny built-in one.
                const { init: _init, ...model } = (config.model as Record<string, unknown> | undefined) ?? {};
                setConfig({ ...config, model: { ...model, path: m.name } });
              }}
              testId="launch-model"
            />
          ) : null}
          <SchemaForm schema={template.schema} value={config} onChange={setConfig} only={essential} testId="schema-form-essential" />
          <details className="launch-advanced" data-testid="launch-advanced">
            <summary>advanced: every other setting</summary>
            <SchemaForm schema={template.schema} value={config} onChange={setConfig} omit={[...essential, 'name']} />
          </details>
        </>
      ) : null}
      {template && asJson ? (
        <>
          <textarea
            rows={18}
            value={jsonText}
            aria-label="config as JSON"
            data-testid="config-json"
            onChange={(e) => {
              setJsonText(e.target.value);
              try {
                setConfig(JSON.parse(e.target.value));
                setJsonError(null);
              } catch (err) {
                setJsonError((err as Error).message);
              }
            }}
          />
          {jsonError ? <div className="error-msg">{jsonError}</div> : null}
        </>
      ) : null}
    </Modal>
  );
}

/** The launch form's essential fields (those the template's schema has): model, task, algorithm, steps. */
const ESSENTIAL = ['model.path', 'model.init', 'task.kind', 'task.dataset', 'algorithm.adv_estimator', 'steps'];
export function essentialPaths(schema: JsonSchema): string[] {
  const has = (path: string): boolean => {
    let s: JsonSchema | undefined = unwrap(schema, schema);
    for (const part of path.split('.')) {
      s = s?.properties?.[part];
      if (!s) return false;
      s = unwrap(s, schema);
    }
    return true;
  };
  return ESSENTIAL.filter(has);
}

function shortTime(ms: number): string {
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today
    ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
    : d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' + d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

function initialConfig(t: { schema: Parameters<typeof defaultsOf>[0]; example?: Record<string, unknown> } | undefined): Record<string, unknown> {
  if (!t) return {};
  if (t.example) return structuredClone(t.example);
  const d = defaultsOf(t.schema);
  return d && typeof d === 'object' ? (d as Record<string, unknown>) : {};
}

/** A run's relation to its parent in the runs table: the SFT warm start it began from, or a fork's origin; an SFT warm start says so. */
function Lineage({ run, runs, open }: { run: RunSummary; runs: RunSummary[]; open: (id: string) => void }) {
  const parent = run.parentId ? runs.find((x) => x.id === run.parentId) : undefined;
  const link = (r: RunSummary) => (
    <a href="#" onClick={(e) => (e.preventDefault(), open(r.id))}>
      {r.name}
    </a>
  );
  return (
    <>
      {isSftWarmStart(run) ? (
        <span className="muted" data-testid="run-row-sft">
          {' '}
          · SFT warm start
        </span>
      ) : null}
      {run.parentId ? (
        <div className="muted" data-testid="run-row-parent">
          {isSftWarmStart(parent) ? 'after SFT ' : 'from '}
          {parent ? link(parent) : <span className="mono">{run.parentId}</span>}
        </div>
      ) : null}
    </>
  );
}
