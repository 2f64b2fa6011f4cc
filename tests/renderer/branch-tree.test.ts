// The branch tree of a group from branching rollouts, built from trajectory summaries:
// nesting and order, branches of branches, missing parents and loops, the keyboard moves of
// the WAI-ARIA tree pattern, and which turns of a branch came from which ancestor.
import { describe, expect, it } from 'vitest';
import {
  buildBranchTree,
  firstOwnTurn,
  isBranchedGroup,
  treeMove,
  turnOrigins,
  visibleNodes,
  type BranchPoint,
  type BranchTree,
} from '../../renderer/src/lib/branchTree';
import type { TrajectorySummary, TurnView } from '../../renderer/src/api/types';
import { groupMetricKeys } from '../../renderer/src/lib/metricSections';

const bp = (parent: number, turn: number, tokens: number, entropy = 2, deltaH = 0.5): BranchPoint => ({
  parent,
  turn,
  tokens,
  entropy,
  deltaH,
  probability: 0.5,
});

function summary(sample: number, branch?: BranchPoint | null, reward = 0): TrajectorySummary {
  return {
    id: `t${sample}`,
    runId: 'r',
    step: 3,
    group: 1,
    sample,
    reward,
    turns: 3,
    hasError: false,
    full: true,
    outcomeData: {},
    timings: {},
    branch: branch ?? null,
  };
}

/** The tree as `sample@depth` in visible (depth-first) order. */
const outline = (tree: BranchTree, collapsed: string[] = []) => visibleNodes(tree, new Set(collapsed)).map((n) => `${n.sample}@${n.depth}`);

describe('building the branch tree', () => {
  it('nests branches under their parents, branches of branches deeper, in any input order', () => {
    const group = [summary(5, bp(1, 2, 40)), summary(3, bp(0, 4, 80)), summary(1), summary(4, bp(2, 4, 90)), summary(0), summary(2, bp(0, 2, 40))];
    const tree = buildBranchTree(group);
    expect(tree.branched).toBe(true);
    expect(tree.branches).toBe(4);
    expect(tree.sharedTokens).toBe(40 + 80 + 90 + 40);
    expect(tree.roots.map((n) => n.sample)).toEqual([0, 1]);
    expect(outline(tree)).toEqual(['0@0', '2@1', '4@2', '3@1', '1@0', '5@1']);
    const n4 = tree.byId.get('t4')!;
    expect(n4.parent!.sample).toBe(2);
    expect(n4.parent!.parent!.sample).toBe(0);
    expect(n4.detached).toBeUndefined();
  });

  it('orders the branches of one parent by branch point (tokens, then turn), then by sample', () => {
    const tree = buildBranchTree([summary(0), summary(4, bp(0, 3, 60)), summary(3, bp(0, 1, 20)), summary(2, bp(0, 3, 60)), summary(1, bp(0, 3, 50))]);
    expect(tree.roots[0].children.map((n) => n.sample)).toEqual([3, 1, 2, 4]);
  });

  it('keeps a branch whose parent is missing at the top level, saying why', () => {
    // Sample 1 (the parent of 3) was not stored; 4 hangs under 3 and stays there.
    const tree = buildBranchTree([summary(0), summary(2, bp(0, 2, 30)), summary(3, bp(1, 2, 30)), summary(4, bp(3, 4, 70))]);
    expect(outline(tree)).toEqual(['0@0', '2@1', '3@0', '4@1']);
    expect(tree.byId.get('t3')!.detached).toMatch(/parent, sample 1, is not stored/);
    expect(tree.byId.get('t3')!.parent).toBeNull();
    expect(tree.byId.get('t4')!.detached).toBeUndefined();
  });

  it('breaks parent loops and self-parents instead of losing the samples', () => {
    const loop = buildBranchTree([summary(0), summary(1, bp(2, 1, 10)), summary(2, bp(1, 1, 10)), summary(3, bp(3, 1, 10))]);
    // The loop 1 → 2 → 1 is cut at its first sample; 3 names itself.
    expect(outline(loop)).toEqual(['0@0', '1@0', '2@1', '3@0']);
    expect(loop.byId.get('t1')!.detached).toMatch(/loops back to sample 1/);
    expect(loop.byId.get('t3')!.detached).toMatch(/names itself/);
    expect(visibleNodes(loop, new Set())).toHaveLength(4);
  });

  it('attaches branches to the first (by id) of two samples with the same index and keeps both', () => {
    const dup = { ...summary(0), id: 'dup0' };
    const tree = buildBranchTree([summary(0), dup, summary(1, bp(0, 1, 10))]);
    expect(tree.byId.size).toBe(3);
    expect(tree.byId.get('t1')!.parent!.id).toBe('dup0');
    expect(tree.roots.map((n) => n.id)).toEqual(['dup0', 't0']);
  });

  it('says an unbranched group is not branched (it keeps the plain view)', () => {
    const group = [summary(0), summary(1), summary(2)];
    expect(isBranchedGroup(group)).toBe(false);
    expect(buildBranchTree(group).branched).toBe(false);
    expect(isBranchedGroup([summary(0), summary(1, bp(0, 1, 5))])).toBe(true);
    expect(buildBranchTree([]).roots).toEqual([]);
  });
});

