// The branch tree of the open trajectory's group (branching rollouts: ARPO, AEPO, TreeRL): every
// sample of the group, unfiltered, with the collapsed nodes and the keyboard focus (WAI-ARIA tree).
import type { ArborApi, TrajectoryView, TrajectorySummary } from '../../api/types';
import { buildBranchTree, treeMove, type TreeKey } from '../../lib/branchTree';
import { patchSlice, type Get, type Set } from '../state';

declare module '../state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends TreeSlice {}
}

export interface TreeState {
  /** Summaries of every sample of the open trajectory's group (unfiltered): the tree's input. */
  group: TrajectorySummary[];
  /** `runId:step:group` of `group`. */
  key: string | null;
  /** Ids of the collapsed nodes. */
  collapsed: string[];
  /** The node that has (or last had) keyboard focus; the open sample follows it. */
  focus: string | null;
}

export interface TreeSlice {
  tree: TreeState;
  treeActions: {
    /** A trajectory was opened: focus its node, and load its group when it is another one. */
    show(traj: TrajectoryView): Promise<void>;
    /** One key of the tree (WAI-ARIA tree pattern); the sample under focus is opened. */
    move(key: TreeKey): Promise<void>;
    toggle(id: string): void;
    /** Open the sample the open one branched from / the first branch taken from it. */
    openParent(): Promise<void>;
    openFirstBranch(): Promise<void>;
  };
}

export function createTreeSlice(api: ArborApi, set: Set, get: Get): TreeSlice {
  const patch = (p: Partial<TreeState>) => patchSlice(set, 'tree', p);
  const openNode = () => {
    const t = get().traj.current;
    return t ? buildBranchTree(get().tree.group).byId.get(t.id) : undefined;
  };
  return {
    tree: { group: [], key: null, collapsed: [], focus: null },
    treeActions: {
      async show(t) {
        patch({ focus: t.id });
        const key = `${t.runId}:${t.step}:${t.group}`;
        if (get().tree.key === key) return;
        const group = await api.groupTrajectories(t.runId, t.step, t.group);
        if (get().traj.current?.id !== t.id) return;
        patch({ group, key, collapsed: [], focus: null });
      },
      async move(key) {
        const s = get().tree;
        const open = get().traj.current;
        const tree = buildBranchTree(s.group);
        if (!tree.branched) return;
        const from = s.focus && tree.byId.has(s.focus) ? s.focus : (open?.id ?? null);
        const m = treeMove(tree, new Set(s.collapsed), from, key);
        if (m.expand) patch({ collapsed: s.collapsed.filter((x) => x !== m.expand) });
        if (m.collapse) patch({ collapsed: [...s.collapsed, m.collapse] });
        if (m.focus && m.focus !== open?.id) {
          patch({ focus: m.focus });
          await get().trajActions.openById(m.focus);
        } else if (m.focus) patch({ focus: m.focus });
      },
      toggle(id) {
        const c = get().tree.collapsed;
        patch({ collapsed: c.includes(id) ? c.filter((x) => x !== id) : [...c, id] });
      },
      async openParent() {
        const node = openNode();
        if (node?.parent) {
          patch({ focus: node.parent.id });
          await get().trajActions.openById(node.parent.id);
        }
      },
      async openFirstBranch() {
        const node = openNode();
        if (node?.children.length) {
          const c = node.children[0];
          patch({ focus: c.id, collapsed: get().tree.collapsed.filter((x) => x !== node.id) });
          await get().trajActions.openById(c.id);
        }
      },
    },
  };
}
