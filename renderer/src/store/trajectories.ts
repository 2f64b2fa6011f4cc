import type { ArborApi, Checkpoint, EngineEvent, Trajectory, TrajSummary } from '../api/types';
import type { DriftReport, ForkResult, Params, Result, EventData } from '../../../engine/server/protocol';
import { nextChannel, type Channel } from '../lib/heat';
import { buildBranchTree, firstOwnTurn, treeMove, type TreeKey } from '../lib/branchTree';
import type { Get, Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends TrajSlice {}
}

export interface TrajFilter {
  minReward?: number;
  maxReward?: number;
  errorsOnly: boolean;
  task: string;
}

/** How the step's list is ordered: as stored (group, sample), or by |advantage|, clipped share or KL, largest first. */
export type TrajSort = 'order' | 'abs-advantage' | 'clip-share' | 'kl';

/** A position of the keyboard token cursor: turn index and token index in it. */
export interface TokenCursor {
  turn: number;
  tok: number;
}

export interface TrajSlice {
  trajSort: TrajSort;
  setTrajSort(s: TrajSort): void;
  /** The token cursor (h / l) and the top-k alternatives at it (loaded on demand). */
  cursor: TokenCursor | null;
  moveCursor(delta: number): void;
  setCursor(c: TokenCursor | null): void;
  topk: { key: string; result?: Result<'replay.topk'>; error?: string } | null;
  loadTopK(checkpoint?: string): Promise<void>;
  /** Retokenisation drift of the open trajectory (null while loading or when it could not be checked). */
  drift: DriftReport | null;
  driftError: string | null;
  /** The stored what-if replays of the open trajectory, the last fork's answer and its progress. */
  forks: TrajSummary[];
  forkResult: ForkResult | null;
  forkProgress: EventData<'replay'> | null;
  forking: boolean;
  fork(req: Omit<Params<'replay.fork'>, 'trajectoryId'>): Promise<void>;
  /** Open what a URL names (run, step, trajectory, channel): a reload or back/forward. */
  openFromUrl(u: { run: string; step?: number; sample?: string; channel?: Channel }): Promise<void>;
  /** Every stored checkpoint (the fork panel's choices). */
  listAllCheckpoints(): Promise<Checkpoint[]>;
  trajRunId: string | null;
  steps: number[];
  step: number | null;
  trajList: TrajSummary[];
  trajFilter: TrajFilter;
  traj: Trajectory | null;
  /** index into trajList of the open trajectory */
  sampleIndex: number;
  turnIndex: number;
  channel: Channel;
  /** The heat map's scale from the open trajectory's own range (largest |value|) instead of the channel's absolute one. */
  autoRange: boolean;
  groupView: boolean;
  /** the trajectories of the open one's GRPO group, loaded for the group view */
  group: Trajectory[];
  follow: boolean;
  /** Summaries of every sample of the open trajectory's group (unfiltered): the branch tree's input. */
  treeGroup: TrajSummary[];
  /** `runId:step:group` of treeGroup. */
  treeKey: string | null;
  /** Ids of the branch tree's collapsed nodes. */
  treeCollapsed: string[];
  /** The tree node that has (or last had) keyboard focus; the open sample follows it. */
  treeFocus: string | null;
  /**
   * Open a run's trajectories at `step` (the nearest stored step at or before it when that step kept
   * none; default the last), listed in `sort` order when given (a chart click: sorted by the charted quantity).
   */
  openTrajectories(runId: string, step?: number, sort?: TrajSort): Promise<void>;
  setStep(step: number): Promise<void>;
  setTrajFilter(f: Partial<TrajFilter>): Promise<void>;
  openSample(index: number): Promise<void>;
  openTrajectoryById(id: string): Promise<void>;
  moveTurn(delta: number): void;
  moveSample(delta: number): Promise<void>;
  moveSibling(delta: number): Promise<void>;
  cycleChannel(): void;
  setChannel(c: Channel): void;
  setAutoRange(on: boolean): void;
  setGroupView(on: boolean): Promise<void>;
  setFollow(on: boolean): Promise<void>;
  applyTrajEvent(e: EngineEvent): void;
  /** One key of the branch tree (WAI-ARIA tree pattern); the sample under focus is opened. */
  moveInTree(key: TreeKey): Promise<void>;
  toggleTreeNode(id: string): void;
  /** Open the sample the open one branched from / the first branch taken from it. */
  openBranchParent(): Promise<void>;
  openFirstBranch(): Promise<void>;
}

