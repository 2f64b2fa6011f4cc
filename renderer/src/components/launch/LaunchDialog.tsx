import { useState } from 'react';
import type { RunDetail } from '../../api/types';
import { useArbor } from '../../store/react';
import { Modal } from '../Modal';
import { essentialPaths, initialConfig } from './launchConfig';
import { ConfigForm } from './ConfigForm';

/** Start a run from a template with a form generated from its JSON schema (essentials first, the rest under "advanced"), or as JSON; a fork starts prefilled. */
export function LaunchDialog({
  onClose,
  fork,
}: {
  onClose: () => void;
  fork?: { run: RunDetail; config: Record<string, unknown>; checkpoint?: string; name: string };
}) {
  const templates = useArbor((s) => s.runList.templates);
  const startRun = useArbor((s) => s.runListActions.start);
  const forkRun = useArbor((s) => s.runListActions.fork);
  const openRun = useArbor((s) => s.runActions.open);
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
      {template && !asJson ? <ConfigForm schema={template.schema} essential={essential} config={config} setConfig={setConfig} /> : null}
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
