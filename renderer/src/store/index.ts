// The workbench state: one zustand store made of slices (as Inspect's log viewer does), each
// owning one view's data and the actions that load it through the ArborApi. The store is built
// by a factory so tests drive it against a real engine connection.
import { createStore, type StoreApi } from 'zustand/vanilla';
import type { ArborApi } from '../api/types';
import { createConnectionSlice, type ConnectionSlice } from './connection';
import { createRunsSlice, type RunsSlice } from './runs';
import { createRunSlice, type RunSlice } from './run';
import { createTrajSlice, type TrajSlice } from './trajectories';
import { createEditorSlice, type EditorSlice } from './editor';
import { createPlaygroundSlice, type PlaygroundSlice } from './playground';
import { createGroupsSlice, type GroupsSlice } from './groups';

export type View = 'start' | 'runs' | 'run' | 'compare' | 'trajectories' | 'editor' | 'playground';

export interface NavSlice {
  view: View;
  go(view: View): void;
}

export type ArborState = NavSlice & ConnectionSlice & RunsSlice & RunSlice & TrajSlice & EditorSlice & PlaygroundSlice & GroupsSlice;
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
    ...createGroupsSlice(api, set, get),
  }));
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
