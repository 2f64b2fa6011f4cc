import { useState } from 'react';
import { useArbor } from '../store/react';

/** The engine is up but its workspace database could not be opened: say why and offer another. */
export function WorkspaceBanner() {
  const engine = useArbor((s) => s.connection.engine);
  const openWorkspace = useArbor((s) => s.connectionActions.openWorkspace);
  const suggested = engine ? `${engine.home.replace(/\/+$/, '')}/arbor-${new Date().toISOString().slice(0, 10)}.db` : '';
  const [path, setPath] = useState('');
  const [busy, setBusy] = useState(false);
  if (!engine?.workspaceError) return null;
  return (
    <div className="banner err" role="alert" data-testid="workspace-banner">
      <div>The workspace database could not be opened: {engine.workspaceError}</div>
      <div style={{ marginTop: 6, display: 'flex', gap: 6, alignItems: 'center' }}>
        Open another workspace (a new file is created):
        <input
          data-testid="workspace-path"
          aria-label="workspace database path"
          style={{ width: 420 }}
          value={path || suggested}
          onChange={(e) => setPath(e.target.value)}
        />
        <button
          className="primary"
          data-testid="workspace-open"
          disabled={busy}
          onClick={async () => {
            setBusy(true);
            await openWorkspace(path || suggested);
            setBusy(false);
          }}
        >
          Open
        </button>
        <span className="muted">the damaged file is left as it is</span>
      </div>
    </div>
  );
}
