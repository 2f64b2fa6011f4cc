import { useMemo, useState } from 'react';
import { useArbor } from '../store/react';
import { filterRuns, sortRuns, type SortKey } from '../store/runs';
import { SchemaForm } from '../components/SchemaForm';
import { defaultsOf } from '../lib/jsonSchema';
import { fmt } from '../components/MetricChart';

/** Metrics shown as columns when present, in this order; others can be sorted through the filter. */
const KEY_METRICS = ['reward/mean', 'reward', 'em', 'eval/em', 'kl', 'entropy', 'loss'];

export function RunsView() {
  const runs = useArbor((s) => s.runs);
  const filter = useArbor((s) => s.runFilter);
  const sort = useArbor((s) => s.runSort);
  const setFilter = useArbor((s) => s.setRunFilter);
  const setSort = useArbor((s) => s.setRunSort);
  const openRun = useArbor((s) => s.openRun);
  const stopRun = useArbor((s) => s.stopRun);
  const resumeRun = useArbor((s) => s.resumeRun);
  const forkRun = useArbor((s) => s.forkRun);
  const compareIds = useArbor((s) => s.compareIds);
  const toggleCompare = useArbor((s) => s.toggleCompare);
  const go = useArbor((s) => s.go);
  const loadCompare = useArbor((s) => s.loadCompare);
  const openTrajectories = useArbor((s) => s.openTrajectories);
  const [launching, setLaunching] = useState(false);

  const metricCols = useMemo(() => {
    const present = new Set<string>();
    for (const r of runs) for (const k of Object.keys(r.metrics)) present.add(k);
    const cols = KEY_METRICS.filter((k) => present.has(k));
    for (const k of [...present].sort()) if (cols.length < 6 && !cols.includes(k)) cols.push(k);
    return cols;
  }, [runs]);
  const shown = useMemo(() => sortRuns(filterRuns(runs, filter), sort), [runs, filter, sort]);
  const th = (key: SortKey, label: string, cls = '') => (
    <th className={cls} onClick={() => setSort(key)}>
      {label}
      {sort.key === key ? (sort.desc ? ' ▾' : ' ▴') : ''}
    </th>
  );

  return (
    <div className="view" data-testid="view-runs">
      <div className="toolbar">
        <h2>Runs</h2>
        <input placeholder="filter: words, tags, reward/mean>0.5" value={filter} onChange={(e) => setFilter(e.target.value)} style={{ width: 300 }} data-testid="run-filter" />
        <span className="grow" />
        <button
          disabled={compareIds.length < 2}
          onClick={() => {
            void loadCompare(compareIds);
            go('compare');
          }}
        >
          Compare {compareIds.length || ''}
        </button>
        <button className="primary" onClick={() => setLaunching(true)} data-testid="new-run">New run…</button>
      </div>
      <div className="panel" style={{ padding: 0 }}>
        <table className="grid" data-testid="runs-table">
          <thead>
            <tr>
              <th style={{ width: 24 }} />
              {th('name', 'name')}
              {th('status', 'status')}
              <th>tags</th>
              <th className="num">step</th>
              {metricCols.map((k) => th(`metric:${k}`, k, 'num'))}
              {th('createdAt', 'created')}
              <th />
            </tr>
          </thead>
          <tbody>
            {shown.map((r) => (
              <tr key={r.id} data-testid="run-row" data-run-id={r.id}>
                <td>
                  <input type="checkbox" checked={compareIds.includes(r.id)} onChange={() => toggleCompare(r.id)} title="select for Compare" />
                </td>
                <td>
                  <a href="#" onClick={(e) => (e.preventDefault(), void openRun(r.id))} style={{ color: 'var(--text)' }}>
                    {r.name}
                  </a>{' '}
                  <span className="muted mono">{r.id.slice(0, 8)}</span>
                </td>
                <td>
                  <span className={`status-pill status-${r.status}`} data-testid="run-status" title={r.error}>{r.status}</span>
                </td>
                <td>{r.tags.map((t) => <span key={t} className="tag">{t}</span>)}</td>
                <td className="num">{r.step ?? '—'}</td>
                {metricCols.map((k) => (
                  <td key={k} className="num">{r.metrics[k] === undefined ? '—' : fmt(r.metrics[k])}</td>
                ))}
                <td className="muted">{new Date(r.createdAt).toLocaleString()}</td>
                <td style={{ display: 'flex', gap: 4 }}>
                  {r.status === 'running' || r.status === 'queued' ? (
                    <button onClick={() => void stopRun(r.id)}>Stop</button>
                  ) : (
                    <button onClick={() => void resumeRun(r.id)} disabled={r.status === 'completed'}>Resume</button>
                  )}
                  <button onClick={() => void forkRun(r.id, {})}>Fork</button>
                  <button onClick={() => void openTrajectories(r.id)}>Trajectories</button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {shown.length === 0 ? <div className="empty">{runs.length ? 'No run matches the filter.' : 'No runs yet. Start one from a template with “New run…”.'}</div> : null}
      </div>
      {launching ? <LaunchDialog onClose={() => setLaunching(false)} /> : null}
    </div>
  );
}

function LaunchDialog({ onClose }: { onClose: () => void }) {
  const templates = useArbor((s) => s.templates);
  const startRun = useArbor((s) => s.startRun);
  const openRun = useArbor((s) => s.openRun);
  const [templateId, setTemplateId] = useState(templates[0]?.id ?? '');
  const template = templates.find((t) => t.id === templateId);
  const [config, setConfig] = useState<Record<string, unknown>>(() => initialConfig(template));
  const [name, setName] = useState('');
  const [tags, setTags] = useState('');
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
    const id = await startRun(template.id, config, name || undefined, tags.split(',').map((t) => t.trim()).filter(Boolean));
    setBusy(false);
    if (id) {
      onClose();
      await openRun(id);
    }
  };
  return (
    <div className="modal-back" onMouseDown={(e) => e.target === e.currentTarget && onClose()}>
      <div className="modal" data-testid="launch-dialog">
        <div className="toolbar">
          <h2>Start a run</h2>
          <span className="grow" />
          <button onClick={onClose}>Close</button>
        </div>
        {templates.length === 0 ? <div className="empty">The engine reports no run templates.</div> : null}
        <div className="toolbar">
          <label>template</label>
          <select value={templateId} onChange={(e) => pick(e.target.value)} data-testid="template-select">
            {templates.map((t) => (
              <option key={t.id} value={t.id}>{t.name}</option>
            ))}
          </select>
          <span className="muted">{template?.description}</span>
        </div>
        <div className="toolbar">
          <label>name</label>
          <input value={name} onChange={(e) => setName(e.target.value)} placeholder="(generated)" data-testid="run-name" />
          <label>tags</label>
          <input value={tags} onChange={(e) => setTags(e.target.value)} placeholder="comma-separated" />
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
        {template && !asJson ? <SchemaForm schema={template.schema} value={config} onChange={setConfig} /> : null}
        {template && asJson ? (
          <>
            <textarea
              rows={18}
              value={jsonText}
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
        <div className="toolbar">
          <span className="grow" />
          <button className="primary" disabled={!template || busy || !!jsonError} onClick={() => void start()} data-testid="start-run">
            {busy ? 'Starting…' : 'Start'}
          </button>
        </div>
      </div>
    </div>
  );
}

function initialConfig(t: { schema: Parameters<typeof defaultsOf>[0]; example?: Record<string, unknown> } | undefined): Record<string, unknown> {
  if (!t) return {};
  if (t.example) return structuredClone(t.example);
  const d = defaultsOf(t.schema);
  return d && typeof d === 'object' ? (d as Record<string, unknown>) : {};
}
