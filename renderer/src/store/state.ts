// The store's state type: each slice file (./nav.ts, ./runs.ts, ./run.ts, …) adds its own part by
// augmenting ArborState (TypeScript declaration merging). So the slices import only this file and
// this file imports no slice: no import circle (eslint arbor/no-cycle).
//
// Every slice is namespaced, as the Inspect viewer's store is: its fields live under one key
// (`runList`, `run`, `traj`, …) and its actions under `<key>Actions` (`runListActions`, …), so a
// component reads `s.run.detail` and calls `s.runActions.reload()`, and two slices never clash.
import type { StoreApi } from 'zustand/vanilla';

/** Every slice's fields and actions (the slice files extend it). */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface ArborState {}
export type Set = StoreApi<ArborState>['setState'];
export type Get = StoreApi<ArborState>['getState'];
export type ArborStore = StoreApi<ArborState>;

/**
 * Merge `patch` into one namespaced slice. zustand's `set` merges only the top level, so a
 * namespace is replaced by a copy with the patch applied.
 */
export function patchSlice<K extends keyof ArborState>(set: Set, key: K, patch: Partial<ArborState[K]>): void {
  set((s) => ({ [key]: { ...(s[key] as object), ...patch } }) as unknown as Partial<ArborState>);
}
