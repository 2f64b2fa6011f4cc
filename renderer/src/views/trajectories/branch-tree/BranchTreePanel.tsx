// The branch tree of a group from branching rollouts (ARPO/AEPO): the prompt once, each root
// sample with the branches taken from it (branches of branches nested), every branch point
// marked with the entropy (and ΔH) that triggered it, every sample with its reward and
// advantage. A WAI-ARIA tree: one tab stop (roving tabindex), ↑/↓ previous/next visible node,
// →/← expand or first branch / collapse or parent, Home/End; the focused sample opens in the
// replay next to it.
import { useEffect, useMemo, useRef, type KeyboardEvent } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useArbor } from '../../../store/react';
import type { BranchTree, TreeKey } from '../../../lib/branchTree';
import { TreeNodes } from './TreeNodes';

const KEYS: Record<string, TreeKey> = { ArrowUp: 'up', ArrowDown: 'down', ArrowLeft: 'left', ArrowRight: 'right', Home: 'home', End: 'end' };

export function BranchTreePanel({ tree }: { tree: BranchTree }) {
  const traj = useArbor((s) => s.traj.current);
  const focus = useArbor((s) => s.tree.focus);
  const collapsedList = useArbor((s) => s.tree.collapsed);
  const a = useArbor(useShallow((s) => ({ move: s.treeActions.move, toggle: s.treeActions.toggle, open: s.trajActions.openById })));
  const collapsed = useMemo(() => new Set(collapsedList), [collapsedList]);
  const host = useRef<HTMLUListElement>(null);

  // The one tab stop: the focused node, or its nearest visible ancestor when it is inside a collapsed branch.
  const current = focus && tree.byId.has(focus) ? focus : (traj?.id ?? null);
  const tabStop = useMemo(() => {
    let n = current ? tree.byId.get(current) : undefined;
    if (!n) return tree.roots[0]?.id ?? null;
    let visible = n;
    for (let p = n.parent; p; p = p.parent) if (collapsed.has(p.id)) visible = p;
    n = visible;
    return n.id;
  }, [current, tree, collapsed]);

  // While the tree has keyboard focus, DOM focus follows the focused node.
  useEffect(() => {
    const el = host.current;
    if (!el || !tabStop || !el.contains(document.activeElement)) return;
    const item = el.querySelector<HTMLElement>(`[data-node-id="${CSS.escape(tabStop)}"]`);
    if (item && item !== document.activeElement) item.focus();
  }, [tabStop]);

  const onKeyDown = (e: KeyboardEvent) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const key = KEYS[e.key];
    if (key) void a.move(key);
    else if ((e.key === 'Enter' || e.key === ' ') && tabStop) void a.open(tabStop);
    else return;
    // The replay's own keys (↑/↓ samples of the list) must not act on the same press.
    e.preventDefault();
    e.stopPropagation();
  };

  const roots = tree.roots.filter((n) => !n.branch).length;
  const prompt = tree.roots[0]?.summary.prompt;
  const first = tree.roots[0]?.summary;
  return (
    <div className="panel branch-panel" data-testid="branch-tree-panel">
      <h3>Branch tree</h3>
      <div className="muted branch-summary">
        {first ? (
          <>
            step <b className="mono">{first.step}</b> · group <b className="mono">{first.group}</b> ·{' '}
          </>
        ) : null}
        {tree.byId.size} samples: {roots} root{roots === 1 ? '' : 's'}, {tree.branches} branch{tree.branches === 1 ? '' : 'es'} ·{' '}
        <span title="flattened tokens the branches share with their parents: computed once (the KV cache was forked), not per branch">
          <b className="mono">{tree.sharedTokens}</b> prefix tokens shared
        </span>
      </div>
      {prompt ? (
        <div className="branch-prompt" title={prompt} data-testid="branch-prompt">
          <span className="turn-role env">prompt</span> <span className="muted">(shared by all)</span> {prompt}
        </div>
      ) : null}
      <ul
        ref={host}
        role="tree"
        aria-label={first ? `Branch tree of group ${first.group} at step ${first.step}` : 'Branch tree'}
        className="branch-tree"
        onKeyDown={onKeyDown}
        data-testid="branch-tree"
      >
        <TreeNodes nodes={tree.roots} ctx={{ openId: traj?.id ?? null, tabStop, collapsed, onOpen: a.open, onToggle: a.toggle }} />
      </ul>
      <div className="muted branch-keys" data-testid="branch-keys">
        <span className="kbd">t</span> focus tree · <span className="kbd">↑</span>/<span className="kbd">↓</span> move · <span className="kbd">→</span> branch /
        expand · <span className="kbd">←</span> parent / collapse · <span className="kbd">Home</span>/<span className="kbd">End</span>
      </div>
    </div>
  );
}
