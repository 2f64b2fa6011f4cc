import './editor.css';
import { useEffect, useState } from 'react';
import { useArborStore } from '../../store/react';
import { NewFileDialog, type NewFileAsk } from './NewFileDialog';
import { EditorToolbar } from './EditorToolbar';
import { MonacoEditor } from './MonacoEditor';
import { TryPanel } from './TryPanel';

/** Edit the workspace's tool, reward and MCP server files in Monaco, and try them in the sandbox. */
export function EditorView() {
  const store = useArborStore();
  // "New tool/reward/MCP servers" ask for the path in an in-app dialog (Electron has no window.prompt).
  const [asking, setAsking] = useState<NewFileAsk | null>(null);
  useEffect(() => {
    void store.getState().editorActions.loadEnv();
  }, [store]);
  return (
    <div className="view" data-testid="view-editor">
      <EditorToolbar onNew={setAsking} />
      {asking ? (
        <NewFileDialog ask={asking} onCreate={(path) => store.getState().editorActions.newFile(path, asking.template)} onClose={() => setAsking(null)} />
      ) : null}
      <MonacoEditor />
      <TryPanel />
    </div>
  );
}