describe('keyboard moves (WAI-ARIA tree pattern)', () => {
  const tree = buildBranchTree([
    summary(0),
    summary(1),
    summary(2, bp(0, 2, 40)),
    summary(3, bp(0, 4, 80)),
    summary(4, bp(2, 4, 90)),
    summary(5, bp(1, 2, 40)),
  ]);
  const none = new Set<string>();
  it('↑/↓ go to the previous/next visible node and stop at the ends; Home/End the first/last', () => {
    expect(treeMove(tree, none, 't0', 'down')).toEqual({ focus: 't2' });
    expect(treeMove(tree, none, 't4', 'down')).toEqual({ focus: 't3' });
    expect(treeMove(tree, none, 't3', 'down')).toEqual({ focus: 't1' });
    expect(treeMove(tree, none, 't1', 'up')).toEqual({ focus: 't3' });
    expect(treeMove(tree, none, 't0', 'up')).toEqual({});
    expect(treeMove(tree, none, 't5', 'down')).toEqual({});
    expect(treeMove(tree, none, 't4', 'home')).toEqual({ focus: 't0' });
    expect(treeMove(tree, none, 't0', 'end')).toEqual({ focus: 't5' });
  });
  it('→ goes to the first branch, or expands a collapsed node; nothing on a leaf', () => {
    expect(treeMove(tree, none, 't0', 'right')).toEqual({ focus: 't2' });
    expect(treeMove(tree, new Set(['t0']), 't0', 'right')).toEqual({ expand: 't0' });
    expect(treeMove(tree, none, 't4', 'right')).toEqual({});
  });
  it('← collapses an expanded node with branches, else goes to the parent; nothing on a collapsed root', () => {
    expect(treeMove(tree, none, 't2', 'left')).toEqual({ collapse: 't2' });
    expect(treeMove(tree, new Set(['t2']), 't2', 'left')).toEqual({ focus: 't0' });
    expect(treeMove(tree, none, 't4', 'left')).toEqual({ focus: 't2' });
    expect(treeMove(tree, new Set(['t0']), 't0', 'left')).toEqual({});
  });
  it('skips the branches of collapsed nodes, and starts at the first node from an unknown one', () => {
    expect(outline(tree, ['t2'])).toEqual(['0@0', '2@1', '3@1', '1@0', '5@1']);
    expect(treeMove(tree, new Set(['t2']), 't2', 'down')).toEqual({ focus: 't3' });
    expect(treeMove(tree, new Set(['t0']), 't0', 'down')).toEqual({ focus: 't1' });
    expect(treeMove(tree, none, 'gone', 'down')).toEqual({ focus: 't0' });
    expect(treeMove(tree, none, null, 'end')).toEqual({ focus: 't0' });
  });
});

