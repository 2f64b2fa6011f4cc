import type { ArborApi, ConnectionState } from '../api/types';
import { readableError } from '../lib/errors';
import type { Get, Set } from './index';

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
  setConnection(c: ConnectionState): void;
  /** Record an engine error for the error strip; returns the message. */
  reportError(context: string, err: unknown): string;
  dismissError(id: number): void;
}

let nextErrorId = 1;

export function createConnectionSlice(_api: ArborApi, set: Set, get: Get): ConnectionSlice {
  return {
    connection: { state: 'connecting' },
    reconnects: 0,
    errors: [],
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
        if (s.trajRunId && s.view === 'trajectories') void s.openTrajectories(s.trajRunId, s.step ?? undefined);
      }
    },
    reportError(context, err) {
      const message = readableError(err);
      const errors = [...get().errors, { id: nextErrorId++, context, message }].slice(-5);
      set({ errors });
      return message;
    },
    dismissError(id) {
      set({ errors: get().errors.filter((e) => e.id !== id) });
    },
  };
}
