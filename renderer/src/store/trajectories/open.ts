// The open trajectory: which one (and where it sits in the step's list), the turn and token
// cursor on it, the top-k at the cursor, its retokenisation drift, the heat-map channel, and the
// group view (every sample of its GRPO group, loaded when shown).
import type { ArborApi, DriftReport, TopK, TrajectoryView } from '../../api/types';
import { nextChannel, type Channel } from '../../lib/heat';
import { firstOwnTurn } from '../../lib/branchTree';
import { patchSlice, type ArborState, type Get, type Set } from '../state';
import { siblingsOf, type TokenCursor } from './order';

declare module '../state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends OpenTrajSlice {}
}

export interface OpenTrajState {
  current: TrajectoryView | null;
  /** Index into trajList.items of the open trajectory (−1 when the list's filter hides it). */
  index: number;
  /** The active turn (j / k). */
  turn: number;
  /** The token cursor (h / l) and the top-k alternatives at it (loaded on demand). */
  cursor: TokenCursor | null;
  topk: { key: string; result?: TopK; error?: string } | null;
  /** Retokenisation drift of the open trajectory (null while loading or when it could not be checked). */
  drift: DriftReport | null;
  driftError: string | null;
  channel: Channel;
  /** The heat map's scale from the open trajectory's own range (largest |value|) instead of the channel's absolute one. */
  autoRange: boolean;
  groupView: boolean;
  /** The trajectories of the open one's GRPO group, loaded for the group view. */
  group: TrajectoryView[];
}

export interface OpenTrajSlice {
  traj: OpenTrajState;
  trajActions: {
    openSample(index: number): Promise<void>;
    /** Open a trajectory by id, also one the list's filter hides (the branch tree shows all, a fork links its parent). */
    openById(id: string): Promise<void>;
    /**
     * Close the open trajectory (a step or run is being opened; a load still under way is dropped).
     * `also` is set in the same update, so no subscriber sees the new list beside the old trajectory.
     */
    close(also?: Partial<ArborState>): void;
    /** Find the open trajectory again in the step's list (after it was reordered). */
    findInList(): void;
    moveTurn(delta: number): void;
    moveSample(delta: number): Promise<void>;
    /** The next / previous sample of the same prompt, at the same turn. */
    moveSibling(delta: number): Promise<void>;
    moveCursor(delta: number): void;
    setCursor(c: TokenCursor | null): void;
    loadTopK(checkpoint?: string): Promise<void>;
    cycleChannel(): void;
    setChannel(c: Channel): void;
    setAutoRange(on: boolean): void;
    setGroupView(on: boolean): Promise<void>;
  };
}

