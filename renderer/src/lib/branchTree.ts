// The tree of a branched group (ARPO/AEPO branching rollouts): one prompt's samples at one step,
// where a branch sample names the sample it left (`branch.parent`), how many leading turns and
// flattened tokens it shares with it (stored turns, the prompt being the first, so the replay's
// "turn N" is the last shared one; tokens include the prompt), and the entropy that triggered it. Built
// from the trajectory summaries alone; the full trajectory of the open sample is only needed to
// mark which of its turns came from an ancestor.
import type { TrajectoryView, TrajectorySummary } from '../api/types';

export type BranchPoint = NonNullable<TrajectorySummary['branch']>;

export interface BranchNode {
  id: string;
  sample: number;
  summary: TrajectorySummary;
  /** Where this sample left its parent; null for root samples. */
  branch: BranchPoint | null;
  parent: BranchNode | null;
  /** Branches taken from this sample, by branch point (earliest first), then sample index. */
  children: BranchNode[];
  /** 0 for the tree's top level. */
  depth: number;
  /**
   * Why a branch sample sits at the top level although it names a parent: the parent is not in
   * the group (not stored, or a duplicate sample index), or following parents would loop.
   */
  detached?: string;
}

export interface BranchTree {
  /** Top-level nodes in sample order: root samples and detached branches. */
  roots: BranchNode[];
  byId: Map<string, BranchNode>;
  /** Whether any sample of the group has a branch point (the group is shown as a tree). */
  branched: boolean;
  /** Samples with a branch point. */
  branches: number;
  /** Flattened tokens the branches share with their parents (prefix computed once, not per branch). */
  sharedTokens: number;
}

const byBranchPoint = (a: BranchNode, b: BranchNode) =>
  (a.branch?.tokens ?? 0) - (b.branch?.tokens ?? 0) || (a.branch?.turn ?? 0) - (b.branch?.turn ?? 0) || a.sample - b.sample;

/** True when any of the summaries is a branch sample. */
export function isBranchedGroup(group: readonly TrajectorySummary[]): boolean {
  return group.some((t) => t.branch != null);
}

/**
 * Build the tree of one group's samples (the summaries of one step and group, any order).
 * A branch whose parent sample is missing, or whose parent chain loops, is kept at the top
 * level with the reason in `detached`, so no sample disappears from the view.
 */
