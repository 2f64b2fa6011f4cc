import { useMemo } from 'react';
import { useArbor } from '../../store/react';
import { buildBranchTree, type BranchTree } from '../../lib/branchTree';

/** The branch tree of the open trajectory's group, when its samples come from branching rollouts. */
export function useBranchTree(): BranchTree | null {
  const traj = useArbor((s) => s.traj.current);
  const treeGroup = useArbor((s) => s.tree.group);
  const treeKey = useArbor((s) => s.tree.key);
  return useMemo(() => {
    if (!traj || treeKey !== `${traj.runId}:${traj.step}:${traj.group}`) return null;
    const tree = buildBranchTree(treeGroup);
    return tree.branched ? tree : null;
  }, [traj, treeGroup, treeKey]);
}
