import { useEffect, useRef, useState } from 'react';
import { useArbor, useArborStore } from '../../store/react';
import type { TryResult } from '../../api/types';
import type { monaco as Monaco } from './monaco';

type Models = Map<string, Monaco.editor.ITextModel>;

/**
 * The text model of a file (the unsaved "no file" text is one too), created when the file is first
 * shown: JSON files (MCP servers) get JSON highlighting and checks, the rest TypeScript.
 */
function modelFor(models: Models, m: typeof Monaco, path: string | null, text: string): Monaco.editor.ITextModel {
  const key = path ?? '';
  let model = models.get(key);
  if (!model || model.isDisposed()) {
    const lang = path?.endsWith('.json') ? 'json' : 'typescript';
    const uri = m.Uri.from({ scheme: 'arbor-file', path: `/${key || 'untitled.ts'}` });
    model = m.editor.getModel(uri) ?? m.editor.createModel(text, lang, uri);
    models.set(key, model);
  }
  return model;
}

/** Mark the failing line of a "try it" error in the editor (and scroll to it); no error clears the mark. */
function markTryError(m: typeof Monaco, ed: Monaco.editor.IStandaloneCodeEditor, result: TryResult | null) {
  const model = ed.getModel();
  if (!model) return;
  const error = result?.error;
  const line = error?.line;
  m.editor.setModelMarkers(
    model,
    'try-it',
    error && line
      ? [
          {
            severity: m.MarkerSeverity.Error,
            message: error.message,
            startLineNumber: line,
            endLineNumber: line,
            startColumn: error.column ?? 1,
            endColumn: model.getLineMaxColumn(Math.min(line, model.getLineCount())),
          },
        ]
      : [],
  );
  if (line) ed.revealLineInCenter(line);
}

/** Monaco on the open file's text (loaded lazily: it is large and only the Editor needs it), with the engine's types. */
export function MonacoEditor() {
  const store = useArborStore();
  const types = useArbor((s) => s.editor.envTypes);
  const filePath = useArbor((s) => s.editor.filePath);
  const result = useArbor((s) => s.editor.tryResult);
  const host = useRef<HTMLDivElement>(null);
  const editor = useRef<Monaco.editor.IStandaloneCodeEditor | null>(null);
  const monacoRef = useRef<typeof Monaco | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  // One text model per file, disposed once, after the editor: disposing a model the editor still
  // holds throws from Monaco's pending work on it (inline completions' fetch: "Model is disposed!";
  // the editor's own dispose detaching it: _postDetachModelCleanup).
  const models = useRef<Models>(new Map());

  useEffect(() => {
    let disposed = false;
    const own = models.current;
    import('./monaco')
      .then(({ monaco, EDITOR_THEME }) => {
        if (disposed || !host.current) return;
        monacoRef.current = monaco;
        const st = store.getState().editor;
        const ed = monaco.editor.create(host.current, {
          model: modelFor(own, monaco, st.filePath, st.source),
          theme: EDITOR_THEME,
          automaticLayout: true,
          minimap: { enabled: false },
          fontSize: 12.5,
          scrollBeyondLastLine: false,
        });
        if (ed.getValue() !== st.source) ed.setValue(st.source);
        ed.onDidChangeModelContent(() => store.getState().editorActions.setSource(ed.getValue()));
        ed.addCommand(monaco.KeyMod.CtrlCmd | monaco.KeyCode.KeyS, () => void store.getState().editorActions.saveFile());
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
    void import('./monaco').then(({ setTypeDefinitions }) => setTypeDefinitions(types));
  }, [types]);

  // Show a newly opened file in the editor (not on every keystroke): its own model, holding the
  // store's text of it.
  useEffect(() => {
    const ed = editor.current;
    const m = monacoRef.current;
    if (!ed || !m) return;
    const source = store.getState().editor.source;
    const model = modelFor(models.current, m, filePath, source);
    if (ed.getModel() !== model) ed.setModel(model);
    if (model.getValue() !== source) model.setValue(source);
  }, [filePath, store]);

  useEffect(() => {
    if (monacoRef.current && editor.current) markTryError(monacoRef.current, editor.current, result);
  }, [result]);

  return (
    <>
      {loadError ? <div className="error-msg">Could not load the editor: {loadError}</div> : null}
      {!filePath ? (
        <div className="muted" style={{ fontSize: 12 }}>
          Open a workspace file, or start a new tool or reward; “Run in sandbox” runs the editor's text.
        </div>
      ) : null}
      <div className="editor-host" ref={host} data-testid="monaco" />
    </>
  );
}
