// The workbench state: one zustand store made of namespaced slices (as Inspect's log viewer does):
// each slice's fields under one key (`run`, `traj`, …) beside its actions (`runActions`, …), owning
// one view's data and the actions that load it through the ArborApi. The store is built by a
// factory so tests drive it against a real engine connection.
import { createStore } from 'zustand/vanilla';
import type { ArborState, ArborStore } from './state';
import type { ArborApi } from '../api/types';
import { createNavSlice } from './nav';
import { createConsentSlice } from './consent';
import { createConnectionSlice } from './connection';
import { createRunListSlice } from './runs';
import { createRunSlice } from './run';
import { createCompareSlice } from './compare';
import { createForkSlice, createOpenTrajSlice, createTrajListSlice, createTreeSlice } from './trajectories';
import { createEditorSlice } from './editor';
import { createPlaygroundSlice } from './playground';
import { createLiveSlice } from './live';
import { createRunGroupsSlice } from './groups';
import { createModelsSlice } from './models';

export type { ArborState, ArborStore, Get, Set } from './state';
export type { View } from './nav';

export function createArborStore(api: ArborApi): ArborStore {
  const store = createStore<ArborState>()((set, get) => ({
    ...createNavSlice(set),
    ...createConsentSlice(api, set, get),
    ...createConnectionSlice(api, set, get),
    ...createRunListSlice(api, set, get),
    ...createRunSlice(api, set, get),
    ...createCompareSlice(api, set, get),
    ...createTrajListSlice(api, set, get),
    ...createOpenTrajSlice(api, set, get),
    ...createForkSlice(api, set, get),
    ...createTreeSlice(api, set, get),
    ...createEditorSlice(api, set, get),
    ...createPlaygroundSlice(api, set, get),
    ...createLiveSlice(api, set, get),
    ...createRunGroupsSlice(api, set, get),
    ...createModelsSlice(api, set, get),
  }));
  const s = () => store.getState();
  api.onConsent?.((c) => s().consentActions.applyPrompt(c));
  // Pushed events fan out to the slices that follow them.
  api.onEvent((e) => {
    const { runListActions, runActions, compareActions, trajListActions } = s();
    runListActions.applyEvent(e);
    runActions.applyEvent(e);
    compareActions.applyEvent(e);
    trajListActions.applyEvent(e);
  });
  api.onConnection((c) => s().connectionActions.setStatus(c));
  api.onEngineInfo((info) => s().connectionActions.setEngineInfo(info));
  return store;
}

export { readableError } from '../lib/errors';
