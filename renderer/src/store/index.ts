// The workbench state: one zustand store made of slices (as Inspect's log viewer does), each
// owning one view's data and the actions that load it through the ArborApi. The store is built
// by a factory so tests drive it against a real engine connection.
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { ArborApi, ConsentPrompt } from '../api/types';
import { createConnectionSlice, type ConnectionSlice } from './connection';
import { createRunsSlice, type RunsSlice } from './runs';
import { createRunSlice, type RunSlice } from './run';
import { createTrajSlice, type TrajSlice } from './trajectories';
import { createEditorSlice, type EditorSlice } from './editor';
import { createPlaygroundSlice, type PlaygroundSlice } from './playground';
import { createLiveSlice, type LiveSlice } from './live';

export type View = 'start' | 'runs' | 'run' | 'compare' | 'trajectories' | 'editor' | 'playground';

export interface NavSlice {
  view: View;
  go(view: View): void;
}

/** Programs the engine asks the user to approve before it runs them (engine/server/consent.ts). */
export interface ConsentSlice {
  consents: ConsentPrompt[];
  answerConsent(id: string, approve: boolean): Promise<void>;
}

export type ArborState = NavSlice & ConnectionSlice & RunsSlice & RunSlice & TrajSlice & EditorSlice & PlaygroundSlice & LiveSlice & ConsentSlice;
export type Set = StoreApi<ArborState>['setState'];
export type Get = StoreApi<ArborState>['getState'];
export type ArborStore = StoreApi<ArborState>;

export function createArborStore(api: ArborApi): ArborStore {
  const store = createStore<ArborState>()((set, get) => ({
    view: 'runs',
    go: (view) => set({ view }),
    ...createConnectionSlice(api, set, get),
    ...createRunsSlice(api, set, get),
    ...createRunSlice(api, set, get),
    ...createTrajSlice(api, set, get),
    ...createEditorSlice(api, set, get),
    ...createPlaygroundSlice(api, set, get),
    ...createLiveSlice(api, set, get),
    consents: [],
    async answerConsent(id, approve) {
      set({ consents: get().consents.filter((c) => c.id !== id) });
      await api.answerConsent?.(id, approve);
    },
  }));
  api.onConsent?.((c) =>
    store.setState((s) => ({ consents: c.done ? s.consents.filter((x) => x.id !== c.id) : [...s.consents.filter((x) => x.id !== c.id), c] })),
  );
  // Pushed events fan out to the slices that follow them.
  api.onEvent((e) => {
    const s = store.getState();
    s.applyRunEvent(e);
    s.applyRunDetailEvent(e);
    s.applyTrajEvent(e);
  });
  api.onConnection((c) => store.getState().setConnection(c));
  api.onEngineInfo((info) => store.getState().setEngineInfo(info));
  return store;
}

export { readableError } from '../lib/errors';
