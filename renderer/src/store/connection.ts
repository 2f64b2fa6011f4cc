import type { ArborApi, ConnectionState, EngineInfo } from '../api/types';
import { readableError } from '../lib/errors';
import type { Get, Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends ConnectionSlice {}
}

export interface UiError {
  id: number;
  context: string;
  message: string;
}

export interface ConnectionSlice {
  connection: ConnectionState;
  /** set once the engine has been lost and come back, so views reload */
  reconnects: number;
  errors: UiError[];
  /** What the engine reports about itself: its home and, when the workspace database could not be opened, why. */
  engine: EngineInfo | null;
  setEngineInfo(info: EngineInfo): void;
  /** Open another workspace database (the engine's offer after a corrupted one); false after reporting why not. */
  openWorkspace(path: string): Promise<boolean>;
  setConnection(c: ConnectionState): void;
  /** Record an engine error for the error strip; returns the message. */
  reportError(context: string, err: unknown): string;
  dismissError(id: number): void;
}

let nextErrorId = 1;

export function createConnectionSlice(api: ArborApi, set: Set, get: Get): ConnectionSlice {
  return {
    connection: { state: 'connecting' },
    reconnects: 0,
    errors: [],
    engine: null,
    setEngineInfo(info) {
      const before = get().engine;
      set({ engine: info });
      // A workspace opened after an error (or a different one): load what it has.
      if (before && (before.workspaceError !== info.workspaceError || before.home !== info.home) && !info.workspaceError) {
        const s = get();
        set({ errors: [] });
        void s.refreshRuns();
        void s.loadTemplates();
      }
    },
    async openWorkspace(path) {
      try {
        get().setEngineInfo(await api.openWorkspace(path));
        return true;
      } catch (err) {
        get().reportError(`Opening the workspace ${path}`, err);
        return false;
      }
    },
    setConnection(c) {
      const prev = get().connection.state;
      set({ connection: c });
      if (c.state === 'open' && (prev === 'engine-crashed' || prev === 'closed')) {
        set({ reconnects: get().reconnects + 1 });
        // Reload what the user is looking at from the restarted engine.
        const s = get();
        void s.refreshRuns();
        void s.loadTemplates();
        if (s.runId) void s.reloadRun();
        if (s.compare.runs.length) void s.loadCompare(s.compare.runs.map((r) => r.id));
        if (s.view === 'editor') void s.loadEnv();
        if (s.view === 'playground') void s.loadCheckpoints();
        if (s.trajList.runId && s.view === 'trajectories') void s.trajListActions.open(s.trajList.runId, s.trajList.step ?? undefined);
      }
    },
    reportError(context, err) {
      const message = readableError(err);
      // The workspace banner already says this one, with the way out.
      if ((err as { code?: string } | null)?.code === 'workspace' && get().engine?.workspaceError) return message;
      const errors = [...get().errors, { id: nextErrorId++, context, message }].slice(-5);
      set({ errors });
      return message;
    },
    dismissError(id) {
      set({ errors: get().errors.filter((e) => e.id !== id) });
    },
  };
}
