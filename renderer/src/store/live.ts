// The playground's live rollout you can pause (engine/playground/live.ts through live.start / live.step):
// the session's state as the engine returns it after each action.
import type { ArborApi, LiveState } from '../api/types';
import { patchSlice, type Get, type Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends LiveSlice {}
}

export type LiveAction = 'token' | 'force' | 'turn' | 'observation' | 'finish';

export interface LiveSliceState {
  /** The live session as the engine last returned it (null: none open). */
  session: LiveState | null;
  busy: boolean;
  temperature: number;
}

export interface LiveSlice {
  live: LiveSliceState;
  liveActions: {
    setTemperature(t: number): void;
    start(checkpoint: string): Promise<void>;
    step(action: LiveAction, extra?: { tokenId?: number; text?: string }): Promise<void>;
    close(): Promise<void>;
    /** Open the stored episode in the replay (its run, step −1). */
    openInReplay(): Promise<void>;
  };
}

export function createLiveSlice(api: ArborApi, set: Set, get: Get): LiveSlice {
  const patch = (p: Partial<LiveSliceState>) => patchSlice(set, 'live', p);
  const report = (context: string, err: unknown) => get().connectionActions.reportError(context, err);
  const actions: LiveSlice['liveActions'] = {
    setTemperature: (temperature) => patch({ temperature }),
    async start(checkpoint) {
      if (get().live.busy) return;
      await actions.close();
      patch({ busy: true });
      try {
        patch({ session: await api.liveStart({ checkpoint, temperature: get().live.temperature, k: 8 }) });
      } catch (err) {
        report('Starting a live rollout', err);
      } finally {
        patch({ busy: false });
      }
    },
    async step(action, extra = {}) {
      const s = get().live;
      if (!s.session || s.busy || s.session.phase === 'done') return;
      patch({ busy: true });
      try {
        patch({ session: await api.liveStep({ sessionId: s.session.sessionId, action, ...extra }) });
      } catch (err) {
        report(`Live rollout: ${action}`, err);
      } finally {
        patch({ busy: false });
      }
    },
    async openInReplay() {
      const r = get().live.session?.result;
      const runId = get().live.session?.checkpoint.runId;
      if (!r || !runId) return;
      await get().trajListActions.openFromUrl({ run: runId, step: -1, sample: r.trajectoryId });
    },
    async close() {
      const l = get().live.session;
      patch({ session: null });
      if (l && l.phase !== 'done') await api.liveClose(l.sessionId).catch(() => undefined);
    },
  };
  return { live: { session: null, busy: false, temperature: 1 }, liveActions: actions };
}