/** The list in the chosen order (a stable sort: ties keep group, sample order). */
export function sortTrajectories(list: TrajSummary[], by: TrajSort): TrajSummary[] {
  const base = [...list].sort((a, b) => a.group - b.group || a.sample - b.sample);
  const key = (t: TrajSummary): number =>
    by === 'abs-advantage' ? Math.abs(t.advantage ?? 0) : by === 'clip-share' ? (t.clipShare ?? -1) : by === 'kl' ? Math.abs(t.klMean ?? 0) : 0;
  return by === 'order' ? base : base.sort((a, b) => key(b) - key(a));
}

/** `step` when stored, else the last stored step before it (else the first one after it); null when none is stored. */
export function nearestStep(steps: number[], step: number): number | null {
  if (steps.includes(step)) return step;
  const before = steps.filter((s) => s < step && s >= 0);
  if (before.length) return before[before.length - 1]!;
  return steps.find((s) => s > step) ?? null;
}

/** The trajectory list order that shows a charted metric's extremes first ('order' when none fits). */
export function sortForMetric(key: string): TrajSort {
  const k = key.toLowerCase();
  if (/kl/.test(k)) return 'kl';
  if (/clip/.test(k)) return 'clip-share';
  if (/advantage/.test(k)) return 'abs-advantage';
  return 'order';
}

/** The samples of the same prompt (GRPO group) as `t`, in sample order. */
export function siblingsOf(list: TrajSummary[], t: { step: number; group: number }): TrajSummary[] {
  return list.filter((x) => x.step === t.step && x.group === t.group).sort((a, b) => a.sample - b.sample);
}