describe('turn origins of a branch', () => {
  const turns = (...lens: number[]): TurnView[] =>
    lens.map((n, i) => ({
      role: i === 0 ? 'env' : i % 2 ? 'model' : 'tool',
      text: '',
      tokenIds: Array.from({ length: n }, (_, k) => k),
      tokens: [],
      logprob: null,
      refLogprob: null,
      entropy: null,
      advantage: null,
      value: null,
      lossMask: null,
      toolCalls: [],
      stepReward: null,
    }));
  // Sample 0 (root): prompt 10, model 5, tool 8, model 6, tool 9, model 4.
  // Sample 2 branches from 0 after 2 turns (prefix 23 tokens); sample 4 from 2 after 4 turns (prefix 23 + 7 + 6 = 36).
  const tree = buildBranchTree([summary(0), summary(2, bp(0, 2, 23)), summary(4, bp(2, 4, 36))]);

  it('a root sample owns all its turns', () => {
    expect(turnOrigins({ sample: 0, branch: null, turnsData: turns(10, 5, 8) }, tree)).toEqual([
      { shared: false, from: 0 },
      { shared: false, from: 0 },
      { shared: false, from: 0 },
    ]);
  });

  it('marks the shared prefix by tokens and the branch point on the first own turn', () => {
    const o = turnOrigins({ sample: 2, branch: bp(0, 2, 23), turnsData: turns(10, 5, 8, 7, 6, 3) }, tree);
    expect(o.map((x) => (x.shared ? `shared:${x.from}` : `own:${x.from}`))).toEqual(['shared:0', 'shared:0', 'shared:0', 'own:2', 'own:2', 'own:2']);
    expect(o[3].branchPoint).toMatchObject({ parent: 0, tokens: 23 });
    expect(o[3].splitAt).toBeUndefined();
    expect(o[4].branchPoint).toBeUndefined();
  });

  it('opens a branch at its first own turn, a root at its first turn', () => {
    expect(firstOwnTurn({ sample: 2, branch: bp(0, 3, 23), turnsData: turns(10, 5, 8, 7, 6, 3) })).toBe(3);
    expect(firstOwnTurn({ sample: 0, branch: null, turnsData: turns(10, 5, 8) })).toBe(0);
    // A branch stored with only its shared turns (it ended at the branch point) opens at its first turn.
    expect(firstOwnTurn({ sample: 2, branch: bp(0, 3, 23), turnsData: turns(10, 5, 8) })).toBe(0);
  });

  it('names the ancestor that generated each shared turn of a branch of a branch', () => {
    const o = turnOrigins({ sample: 4, branch: bp(2, 4, 36), turnsData: turns(10, 5, 8, 7, 6, 2, 3) }, tree);
    expect(o.map((x) => (x.shared ? `shared:${x.from}` : `own:${x.from}`))).toEqual([
      'shared:0',
      'shared:0',
      'shared:0',
      'shared:2',
      'shared:2',
      'own:4',
      'own:4',
    ]);
  });

  it('reports a prefix that ends inside a turn, and still names the parent when it is not in the tree', () => {
    const o = turnOrigins({ sample: 7, branch: bp(9, 1, 12), turnsData: turns(10, 5, 8) }, tree);
    expect(o[0]).toEqual({ shared: true, from: 9 });
    expect(o[1]).toMatchObject({ shared: false, from: 7, splitAt: 2 });
    expect(turnOrigins({ sample: 7, branch: bp(9, 1, 12), turnsData: turns(10, 5) }, null)[0]).toEqual({ shared: true, from: 9 });
  });
});

describe('per-step branching metrics', () => {
  it('get their own chart section in the run view', () => {
    const keys = [
      'reward/mean',
      'actor/entropy',
      'rollout/branches_per_prompt',
      'rollout/prefix_tokens_saved',
      'rollout/branch_entropy_mean',
      'rollout/branch_delta_h_mean',
    ];
    const sections = Object.fromEntries(groupMetricKeys(keys).map((g) => [g.title, g.keys]));
    expect(sections['Branching rollouts']).toEqual([
      'rollout/branch_delta_h_mean',
      'rollout/branch_entropy_mean',
      'rollout/branches_per_prompt',
      'rollout/prefix_tokens_saved',
    ]);
    expect(sections['Policy: KL, entropy, clipping, loss']).toEqual(['actor/entropy']);
  });
});
