// The workbench: the nav, the engine and workspace banners, the error strip, consent questions, and
// the view the nav chose (each view a folder under views/; the frame's pieces under shell/).
import { useEffect, useRef } from 'react';
import { useArbor, useArborStore } from './store/react';
import type { View } from './store';
import { RunsView } from './views/runs/RunsView';
import { RunView } from './views/run/RunView';
import { CompareView } from './views/compare/CompareView';
import { TrajectoriesView } from './views/trajectories/TrajectoriesView';
import { EditorView } from './views/editor/EditorView';
import { PlaygroundView } from './views/playground/PlaygroundView';
import { StartView } from './views/start/StartView';
import { useViewUrl } from './shell/useViewUrl';
import { EngineBanner } from './shell/EngineBanner';
import { ErrorStrip } from './shell/ErrorStrip';
import { ConsentDialog } from './shell/ConsentDialog';

const NAV: [View, string][] = [
  ['start', 'Start'],
  ['runs', 'Runs'],
  ['run', 'Run'],
  ['compare', 'Compare'],
  ['trajectories', 'Trajectories'],
  ['editor', 'Editor'],
  ['playground', 'Playground'],
];

export function App() {
  const view = useArbor((s) => s.nav.view);
  const go = useArbor((s) => s.navActions.go);
  const connection = useArbor((s) => s.connection.status);
  const refreshRuns = useArbor((s) => s.runListActions.refresh);
  const loadTemplates = useArbor((s) => s.runListActions.loadTemplates);

  const store = useArborStore();
  const firstLoad = useRef(true);
  useEffect(() => {
    if (connection.state === 'open') {
      void refreshRuns().then(() => {
        // A workspace with no runs yet opens on the first-run page (once; the nav leads back to it).
        const s = store.getState();
        if (firstLoad.current && s.runList.runs.length === 0 && s.nav.view === 'runs') s.navActions.go('start');
        firstLoad.current = false;
      });
      void loadTemplates();
    }
  }, [connection.state, refreshRuns, loadTemplates, store]);

  useViewUrl();

  return (
    <div className="app">
      <EngineBanner />
      <nav className="nav">
        <div className="brand">ARBOR</div>
        {NAV.map(([v, label]) => (
          <button key={v} className={view === v ? 'active' : ''} onClick={() => go(v)} data-testid={`nav-${v}`}>
            {label}
          </button>
        ))}
        <div className="status" data-testid="engine-status">
          <span className={`dot ${connection.state === 'open' ? 'ok' : connection.state === 'connecting' ? 'warn' : 'err'}`} />
          engine {connection.state === 'open' ? 'connected' : connection.state}
        </div>
      </nav>
      <ConsentDialog />
      <main className="main">
        <ErrorStrip />
        {view === 'start' && <StartView />}
        {view === 'runs' && <RunsView />}
        {view === 'run' && <RunView />}
        {view === 'compare' && <CompareView />}
        {view === 'trajectories' && <TrajectoriesView />}
        {view === 'editor' && <EditorView />}
        {view === 'playground' && <PlaygroundView />}
      </main>
    </div>
  );
}
