import { useEffect, useRef, useState } from 'react';
import { useArbor, useArborStore } from './store/react';
import type { ArborState, View } from './store';
import { RunsView } from './views/runs/RunsView';
import { RunView } from './views/run/RunView';
import { CompareView } from './views/Compare';
import { TrajectoriesView } from './views/trajectories/TrajectoriesView';
import { EditorView } from './views/editor/EditorView';
import { PlaygroundView } from './views/playground/PlaygroundView';
import { StartView } from './views/Start';
import { formatCompareHash, formatRunHash, formatTrajHash, parseViewHash, type ViewUrlState } from './lib/urlState';

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
      <Banner />
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

/**
 * The view's place in the URL's hash (lib/urlState.ts): the Run view's run, Compare's runs, and the
 * Trajectories view's run, step, trajectory and channel. Opened from it once the engine is connected
 * and on back/forward; written as they change (a new history entry per run or trajectory opened, the
 * channel in place); other views clear it.
 */
function useViewUrl() {
  const store = useArborStore();
  const connection = useArbor((s) => s.connection.status);
  const applied = useRef(false);
  useEffect(() => {
    const open = (u: ViewUrlState | null) => {
      if (!u) return;
      const s = store.getState();
      if (u.view === 'trajectories') void s.trajListActions.openFromUrl(u);
      else if (u.view === 'run') {
        if (s.run.id !== u.run || s.nav.view !== 'run') void s.runActions.open(u.run);
      } else {
        openCompare(s, u.runs);
      }
    };
    if (connection.state === 'open' && !applied.current) {
      applied.current = true;
      open(parseViewHash(window.location.hash));
    }
    const onPop = () => open(parseViewHash(window.location.hash));
    window.addEventListener('popstate', onPop);
    return () => window.removeEventListener('popstate', onPop);
  }, [connection.state, store]);
  useEffect(() => {
    const off = store.subscribe((s, prev) => {
      const cur = parseViewHash(window.location.hash);
      const write = (hash: string, replace: boolean) => {
        if (hash === window.location.hash) return;
        const url = `${window.location.pathname}${window.location.search}${hash}`;
        if (replace) window.history.replaceState(null, '', url);
        else window.history.pushState(null, '', url);
      };
      if (s.nav.view === 'run') {
        if (s.run.id && (s.nav.view !== prev.nav.view || s.run.id !== prev.run.id)) write(formatRunHash(s.run.id), cur?.view === 'run' && cur.run === s.run.id);
        return;
      }
      if (s.nav.view === 'compare') {
        const ids = s.compare.runs.map((r) => r.id);
        if (ids.length && (s.nav.view !== prev.nav.view || s.compare !== prev.compare)) write(formatCompareHash(ids), cur?.view === 'compare');
        return;
      }
      if (s.nav.view !== 'trajectories') {
        // A view with no URL state: the URL no longer names one (a reload opens where the user is).
        if (s.nav.view !== prev.nav.view && cur) window.history.replaceState(null, '', `${window.location.pathname}${window.location.search}`);
        return;
      }
      const { trajList: l, traj: t } = s;
      if (!l.runId) return;
      if (
        l.runId === prev.trajList.runId &&
        l.step === prev.trajList.step &&
        t.current?.id === prev.traj.current?.id &&
        t.channel === prev.traj.channel &&
        s.nav.view === prev.nav.view
      )
        return;
      // While a trajectory loads, wait for it (the URL names a trajectory, not "loading").
      if (!t.current && l.items.length) return;
      const hash = formatTrajHash({
        run: l.runId,
        ...(l.step != null ? { step: l.step } : {}),
        ...(t.current ? { sample: t.current.id } : {}),
        channel: t.channel,
      });
      write(hash, cur?.view === 'trajectories' && cur.run === l.runId && cur.sample === t.current?.id && cur.step === (l.step ?? undefined));
    });
    return off;
  }, [store]);
}

/** Open Compare on these runs (from the URL). */
function openCompare(s: ArborState, ids: string[]) {
  for (const id of ids) if (!s.runList.compareIds.includes(id)) s.runListActions.toggleCompare(id);
  void s.compareActions.load(ids);
  s.navActions.go('compare');
}

/** The engine is up but its workspace database could not be opened: say why and offer another. */
function WorkspaceBanner() {
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

function Banner() {
  const c = useArbor((s) => s.connection.status);
  if (c.state === 'open') return <WorkspaceBanner />;
  if (c.state === 'engine-crashed')
    return (
      <div className="banner err" role="alert" data-testid="crash-banner">
        The engine stopped unexpectedly: {c.message}.{' '}
        {c.restarting ? `Restarting it${c.attempt ? ` (attempt ${c.attempt})` : ''}…` : 'It will not be restarted again; save your work and restart Arbor.'}
      </div>
    );
  if (c.state === 'closed')
    return (
      <div className="banner err" role="alert" data-testid="crash-banner">
        Lost the connection to the engine: {c.message}. Reconnecting…
      </div>
    );
  return null;
}

function ErrorStrip() {
  const errors = useArbor((s) => s.connection.errors);
  const dismiss = useArbor((s) => s.connectionActions.dismissError);
  if (!errors.length) return null;
  return (
    <div className="errors" style={{ padding: '8px 16px 0' }} data-testid="errors">
      {errors.map((e) => (
        <div key={e.id} className="error-msg" role="alert">
          <strong>{e.context}:</strong>
          <pre>{e.message}</pre>
          <button onClick={() => dismiss(e.id)} aria-label="dismiss">
            ×
          </button>
        </div>
      ))}
    </div>
  );
}

/**
 * Programs from elsewhere ask first: the MCP server commands, tool/reward files or workspace
 * folder a config or stored run would run, which this workspace has not approved. Approve runs
 * them (and remembers their content); Cancel stops whatever asked.
 */
function ConsentDialog() {
  const consents = useArbor((s) => s.consent.prompts);
  const answer = useArbor((s) => s.consentActions.answer);
  const c = consents[0];
  if (!c) return null;
  const head = {
    'mcp-server': 'MCP server command',
    agent: 'agent program (runs as you, not sandboxed)',
    tool: 'tool file',
    reward: 'reward file',
    workspace: 'workspace folder',
    plugin: 'plugin (runs in the engine, not sandboxed)',
    judge: 'LLM judge (trajectories are sent to this URL)',
  } as const;
  return (
    <div className="modal-back">
      <div className="modal" role="dialog" aria-modal="true" aria-labelledby="consent-title" data-testid="consent-dialog">
        <h3 id="consent-title" style={{ margin: 0 }}>
          Run programs this workspace has not approved?
        </h3>
        <div className="muted">
          {c.origin} would run the following. They run on this computer with your permissions (MCP servers) or in Arbor&apos;s sandbox (tool and reward files).
          Approve only what you have read or trust; a changed file or command asks again.
        </div>
        <ul data-testid="consent-items" style={{ margin: 0, paddingLeft: 18 }}>
          {c.items.map((i, k) => (
            <li key={k}>
              <span className="muted">{head[i.kind]}:</span> <code>{i.label}</code>
            </li>
          ))}
        </ul>
        <div style={{ display: 'flex', gap: 8, justifyContent: 'flex-end' }}>
          <button data-testid="consent-cancel" onClick={() => void answer(c.id, false)}>
            Cancel
          </button>
          <button className="primary" data-testid="consent-approve" onClick={() => void answer(c.id, true)}>
            Approve and run
          </button>
        </div>
      </div>
    </div>
  );
}
