// The store's state type: the navigation slice here, and each slice file (./runs.ts, ./run.ts, …)
// adds its own part by augmenting ArborState (TypeScript declaration merging). So the slices
// import only this file and this file imports no slice: no import circle (eslint arbor/no-cycle).
import type { StoreApi } from 'zustand/vanilla';
import type { ConsentPrompt } from '../api/types';

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

/** Every slice's fields and actions (the slice files extend it). */
export interface ArborState extends NavSlice, ConsentSlice {}
export type Set = StoreApi<ArborState>['setState'];
export type Get = StoreApi<ArborState>['getState'];
export type ArborStore = StoreApi<ArborState>;

/**
 * Merge `patch` into one namespaced slice (`traj`, `tree`, …: a slice whose fields live under one
 * key, beside its `…Actions`, as the Inspect viewer's store does). zustand's `set` merges only the
 * top level, so a namespace is replaced by a copy with the patch applied.
 */
export function patchSlice<K extends keyof ArborState>(set: Set, key: K, patch: Partial<ArborState[K]>): void {
  set((s) => ({ [key]: { ...(s[key] as object), ...patch } }) as unknown as Partial<ArborState>);
}