export function buildBranchTree(group: readonly TrajectorySummary[]): BranchTree {
  const sorted = [...group].sort((a, b) => a.sample - b.sample || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const nodes: BranchNode[] = sorted.map((summary) => ({
    id: summary.id,
    sample: summary.sample,
    summary,
    branch: summary.branch ?? null,
    parent: null,
    children: [],
    depth: 0,
  }));
  const bySample = new Map<number, BranchNode>();
  for (const n of nodes) if (!bySample.has(n.sample)) bySample.set(n.sample, n);
  for (const n of nodes) {
    if (!n.branch) continue;
    const p = bySample.get(n.branch.parent);
    if (!p) n.detached = `its parent, sample ${n.branch.parent}, is not stored in this group`;
    else if (p === n) n.detached = bySample.get(n.sample) === n ? 'it names itself as its parent' : `it repeats sample index ${n.sample}`;
    else n.parent = p;
  }
  // Break loops (a → b → a): the first node, in sample order, found on a loop is detached.
  for (const n of nodes) {
    const seen = new Set<BranchNode>();
    for (let p = n.parent; p; p = p.parent) {
      if (p === n) {
        n.detached = `following its parents loops back to sample ${n.sample}`;
        n.parent = null;
        break;
      }
      if (seen.has(p)) break;
      seen.add(p);
    }
  }
  for (const n of nodes) if (n.parent) n.parent.children.push(n);
  const roots = nodes.filter((n) => !n.parent);
  const setDepth = (n: BranchNode, d: number) => {
    n.depth = d;
    n.children.sort(byBranchPoint);
    for (const c of n.children) setDepth(c, d + 1);
  };
  for (const r of roots) setDepth(r, 0);
  const branchNodes = nodes.filter((n) => n.branch);
  return {
    roots,
    byId: new Map(nodes.map((n) => [n.id, n])),
    branched: branchNodes.length > 0,
    branches: branchNodes.length,
    sharedTokens: branchNodes.reduce((a, n) => a + n.branch!.tokens, 0),
  };
}

/** The nodes a reader sees, top to bottom (depth first), skipping the children of collapsed nodes. */
export function visibleNodes(tree: BranchTree, collapsed: ReadonlySet<string>): BranchNode[] {
  const out: BranchNode[] = [];
  const walk = (n: BranchNode) => {
    out.push(n);
    if (!collapsed.has(n.id)) for (const c of n.children) walk(c);
  };
  for (const r of tree.roots) walk(r);
  return out;
}

export type TreeKey = 'up' | 'down' | 'left' | 'right' | 'home' | 'end';

/**
 * One key of the WAI-ARIA tree pattern from node `fromId`: ↑/↓ the previous/next visible node,
 * → expands a collapsed node or moves to its first branch, ← collapses an expanded node or moves
 * to its parent, Home/End the first/last visible node. Returns the node to focus and the
 * node to expand or collapse (either may be absent: nothing to do).
 */
export function treeMove(
  tree: BranchTree,
  collapsed: ReadonlySet<string>,
  fromId: string | null,
  key: TreeKey,
): { focus?: string; expand?: string; collapse?: string } {
  const vis = visibleNodes(tree, collapsed);
  if (!vis.length) return {};
  const i = fromId == null ? -1 : vis.findIndex((n) => n.id === fromId);
  if (i < 0) return { focus: vis[0].id };
  const n = vis[i];
  switch (key) {
    case 'up':
      return i > 0 ? { focus: vis[i - 1].id } : {};
    case 'down':
      return i < vis.length - 1 ? { focus: vis[i + 1].id } : {};
    case 'home':
      return { focus: vis[0].id };
    case 'end':
      return { focus: vis[vis.length - 1].id };
    case 'right':
      if (!n.children.length) return {};
      return collapsed.has(n.id) ? { expand: n.id } : { focus: n.children[0].id };
    case 'left':
      if (n.children.length && !collapsed.has(n.id)) return { collapse: n.id };
      return n.parent ? { focus: n.parent.id } : {};
  }
}

/** Where each stored turn of a trajectory came from. */
export interface TurnOrigin {
  /** The turn lies inside the prefix shared with the parent: its tokens were generated (or read) by sample `from`. */
  shared: boolean;
  /** The sample that produced the turn: this one for its own turns, else the ancestor that generated it. */
  from: number;
  /** This is the sample's first own turn: the branch point is just before it. */
  branchPoint?: BranchPoint;
  /** The shared prefix ends inside this turn, after `splitAt` of its tokens (not expected from the engine; shown as it is). */
  splitAt?: number;
}

/**
 * Mark the turns of a branch sample that it shares with its ancestors (by flattened token
 * position, so it holds however the store split the episode into turns), naming the ancestor
 * that generated each one: a branch of a branch shares the grandparent's turns before the
 * parent's own branch point. Root samples (no `branch`) get all-own origins.
 */
export function turnOrigins(traj: Pick<TrajectoryView, 'sample' | 'branch' | 'turnsData'>, tree: BranchTree | null): TurnOrigin[] {
  const own = traj.sample;
  const b = traj.branch ?? null;
  const bySample = new Map<number, BranchNode>();
  if (tree) for (const n of tree.byId.values()) if (!bySample.has(n.sample)) bySample.set(n.sample, n);
  // The sample that generated token position `end - 1` of the shared prefix: walk up while the position is inside the ancestor's own shared prefix.
  const originOf = (end: number): number => {
    let sample = b!.parent;
    const seen = new Set<number>([own]);
    for (;;) {
      const n = bySample.get(sample);
      if (!n?.branch || end > n.branch.tokens || seen.has(sample)) return sample;
      seen.add(sample);
      sample = n.branch.parent;
    }
  };
  const out: TurnOrigin[] = [];
  let start = 0;
  let pointMarked = false;
  for (const u of traj.turnsData) {
    const end = start + u.tokenIds.length;
    if (b && end <= b.tokens) out.push({ shared: true, from: originOf(end) });
    else {
      const o: TurnOrigin = { shared: false, from: own };
      if (b && !pointMarked) {
        o.branchPoint = b;
        if (start < b.tokens) o.splitAt = b.tokens - start;
        pointMarked = true;
      }
      out.push(o);
    }
    start = end;
  }
  return out;
}

/** Index of a trajectory's first own turn (just after its branch point); 0 for a root sample. */
export function firstOwnTurn(traj: Pick<TrajectoryView, 'sample' | 'branch' | 'turnsData'>): number {
  if (!traj.branch) return 0;
  const i = turnOrigins(traj, null).findIndex((o) => !o.shared);
  return i < 0 ? 0 : i;
}
