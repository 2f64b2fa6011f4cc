// The step's trajectory list: which run and step are open, the stored steps, the filter and the
// order, and following a live run's new steps.
import type { ArborApi, EngineEvent, TrajectorySummary } from '../../api/types';
import type { Channel } from '../../lib/heat';
import { patchSlice, type Get, type Set } from '../state';
import { nearestStep, sortTrajectories, type TrajFilter, type TrajSort } from './order';

declare module '../state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends TrajListSlice {}
}

export interface TrajListState {
  runId: string | null;
  /** The run's steps that stored trajectories. */
  steps: number[];
  step: number | null;
  /** The step's trajectories that pass the filter, in `sort` order. */
  items: TrajectorySummary[];
  filter: TrajFilter;
  sort: TrajSort;
  /** Open each newly stored step of a live run. */
  follow: boolean;
}

export interface TrajListSlice {
  trajList: TrajListState;
  trajListActions: {
    /**
     * Open a run's trajectories at `step` (the nearest stored step at or before it when that step kept
     * none; default the last), listed in `sort` order when given (a chart click: sorted by the charted quantity).
     */
    open(runId: string, step?: number, sort?: TrajSort): Promise<void>;
    setStep(step: number): Promise<void>;
    setFilter(f: Partial<TrajFilter>): Promise<void>;
    setSort(by: TrajSort): void;
    setFollow(on: boolean): Promise<void>;
    /** Open what a URL names (run, step, trajectory, channel): a reload or back/forward. */
    openFromUrl(u: { run: string; step?: number; sample?: string; channel?: Channel }): Promise<void>;
    applyEvent(e: EngineEvent): void;
  };
}

export function createTrajListSlice(api: ArborApi, set: Set, get: Get): TrajListSlice {
  const patch = (p: Partial<TrajListState>) => patchSlice(set, 'trajList', p);
  /** Load the open step's list; false when another run, step or filter was chosen meanwhile. */
  const loadList = async (): Promise<boolean> => {
    const { runId, step, filter: f, sort } = get().trajList;
    if (!runId || step == null) return false;
    const list = await api.listTrajectories({
      runId,
      step,
      minReward: f.minReward,
      maxReward: f.maxReward,
      errorsOnly: f.errorsOnly || undefined,
      task: f.task || undefined,
    });
    const sorted = sortTrajectories(list, sort);
    // A newer step (follow live) or run may have been chosen while this list was loading.
    const now = get().trajList;
    if (now.runId !== runId || now.step !== step || now.filter !== f) return false;
    patch({ items: sorted });
    return true;
  };
  /** Load the list, then open its first trajectory. */
  const loadAndOpenFirst = async () => {
    if ((await loadList()) && get().trajList.items.length) await get().trajActions.openSample(0);
  };
  const actions: TrajListSlice['trajListActions'] = {
    async open(runId, step, sort) {
      get().trajActions.close({ nav: { view: 'trajectories' }, trajList: { ...get().trajList, runId, items: [], ...(sort ? { sort } : {}) } });
      try {
        const steps = await api.trajectorySteps(runId);
        patch({ steps, step: step === undefined ? (steps.length ? steps[steps.length - 1] : null) : nearestStep(steps, step) });
        await loadAndOpenFirst();
      } catch (err) {
        get().connectionActions.reportError(`Loading trajectories of run ${runId}`, err);
      }
    },
    async setStep(step) {
      get().trajActions.close({ trajList: { ...get().trajList, step } });
      try {
        // A step the selector does not list yet (a live rollout just stored at step −1, a step stored
        // since the view opened): reload the run's steps so the selector shows the step that is open.
        const runId = get().trajList.runId;
        if (runId && !get().trajList.steps.includes(step)) {
          const steps = await api.trajectorySteps(runId);
          if (get().trajList.runId === runId) patch({ steps: steps.includes(step) ? steps : [...steps, step].sort((x, y) => x - y) });
        }
        await loadAndOpenFirst();
      } catch (err) {
        get().connectionActions.reportError(`Loading trajectories of step ${step}`, err);
      }
    },
    async setFilter(f) {
      patch({ filter: { ...get().trajList.filter, ...f } });
      try {
        await loadList();
      } catch (err) {
        get().connectionActions.reportError('Filtering trajectories', err);
      }
    },
    setSort(by) {
      patch({ sort: by, items: sortTrajectories(get().trajList.items, by) });
      get().trajActions.findInList();
    },
    async setFollow(on) {
      patch({ follow: on });
      const { runId, step } = get().trajList;
      if (on && runId) {
        const steps = await api.trajectorySteps(runId);
        patch({ steps });
        if (steps.length && steps[steps.length - 1] !== step) await actions.setStep(steps[steps.length - 1]);
      }
    },
    async openFromUrl(u) {
      const s = get().trajList;
      // A link (the Step-through result, a chart click, back/forward) always shows the view, even when
      // it is already open on that run and only the step changes.
      if (u.channel) get().trajActions.setChannel(u.channel);
      set({ nav: { view: 'trajectories' } });
      if (s.runId !== u.run || (u.step !== undefined && s.step !== u.step)) {
        if (s.runId !== u.run) await actions.open(u.run, u.step);
        else await actions.setStep(u.step!);
      }
      if (u.sample && get().traj.current?.id !== u.sample) await get().trajActions.openById(u.sample);
    },
    applyEvent(e) {
      const s = get().trajList;
      if (e.type !== 'trajectories' || e.runId !== s.runId) return;
      if (!s.steps.includes(e.step)) patch({ steps: [...s.steps, e.step].sort((a, b) => a - b) });
      if (s.follow && e.step !== s.step) void actions.setStep(e.step);
    },
  };
  return {
    trajList: { runId: null, steps: [], step: null, items: [], filter: { errorsOnly: false, task: '' }, sort: 'order', follow: false },
    trajListActions: actions,
  };
}
