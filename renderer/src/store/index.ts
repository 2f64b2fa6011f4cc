// The workbench state: one zustand store made of slices (as Inspect's log viewer does), each
// owning one view's data and the actions that load it through the ArborApi. The store is built
// by a factory so tests drive it against a real engine connection.
import { createStore } from 'zustand/vanilla';
import type { ArborState, ArborStore } from './state';
import type { ArborApi } from '../api/types';
import { createConnectionSlice } from './connection';
import { createRunsSlice } from './runs';
import { createRunSlice } from './run';
import { createForkSlice, createOpenTrajSlice, createTrajListSlice, createTreeSlice } from './trajectories';
import { createEditorSlice } from './editor';
import { createPlaygroundSlice } from './playground';
import { createLiveSlice } from './live';
import { createGroupsSlice } from './groups';
import { createModelsSlice } from './models';

export type { ArborState, ArborStore, ConsentSlice, Get, NavSlice, Set, View } from './state';

export function createArborStore(api: ArborApi): ArborStore {
  const store = createStore<ArborState>()((set, get) => ({
    view: 'runs',
    go: (view) => set({ view }),
    ...createConnectionSlice(api, set, get),
    ...createRunsSlice(api, set, get),
    ...createRunSlice(api, set, get),
    ...createTrajListSlice(api, set, get),
    ...createOpenTrajSlice(api, set, get),
    ...createForkSlice(api, set, get),
    ...createTreeSlice(api, set, get),
    ...createEditorSlice(api, set, get),
    ...createPlaygroundSlice(api, set, get),
    ...createLiveSlice(api, set, get),
    consents: [],
    async answerConsent(id, approve) {
      set({ consents: get().consents.filter((c) => c.id !== id) });
      await api.answerConsent?.(id, approve);
    },
    ...createGroupsSlice(api, set, get),
    ...createModelsSlice(api, set, get),
  }));
  api.onConsent?.((c) =>
    store.setState((s) => ({ consents: c.done ? s.consents.filter((x) => x.id !== c.id) : [...s.consents.filter((x) => x.id !== c.id), c] })),
  );
  // Pushed events fan out to the slices that follow them.
  api.onEvent((e) => {
    const s = store.getState();
    s.applyRunEvent(e);
    s.applyRunDetailEvent(e);
    s.trajListActions.applyEvent(e);
  });
  api.onConnection((c) => store.getState().setConnection(c));
  api.onEngineInfo((info) => store.getState().setEngineInfo(info));
  return store;
}

export { readableError } from '../lib/errors';
