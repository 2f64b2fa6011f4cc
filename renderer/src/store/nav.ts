// Which view the workbench shows.
import type { Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends NavSlice {}
}

export type View = 'start' | 'runs' | 'run' | 'compare' | 'trajectories' | 'editor' | 'playground';

export interface NavSlice {
  nav: { view: View };
  navActions: { go(view: View): void };
}

export function createNavSlice(set: Set): NavSlice {
  return {
    nav: { view: 'runs' },
    navActions: { go: (view) => set({ nav: { view } }) },
  };
}
