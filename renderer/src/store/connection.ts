// The engine link: its state (and how often it came back), what the engine says about itself, and
// the error strip's messages.
import type { ArborApi, ConnectionState, EngineInfo } from '../api/types';
import { readableError } from '../lib/errors';
import { patchSlice, type Get, type Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends ConnectionSlice {}
}

export interface UiError {
  id: number;
  context: string;
  message: string;
}

export interface ConnectionSliceState {
  status: ConnectionState;
  /** set once the engine has been lost and come back, so views reload */
  reconnects: number;
  errors: UiError[];
  /** What the engine reports about itself: its home and, when the workspace database could not be opened, why. */
  engine: EngineInfo | null;
}

export interface ConnectionSlice {
  connection: ConnectionSliceState;
  connectionActions: {
    setEngineInfo(info: EngineInfo): void;
    /** Open another workspace database (the engine's offer after a corrupted one); false after reporting why not. */
    openWorkspace(path: string): Promise<boolean>;
    setStatus(c: ConnectionState): void;
    /** Record an engine error for the error strip; returns the message. */
    reportError(context: string, err: unknown): string;
    dismissError(id: number): void;
  };
}

let nextErrorId = 1;

export function createConnectionSlice(api: ArborApi, set: Set, get: Get): ConnectionSlice {
  const patch = (p: Partial<ConnectionSliceState>) => patchSlice(set, 'connection', p);
  const actions: ConnectionSlice['connectionActions'] = {
    setEngineInfo(info) {
      const before = get().connection.engine;
      patch({ engine: info });
      // A workspace opened after an error (or a different one): load what it has.
      if (before && (before.workspaceError !== info.workspaceError || before.home !== info.home) && !info.workspaceError) {
        patch({ errors: [] });
        void get().runListActions.refresh();
        void get().runListActions.loadTemplates();
      }
    },
    async openWorkspace(path) {
      try {
        actions.setEngineInfo(await api.openWorkspace(path));
        return true;
      } catch (err) {
        actions.reportError(`Opening the workspace ${path}`, err);
        return false;
      }
    },
    setStatus(c) {
      const prev = get().connection.status.state;
      patch({ status: c });
      if (c.state === 'open' && (prev === 'engine-crashed' || prev === 'closed')) {
        patch({ reconnects: get().connection.reconnects + 1 });
        // Reload what the user is looking at from the restarted engine.
        const s = get();
        void s.runListActions.refresh();
        void s.runListActions.loadTemplates();
        if (s.run.id) void s.runActions.reload();
        if (s.compare.runs.length) void s.compareActions.load(s.compare.runs.map((r) => r.id));
        if (s.nav.view === 'editor') void s.editorActions.loadEnv();
        if (s.nav.view === 'playground') void s.playgroundActions.loadCheckpoints();
        if (s.trajList.runId && s.nav.view === 'trajectories') void s.trajListActions.open(s.trajList.runId, s.trajList.step ?? undefined);
      }
    },
    reportError(context, err) {
      const message = readableError(err);
      // The workspace banner already says this one, with the way out.
      if ((err as { code?: string } | null)?.code === 'workspace' && get().connection.engine?.workspaceError) return message;
      patch({ errors: [...get().connection.errors, { id: nextErrorId++, context, message }].slice(-5) });
      return message;
    },
    dismissError(id) {
      patch({ errors: get().connection.errors.filter((e) => e.id !== id) });
    },
  };
  return {
    connection: { status: { state: 'connecting' }, reconnects: 0, errors: [], engine: null },
    connectionActions: actions,
  };
}
