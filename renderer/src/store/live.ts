// The playground's live rollout you can pause (engine/playground/live.ts through live.start / live.step):
// the session's state as the engine returns it after each action.
import type { ArborApi, LiveState } from '../api/types';
import type { Get, Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends LiveSlice {}
}

export type LiveAction = 'token' | 'force' | 'turn' | 'observation' | 'finish';

export interface LiveSlice {
  live: LiveState | null;
  liveBusy: boolean;
  liveTemperature: number;
  setLiveTemperature(t: number): void;
  startLive(checkpoint: string): Promise<void>;
  liveStep(action: LiveAction, extra?: { tokenId?: number; text?: string }): Promise<void>;
  closeLive(): Promise<void>;
  /** Open the stored episode in the replay (its run, step −1). */
  openLiveInReplay(): Promise<void>;
}

export function createLiveSlice(api: ArborApi, set: Set, get: Get): LiveSlice {
  return {
    live: null,
    liveBusy: false,
    liveTemperature: 1,
    setLiveTemperature: (liveTemperature) => set({ liveTemperature }),
    async startLive(checkpoint) {
      if (get().liveBusy) return;
      await get().closeLive();
      set({ liveBusy: true });
      try {
        set({ live: await api.liveStart({ checkpoint, temperature: get().liveTemperature, k: 8 }) });
      } catch (err) {
        get().reportError('Starting a live rollout', err);
      } finally {
        set({ liveBusy: false });
      }
    },
    async liveStep(action, extra = {}) {
      const s = get();
      if (!s.live || s.liveBusy || s.live.phase === 'done') return;
      set({ liveBusy: true });
      try {
        set({ live: await api.liveStep({ sessionId: s.live.sessionId, action, ...extra }) });
      } catch (err) {
        get().reportError(`Live rollout: ${action}`, err);
      } finally {
        set({ liveBusy: false });
      }
    },
    async openLiveInReplay() {
      const r = get().live?.result;
      const runId = get().live?.checkpoint.runId;
      if (!r || !runId) return;
      await get().trajListActions.openFromUrl({ run: runId, step: -1, sample: r.trajectoryId });
    },
    async closeLive() {
      const l = get().live;
      set({ live: null });
      if (l && l.phase !== 'done') await api.liveClose(l.sessionId).catch(() => undefined);
    },
  };
}