export function createOpenTrajSlice(api: ArborApi, set: Set, get: Get): OpenTrajSlice {
  const patch = (p: Partial<OpenTrajState>) => patchSlice(set, 'traj', p);
  // Opening is async: a later open makes an earlier one's answer stale.
  let openSeq = 0;
  /** Show trajectory `id` (at `index` in the list, or -1 when the filter hides it). */
  const show = async (id: string, index: number) => {
    const seq = ++openSeq;
    patch({ index });
    try {
      const traj = await api.getTrajectory(id);
      // Stale if another sample, step or list was opened meanwhile.
      if (seq !== openSeq || get().traj.index !== index) return;
      // A branch opens at its branch point (its first own turn); the shared turns are above it.
      patch({ current: traj, turn: firstOwnTurn(traj), cursor: null, topk: null, drift: null, driftError: null });
      void loadDrift(traj);
      void get().forkActions.show(traj.id);
      await get().treeActions.show(traj);
      await loadGroup();
    } catch (err) {
      get().connectionActions.reportError(`Loading trajectory ${id}`, err);
    }
  };
  const loadDrift = async (traj: TrajectoryView) => {
    try {
      const drift = await api.trajectoryDrift(traj.id);
      if (get().traj.current?.id === traj.id) patch({ drift });
    } catch (err) {
      if (get().traj.current?.id === traj.id) patch({ driftError: String((err as Error)?.message ?? err) });
    }
  };
  const loadGroup = async () => {
    const { groupView, current } = get().traj;
    if (!groupView || !current) return patch({ group: [] });
    const sibs = siblingsOf(get().trajList.items, current);
    const group = await Promise.all(sibs.map((x) => (x.id === current.id ? current : api.getTrajectory(x.id))));
    patch({ group });
  };
  const actions: OpenTrajSlice['trajActions'] = {
    async openSample(index) {
      const list = get().trajList.items;
      if (index < 0 || index >= list.length) return;
      await show(list[index].id, index);
    },
    async openById(id) {
      await show(
        id,
        get().trajList.items.findIndex((t) => t.id === id),
      );
    },
    close(also = {}) {
      openSeq++;
      set((s) => ({ ...also, traj: { ...s.traj, current: null, index: -1, turn: 0, group: [] } }));
    },
    findInList() {
      const { current } = get().traj;
      patch({ index: current ? get().trajList.items.findIndex((t) => t.id === current.id) : -1 });
    },
    moveTurn(delta) {
      const { current, turn } = get().traj;
      if (!current) return;
      patch({ turn: Math.max(0, Math.min(current.turnsData.length - 1, turn + delta)) });
    },
    async moveSample(delta) {
      const n = get().trajList.items.length;
      if (!n) return;
      const i = get().traj.index;
      await actions.openSample(Math.max(0, Math.min(n - 1, (i < 0 ? 0 : i) + delta)));
    },
    async moveSibling(delta) {
      const { current, turn } = get().traj;
      if (!current) return;
      const sibs = siblingsOf(get().trajList.items, current);
      const i = sibs.findIndex((x) => x.id === current.id);
      if (i < 0 || sibs.length < 2) return;
      const next = sibs[(i + delta + sibs.length) % sibs.length];
      await actions.openById(next.id);
      // Keep the reading position: siblings answer the same prompt, so turn k lines up.
      const t = get().traj.current;
      if (t) patch({ turn: Math.min(turn, t.turnsData.length - 1) });
    },
    moveCursor(delta) {
      const { current: t, cursor, turn } = get().traj;
      if (!t) return;
      // Flattened positions of every token; the cursor starts at the active turn.
      const flat: TokenCursor[] = [];
      t.turnsData.forEach((u, turn) => u.tokenIds.forEach((_, tok) => flat.push({ turn, tok })));
      if (!flat.length) return;
      let i = cursor ? flat.findIndex((c) => c.turn === cursor.turn && c.tok === cursor.tok) : -1;
      if (i < 0)
        i =
          Math.max(
            0,
            flat.findIndex((c) => c.turn === turn),
          ) - (delta > 0 ? 1 : 0);
      const next = flat[Math.max(0, Math.min(flat.length - 1, i + delta))]!;
      patch({ cursor: next, turn: next.turn, topk: null });
    },
    setCursor: (cursor) => patch({ cursor, topk: null, ...(cursor ? { turn: cursor.turn } : {}) }),
    async loadTopK(checkpoint) {
      const { current: t, cursor } = get().traj;
      if (!t || !cursor) return;
      const key = `${t.id}:${cursor.turn}:${cursor.tok}:${checkpoint ?? ''}`;
      patch({ topk: { key } });
      try {
        const result = await api.topK({ trajectoryId: t.id, turn: cursor.turn, token: cursor.tok, k: 8, ...(checkpoint ? { checkpoint } : {}) });
        if (get().traj.topk?.key === key) patch({ topk: { key, result } });
      } catch (err) {
        if (get().traj.topk?.key === key) patch({ topk: { key, error: (err as Error).message } });
      }
    },
    cycleChannel: () => patch({ channel: nextChannel(get().traj.channel) }),
    setChannel: (channel) => patch({ channel }),
    setAutoRange: (autoRange) => patch({ autoRange }),
    async setGroupView(on) {
      patch({ groupView: on });
      try {
        await loadGroup();
      } catch (err) {
        get().connectionActions.reportError('Loading the GRPO group', err);
      }
    },
  };
  return {
    traj: {
      current: null,
      index: -1,
      turn: 0,
      cursor: null,
      topk: null,
      drift: null,
      driftError: null,
      channel: 'logprob',
      autoRange: false,
      groupView: false,
      group: [],
    },
    trajActions: actions,
  };
}
