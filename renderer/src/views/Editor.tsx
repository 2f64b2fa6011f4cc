import { useEffect, useRef, useState } from 'react';
import { useArbor, useArborStore } from '../store/react';
import { fileKind, isMcpServersFile } from '../store/editor';
import type { monaco as Monaco } from '../components/monaco';
import { NewFileDialog, type NewFileAsk } from '../components/Dialog';

const TOOL_TEMPLATE = `import type { Tool } from 'arbor/env';

export const tool: Tool = {
  name: 'my_tool',
  description: 'Describe what the tool does for the model.',
  parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
  async execute(args, ctx) {
    // ctx.signal aborts on timeout; ctx.episode is state shared by the tools of one episode.
    return { content: String(args.query), success: true };
  },
};
`;

const REWARD_TEMPLATE = `import type { RewardFn } from 'arbor/env';

// A reward sees the episode summary: answer, golds, model turn texts, tool call/error counts, retrieved passages.
export const reward: RewardFn = (e) => {
  return e.answer !== undefined && e.golds.includes(e.answer) ? 1 : 0;
};
`;

// node: the engine's own Node; cwd defaults to the workspace folder, relative paths resolve against it.
const MCP_TEMPLATE = `{
  "mcpServers": {
    "my_server": {
      "command": "node",
      "args": ["path/to/server.js"],
      "env": {},
      "timeout_ms": 30000
    }
  }
}
`;

