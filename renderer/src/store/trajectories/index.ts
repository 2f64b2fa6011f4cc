// The Trajectories view's state, one namespaced slice per concern: the step's list (`trajList`),
// the open trajectory with its token cursor (`traj`), its what-if forks (`forks`) and its group's
// branch tree (`tree`), each beside its actions (`trajListActions`, …). Slices reach each other
// through the store's `get()`, never by import.
export * from './order';
export { createTrajListSlice, type TrajListSlice, type TrajListState } from './list';
export { createOpenTrajSlice, type OpenTrajSlice, type OpenTrajState } from './open';
export { createForkSlice, type ForkSlice, type ForkState } from './forks';
export { createTreeSlice, type TreeSlice, type TreeState } from './tree';