export function createTrajSlice(api: ArborApi, set: Set, get: Get): TrajSlice {
  const loadList = async () => {
    const s = get();
    if (!s.trajRunId || s.step == null) return;
    const f = s.trajFilter;
    const { trajRunId: runId, step } = s;
    const list = await api.listTrajectories({
      runId: s.trajRunId,
      step: s.step,
      minReward: f.minReward,
      maxReward: f.maxReward,
      errorsOnly: f.errorsOnly || undefined,
      task: f.task || undefined,
    });
    const sorted = sortTrajectories(list, s.trajSort);
    // A newer step (follow live) or run may have been chosen while this list was loading.
    if (get().trajRunId !== runId || get().step !== step || get().trajFilter !== f) return false;
    set({ trajList: sorted });
    return true;
  };
  // Opening is async: a later open makes an earlier one's answer stale.
  let openSeq = 0;
  const loadTree = async () => {
    const s = get();
    const t = s.traj;
    if (!t) return;
    const key = `${t.runId}:${t.step}:${t.group}`;
    if (s.treeKey === key) return;
    const group = await api.groupTrajectories(t.runId, t.step, t.group);
    if (get().traj?.id !== t.id) return;
    set({ treeGroup: group, treeKey: key, treeCollapsed: [], treeFocus: null });
  };
  /** Show trajectory `id` (at `index` in trajList, or -1 when the filter hides it). */
  const show = async (id: string, index: number) => {
    const seq = ++openSeq;
    set({ sampleIndex: index });
    try {
      const traj = await api.getTrajectory(id);
      // Stale if another sample, step or list was opened meanwhile.
      if (seq !== openSeq || get().sampleIndex !== index) return;
      // A branch opens at its branch point (its first own turn); the shared turns are above it.
      set({ traj, turnIndex: firstOwnTurn(traj), treeFocus: traj.id, cursor: null, topk: null, drift: null, driftError: null, forkResult: null, forks: [] });
      void loadSide(traj);
      await loadTree();
      await loadGroup();
    } catch (err) {
      get().reportError(`Loading trajectory ${id}`, err);
    }
  };
  /** What the replay shows beside a trajectory: its drift and its stored forks. */
  const loadSide = async (traj: Trajectory) => {
    const [drift, forks] = await Promise.allSettled([api.trajectoryDrift(traj.id), api.listForks(traj.id)]);
    if (get().traj?.id !== traj.id) return;
    set({
      drift: drift.status === 'fulfilled' ? drift.value : null,
      driftError: drift.status === 'rejected' ? String((drift.reason as Error)?.message ?? drift.reason) : null,
      forks: forks.status === 'fulfilled' ? forks.value : [],
    });
  };
  const loadGroup = async () => {
    const s = get();
    if (!s.groupView || !s.traj) return set({ group: [] });
    const sibs = siblingsOf(s.trajList, s.traj);
    const group = await Promise.all(sibs.map((x) => (x.id === s.traj!.id ? s.traj! : api.getTrajectory(x.id))));
    set({ group });
  };
  return {
    trajSort: 'order',
    setTrajSort(by) {
      const s = get();
      const list = sortTrajectories(s.trajList, by);
      set({ trajSort: by, trajList: list, sampleIndex: s.traj ? list.findIndex((t) => t.id === s.traj!.id) : -1 });
    },
    cursor: null,
    moveCursor(delta) {
      const s = get();
      const t = s.traj;
      if (!t) return;
      // Flattened positions of every token; the cursor starts at the active turn.
      const flat: TokenCursor[] = [];
      t.turnsData.forEach((u, turn) => u.tokenIds.forEach((_, tok) => flat.push({ turn, tok })));
      if (!flat.length) return;
      let i = s.cursor ? flat.findIndex((c) => c.turn === s.cursor!.turn && c.tok === s.cursor!.tok) : -1;
      if (i < 0)
        i =
          Math.max(
            0,
            flat.findIndex((c) => c.turn === s.turnIndex),
          ) - (delta > 0 ? 1 : 0);
      const next = flat[Math.max(0, Math.min(flat.length - 1, i + delta))]!;
      set({ cursor: next, turnIndex: next.turn, topk: null });
    },
    setCursor: (cursor) => set({ cursor, topk: null, ...(cursor ? { turnIndex: cursor.turn } : {}) }),
    topk: null,
    async loadTopK(checkpoint) {
      const s = get();
      if (!s.traj || !s.cursor) return;
      const key = `${s.traj.id}:${s.cursor.turn}:${s.cursor.tok}:${checkpoint ?? ''}`;
      set({ topk: { key } });
      try {
        const result = await api.topK({ trajectoryId: s.traj.id, turn: s.cursor.turn, token: s.cursor.tok, k: 8, ...(checkpoint ? { checkpoint } : {}) });
        if (get().topk?.key === key) set({ topk: { key, result } });
      } catch (err) {
        if (get().topk?.key === key) set({ topk: { key, error: (err as Error).message } });
      }
    },
    drift: null,
    driftError: null,
    forks: [],
    forkResult: null,
    forkProgress: null,
    forking: false,
    async fork(req) {
      const t = get().traj;
      if (!t || get().forking) return;
      set({ forking: true, forkProgress: null, forkResult: null });
      try {
        const forkResult = await api.forkTrajectory({ ...req, trajectoryId: t.id }, (e) => set({ forkProgress: e }));
        const forks = await api.listForks(t.id);
        if (get().traj?.id === t.id) set({ forkResult, forks });
      } catch (err) {
        get().reportError(`Forking trajectory ${t.id}`, err);
      } finally {
        set({ forking: false });
      }
    },
    async openFromUrl(u) {
      const s = get();
      // A link (the Step-through result, a chart click, back/forward) always shows the view, even when
      // it is already open on that run and only the step changes.
      set({ view: 'trajectories', ...(u.channel ? { channel: u.channel } : {}) });
      if (s.trajRunId !== u.run || (u.step !== undefined && s.step !== u.step)) {
        if (s.trajRunId !== u.run) await get().openTrajectories(u.run, u.step);
        else await get().setStep(u.step!);
      }
      if (u.sample && get().traj?.id !== u.sample) await get().openTrajectoryById(u.sample);
    },
    async listAllCheckpoints() {
      try {
        return await api.listCheckpoints();
      } catch (err) {
        get().reportError('Loading checkpoints', err);
        return [];
      }
    },
    trajRunId: null,
    steps: [],
    step: null,
    trajList: [],
    trajFilter: { errorsOnly: false, task: '' },
    traj: null,
    sampleIndex: -1,
    turnIndex: 0,
    channel: 'logprob',
    groupView: false,
    group: [],
    follow: false,
    treeGroup: [],
    treeKey: null,
    treeCollapsed: [],
    treeFocus: null,
    async openTrajectories(runId, step, sort) {
      openSeq++;
      set({ view: 'trajectories', trajRunId: runId, traj: null, trajList: [], sampleIndex: -1, turnIndex: 0, group: [], ...(sort ? { trajSort: sort } : {}) });
      try {
        const steps = await api.trajectorySteps(runId);
        set({ steps, step: step === undefined ? (steps.length ? steps[steps.length - 1] : null) : nearestStep(steps, step) });
        if ((await loadList()) && get().trajList.length) await get().openSample(0);
      } catch (err) {
        get().reportError(`Loading trajectories of run ${runId}`, err);
      }
    },
    async setStep(step) {
      openSeq++;
      set({ step, traj: null, sampleIndex: -1, turnIndex: 0 });
      try {
        // A step the selector does not list yet (a live rollout just stored at step −1, a step stored
        // since the view opened): reload the run's steps so the selector shows the step that is open.
        const runId = get().trajRunId;
        if (runId && !get().steps.includes(step)) {
          const steps = await api.trajectorySteps(runId);
          if (get().trajRunId === runId) set({ steps: steps.includes(step) ? steps : [...steps, step].sort((x, y) => x - y) });
        }
        if ((await loadList()) && get().trajList.length) await get().openSample(0);
      } catch (err) {
        get().reportError(`Loading trajectories of step ${step}`, err);
      }
    },
    async setTrajFilter(f) {
      set({ trajFilter: { ...get().trajFilter, ...f } });
      try {
        await loadList();
      } catch (err) {
        get().reportError('Filtering trajectories', err);
      }
    },
    async openSample(index) {
      const list = get().trajList;
      if (index < 0 || index >= list.length) return;
      await show(list[index].id, index);
    },
    async openTrajectoryById(id) {
      // A sample of the open group that the list's filter hides (the branch tree shows all) opens too.
      await show(
        id,
        get().trajList.findIndex((t) => t.id === id),
      );
    },
    moveTurn(delta) {
      const t = get().traj;
      if (!t) return;
      const n = t.turnsData.length;
      set({ turnIndex: Math.max(0, Math.min(n - 1, get().turnIndex + delta)) });
    },
    async moveSample(delta) {
      const s = get();
      const n = s.trajList.length;
      if (!n) return;
      await s.openSample(Math.max(0, Math.min(n - 1, (s.sampleIndex < 0 ? 0 : s.sampleIndex) + delta)));
    },
    async moveSibling(delta) {
      const s = get();
      if (!s.traj) return;
      const sibs = siblingsOf(s.trajList, s.traj);
      const i = sibs.findIndex((x) => x.id === s.traj!.id);
      if (i < 0 || sibs.length < 2) return;
      const next = sibs[(i + delta + sibs.length) % sibs.length];
      const turn = s.turnIndex;
      await s.openTrajectoryById(next.id);
      // Keep the reading position: siblings answer the same prompt, so turn k lines up.
      const t = get().traj;
      if (t) set({ turnIndex: Math.min(turn, t.turnsData.length - 1) });
    },
    cycleChannel: () => set({ channel: nextChannel(get().channel) }),
    setChannel: (channel) => set({ channel }),
    autoRange: false,
    setAutoRange: (autoRange) => set({ autoRange }),
    async setGroupView(on) {
      set({ groupView: on });
      try {
        await loadGroup();
      } catch (err) {
        get().reportError('Loading the GRPO group', err);
      }
    },
    async setFollow(on) {
      set({ follow: on });
      const s = get();
      if (on && s.trajRunId) {
        const steps = await api.trajectorySteps(s.trajRunId);
        set({ steps });
        if (steps.length && steps[steps.length - 1] !== s.step) await s.setStep(steps[steps.length - 1]);
      }
    },
    applyTrajEvent(e) {
      const s = get();
      if (e.type !== 'trajectories' || e.runId !== s.trajRunId) return;
      if (!s.steps.includes(e.step)) set({ steps: [...s.steps, e.step].sort((a, b) => a - b) });
      if (s.follow && e.step !== s.step) void s.setStep(e.step);
    },
    async moveInTree(key) {
      const s = get();
      const tree = buildBranchTree(s.treeGroup);
      if (!tree.branched) return;
      const collapsed = new Set(s.treeCollapsed);
      const from = s.treeFocus && tree.byId.has(s.treeFocus) ? s.treeFocus : (s.traj?.id ?? null);
      const m = treeMove(tree, collapsed, from, key);
      if (m.expand) set({ treeCollapsed: s.treeCollapsed.filter((x) => x !== m.expand) });
      if (m.collapse) set({ treeCollapsed: [...s.treeCollapsed, m.collapse] });
      if (m.focus && m.focus !== s.traj?.id) {
        set({ treeFocus: m.focus });
        await s.openTrajectoryById(m.focus);
      } else if (m.focus) set({ treeFocus: m.focus });
    },
    toggleTreeNode(id) {
      const c = get().treeCollapsed;
      set({ treeCollapsed: c.includes(id) ? c.filter((x) => x !== id) : [...c, id] });
    },
    async openBranchParent() {
      const s = get();
      const node = s.traj && buildBranchTree(s.treeGroup).byId.get(s.traj.id);
      if (node?.parent) {
        set({ treeFocus: node.parent.id });
        await s.openTrajectoryById(node.parent.id);
      }
    },
    async openFirstBranch() {
      const s = get();
      const node = s.traj && buildBranchTree(s.treeGroup).byId.get(s.traj.id);
      if (node?.children.length) {
        const c = node.children[0];
        set({ treeFocus: c.id, treeCollapsed: s.treeCollapsed.filter((x) => x !== node.id) });
        await s.openTrajectoryById(c.id);
      }
    },
  };
}
