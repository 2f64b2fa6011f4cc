// What-if replays of the open trajectory (replay.fork): the stored ones, the last fork's answer
// and its progress while it samples.
import type { ArborApi, Checkpoint, ForkProgress, ForkRequest, ForkResult, TrajectorySummary } from '../../api/types';
import { patchSlice, type Get, type Set } from '../state';

declare module '../state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends ForkSlice {}
}

export interface ForkState {
  /** The stored what-if replays of the open trajectory. */
  items: TrajectorySummary[];
  result: ForkResult | null;
  progress: ForkProgress | null;
  running: boolean;
}

export interface ForkSlice {
  forks: ForkState;
  forkActions: {
    /** Fork the open trajectory and sample continuations (stored, linked to it). */
    fork(req: Omit<ForkRequest, 'trajectoryId'>): Promise<void>;
    /** A trajectory was opened: forget the last fork's answer and load its stored forks. */
    show(trajectoryId: string): Promise<void>;
    /** Every stored checkpoint (the fork panel's choices). */
    listAllCheckpoints(): Promise<Checkpoint[]>;
  };
}

export function createForkSlice(api: ArborApi, set: Set, get: Get): ForkSlice {
  const patch = (p: Partial<ForkState>) => patchSlice(set, 'forks', p);
  const isOpen = (id: string) => get().traj.current?.id === id;
  return {
    forks: { items: [], result: null, progress: null, running: false },
    forkActions: {
      async fork(req) {
        const t = get().traj.current;
        if (!t || get().forks.running) return;
        patch({ running: true, progress: null, result: null });
        try {
          const result = await api.forkTrajectory({ ...req, trajectoryId: t.id }, (progress) => patch({ progress }));
          const items = await api.listForks(t.id);
          if (isOpen(t.id)) patch({ result, items });
        } catch (err) {
          get().connectionActions.reportError(`Forking trajectory ${t.id}`, err);
        } finally {
          patch({ running: false });
        }
      },
      async show(trajectoryId) {
        patch({ items: [], result: null });
        // No stored forks to show when they cannot be listed: the panel offers a new one either way.
        const items = await api.listForks(trajectoryId).catch(() => []);
        if (isOpen(trajectoryId)) patch({ items });
      },
      async listAllCheckpoints() {
        try {
          return await api.listCheckpoints();
        } catch (err) {
          get().connectionActions.reportError('Loading checkpoints', err);
          return [];
        }
      },
    },
  };
}