export function EditorView() {
  const store = useArborStore();
  const files = useArbor((s) => s.envFiles);
  const types = useArbor((s) => s.envTypes);
  const filePath = useArbor((s) => s.filePath);
  const source = useArbor((s) => s.source);
  const saved = useArbor((s) => s.savedSource);
  const tryArgs = useArbor((s) => s.tryArgs);
  const tryTraj = useArbor((s) => s.tryTrajectoryId);
  const result = useArbor((s) => s.tryResult);
  const trying = useArbor((s) => s.trying);
  const tryTrajs = useArbor((s) => s.tryTrajectories);
  const tryRunId = useArbor((s) => s.tryRunId);
  const runs = useArbor((s) => s.runs);
  const mcpTools = useArbor((s) => s.mcpTools);
  const mcpTool = useArbor((s) => s.mcpTool);
  const a = store.getState();
  const host = useRef<HTMLDivElement>(null);
  const editor = useRef<Monaco.editor.IStandaloneCodeEditor | null>(null);
  const monacoRef = useRef<typeof Monaco | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  // "New tool/reward/MCP servers" ask for the path in an in-app dialog (Electron has no window.prompt).
  const [asking, setAsking] = useState<NewFileAsk | null>(null);

  useEffect(() => {
    void store.getState().loadEnv();
  }, [store]);

  // One text model per file (the unsaved "no file" text is one too), created when the file is first
  // shown and disposed once, after the editor: disposing a model the editor still holds throws from
  // Monaco's pending work on it (inline completions' fetch: "Model is disposed!"; the editor's own
  // dispose detaching it: _postDetachModelCleanup).
  const models = useRef(new Map<string, Monaco.editor.ITextModel>());
  const modelFor = (m: typeof Monaco, path: string | null, text: string): Monaco.editor.ITextModel => {
    const key = path ?? '';
    let model = models.current.get(key);
    if (!model || model.isDisposed()) {
      // JSON files (MCP servers) get JSON highlighting and checks, the rest TypeScript.
      const lang = path?.endsWith('.json') ? 'json' : 'typescript';
      const uri = m.Uri.from({ scheme: 'arbor-file', path: `/${key || 'untitled.ts'}` });
      model = m.editor.getModel(uri) ?? m.editor.createModel(text, lang, uri);
      models.current.set(key, model);
    }
    return model;
  };

  // Monaco is loaded lazily: it is large and only this view needs it.
  useEffect(() => {
    let disposed = false;
    const own = models.current;
    import('../components/monaco')
      .then(({ monaco, EDITOR_THEME }) => {
        if (disposed || !host.current) return;
        monacoRef.current = monaco;
        const st = store.getState();
        const ed = monaco.editor.create(host.current, {
          model: modelFor(monaco, st.filePath, st.source),
          theme: EDITOR_THEME,
          automaticLayout: true,
          minimap: { enabled: false },
          fontSize: 12.5,
          scrollBeyondLastLine: false,
        });
        if (ed.getValue() !== st.source) ed.setValue(st.source);
        ed.onDidChangeModelContent(() => store.getState().setSource(ed.getValue()));
        ed.addCommand(monaco.KeyMod.CtrlCmd | monaco.KeyCode.KeyS, () => void store.getState().saveFile());
        editor.current = ed;
        (window as unknown as { __arborEditor?: unknown; __arborMonaco?: unknown }).__arborEditor = ed;
        (window as unknown as { __arborMonaco?: unknown }).__arborMonaco = monaco;
      })
      .catch((err) => setLoadError(String(err)));
    return () => {
      disposed = true;
      // The editor first (it detaches its model and cancels its work on it), then each model once.
      editor.current?.dispose();
      editor.current = null;
      for (const m of own.values()) if (!m.isDisposed()) m.dispose();
      own.clear();
    };
  }, [store]);

  useEffect(() => {
    if (!types.length) return;
    void import('../components/monaco').then(({ setTypeDefinitions }) => setTypeDefinitions(types));
  }, [types]);

  // Show a newly opened file in the editor (not on every keystroke): its own model, holding the
  // store's text of it.
  useEffect(() => {
    const ed = editor.current;
    const m = monacoRef.current;
    if (!ed || !m) return;
    const source = store.getState().source;
    const model = modelFor(m, filePath, source);
    if (ed.getModel() !== model) ed.setModel(model);
    if (model.getValue() !== source) model.setValue(source);
  }, [filePath, store]);

  // Mark the failing line of a "try it" error in the editor.
  useEffect(() => {
    const m = monacoRef.current;
    const model = editor.current?.getModel();
    if (!m || !model) return;
    const line = result?.error?.line;
    m.editor.setModelMarkers(
      model,
      'try-it',
      line
        ? [
            {
              severity: m.MarkerSeverity.Error,
              message: result!.error!.message,
              startLineNumber: line,
              endLineNumber: line,
              startColumn: result!.error!.column ?? 1,
              endColumn: model.getLineMaxColumn(Math.min(line, model.getLineCount())),
            },
          ]
        : [],
    );
    if (line) editor.current!.revealLineInCenter(line);
  }, [result]);

  const kind = filePath ? (isMcpServersFile(filePath, source) ? 'mcp' : fileKind(filePath, files)) : null;
  const picked = mcpTools.find((t) => t.name === mcpTool);
  const dirty = source !== saved;
  /** The try-it arguments field (a tool's, an MCP tool's). */
  const argsInput = (width: number) => (
    <>
      <label className="muted" htmlFor="try-args">
        arguments (JSON)
      </label>
      <input id="try-args" value={tryArgs} onChange={(e) => a.setTryArgs(e.target.value)} className="mono" style={{ width }} data-testid="try-args" />
    </>
  );
  return (
    <div className="view" data-testid="view-editor">
      <div className="toolbar">
        <h2>Editor</h2>
        <select value={filePath ?? ''} onChange={(e) => e.target.value && void a.openFile(e.target.value)} data-testid="env-file" aria-label="workspace file">
          <option value="">(open a file)</option>
          {files.map((f) => (
            <option key={f.path} value={f.path}>
              {f.kind}: {f.path}
            </option>
          ))}
        </select>
        <button onClick={() => setAsking({ title: 'New tool file', initial: 'tools/my_tool.ts', template: TOOL_TEMPLATE })} data-testid="new-tool">
          New tool
        </button>
        <button onClick={() => setAsking({ title: 'New reward file', initial: 'rewards/my_reward.ts', template: REWARD_TEMPLATE })} data-testid="new-reward">
          New reward
        </button>
        <button onClick={() => setAsking({ title: 'New MCP servers file', initial: 'envs/mcp_servers.json', template: MCP_TEMPLATE })} data-testid="new-mcp">
          New MCP servers
        </button>
        <span className="grow" />
        {filePath ? (
          <span className="mono muted">
            {filePath}
            {dirty ? ' •' : ''}
          </span>
        ) : null}
        <button className="primary" disabled={!filePath || !dirty} onClick={() => void a.saveFile()} data-testid="save-file">
          Save
        </button>
      </div>
      {asking ? <NewFileDialog ask={asking} onCreate={(path) => a.newFile(path, asking.template)} onClose={() => setAsking(null)} /> : null}
      {loadError ? <div className="error-msg">Could not load the editor: {loadError}</div> : null}
      {!filePath ? (
        <div className="muted" style={{ fontSize: 12 }}>
          Open a workspace file, or start a new tool or reward; “Run in sandbox” runs the editor's text.
        </div>
      ) : null}
      <div className="editor-host" ref={host} data-testid="monaco" />
      <div className="panel" style={{ display: 'flex', flexDirection: 'column', gap: 8 }}>
        <div className="toolbar">
          <h3 style={{ margin: 0 }}>Try it</h3>
          {kind === 'mcp' ? (
            <>
              <button disabled={trying} onClick={() => void a.listMcpTools()} data-testid="mcp-list">
                List tools
              </button>
              <select value={mcpTool} onChange={(e) => a.setMcpTool(e.target.value)} data-testid="mcp-tool" disabled={!mcpTools.length} aria-label="MCP tool">
                {mcpTools.length ? null : <option value="">(list the tools first)</option>}
                {mcpTools.map((t) => (
                  <option key={t.name} value={t.name}>
                    {t.name}
                  </option>
                ))}
              </select>
              {argsInput(300)}
            </>
          ) : kind === 'reward' ? (
            <>
              <label className="muted" htmlFor="try-run">
                score a stored trajectory of
              </label>
              <select id="try-run" value={tryRunId} onChange={(e) => void a.loadTryTrajectories(e.target.value)} data-testid="try-run">
                <option value="">(run)</option>
                {runs.map((r) => (
                  <option key={r.id} value={r.id}>
                    {r.name}
                  </option>
                ))}
              </select>
              <input
                value={tryTraj}
                onChange={(e) => a.setTryTrajectory(e.target.value)}
                placeholder="trajectory id"
                aria-label="trajectory id"
                list="try-trajs"
                style={{ width: 110 }}
                data-testid="try-trajectory"
                className="mono"
              />
              <datalist id="try-trajs">
                {tryTrajs.map((t) => (
                  <option key={t.id} value={t.id}>{`step ${t.step} · group ${t.group} · sample ${t.sample} · stored reward ${t.reward.toFixed(3)}`}</option>
                ))}
              </datalist>
              {(() => {
                const t = tryTrajs.find((x) => x.id === tryTraj);
                return t ? (
                  <span className="muted">
                    step {t.step} · group {t.group} · sample {t.sample} · stored reward <span className="mono">{t.reward.toFixed(3)}</span>
                  </span>
                ) : null;
              })()}
            </>
          ) : (
            <>{argsInput(360)}</>
          )}
          {kind === 'mcp' ? (
            <>
              <button className="primary" disabled={trying || !mcpTool} onClick={() => void a.tryIt()} data-testid="try-it">
                {trying ? 'Running…' : 'Call tool'}
              </button>
              <span className="muted">starts the servers of the editor's text (saved or not), calls, stops them</span>
            </>
          ) : (
            <>
              <button className="primary" disabled={!filePath || trying} onClick={() => void a.tryIt()} data-testid="try-it">
                {trying ? 'Running…' : 'Run in sandbox'}
              </button>
              <span className="muted">runs the editor's text (saved or not) in the sandbox</span>
            </>
          )}
        </div>
        {kind === 'mcp' && mcpTools.length ? (
          <div className="mcp-tools" data-testid="mcp-tools" style={{ display: 'flex', gap: 8, flexWrap: 'wrap', fontSize: 12 }}>
            {mcpTools.map((t) => (
              <div
                key={t.name}
                className={`panel${t.name === mcpTool ? ' selected' : ''}`}
                style={{ cursor: 'pointer', padding: '4px 8px', outline: t.name === mcpTool ? '1px solid var(--accent, #4c8dff)' : undefined }}
                onClick={() => a.setMcpTool(t.name)}
                data-testid={`mcp-tool-${t.name}`}
              >
                <span className="mono">{t.name}</span> <span className="muted">{t.description}</span>
              </div>
            ))}
          </div>
        ) : null}
        {kind === 'mcp' && picked ? (
          <pre className="mono muted" style={{ margin: 0, fontSize: 11, maxHeight: 140, overflow: 'auto' }} data-testid="mcp-schema">
            {JSON.stringify(picked.parameters, null, 2)}
          </pre>
        ) : null}
        {result ? (
          <div className={`result ${result.ok ? 'ok' : 'err'}`} data-testid="try-result">
            {result.ok && kind === 'mcp'
              ? `✓ ${mcpResultText(result.value)}${result.ms != null ? `\n(${result.ms.toFixed(0)} ms)` : ''}`
              : result.ok
                ? `✓ ${typeof result.value === 'string' ? result.value : JSON.stringify(result.value, null, 2)}${result.ms != null ? `\n(${result.ms.toFixed(0)} ms)` : ''}`
                : `✗ ${result.error?.message ?? 'failed'}${result.error?.line ? `\n  at line ${result.error.line}${result.error.column ? `:${result.error.column}` : ''}` : ''}`}
            {result.logs?.length ? `\n\nconsole:\n${result.logs.join('\n')}` : ''}
          </div>
        ) : null}
      </div>
    </div>
  );
}

/** An mcp.tryTool value: the call's result text, or (a listing) the tools found. */
function mcpResultText(value: unknown): string {
  const v = (value ?? {}) as { tools?: { name: string }[]; result?: string };
  if (typeof v.result === 'string') return v.result;
  const names = (v.tools ?? []).map((t) => t.name);
  return `${names.length} tool${names.length === 1 ? '' : 's'}: ${names.join(', ')}`;
}
