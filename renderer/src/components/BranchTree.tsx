// The branch tree of a group from branching rollouts (ARPO/AEPO): the prompt once, each root
// sample with the branches taken from it (branches of branches nested), every branch point
// marked with the entropy (and ΔH) that triggered it, every sample with its reward and
// advantage. A WAI-ARIA tree: one tab stop (roving tabindex), ↑/↓ previous/next visible node,
// →/← expand or first branch / collapse or parent, Home/End; the focused sample opens in the
// replay next to it.
import { useEffect, useMemo, useRef, type KeyboardEvent } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useArbor } from '../store/react';
import type { BranchNode, BranchTree, TreeKey } from '../lib/branchTree';
import { heatColor } from '../lib/heat';
import { ForkIcon } from './Turns';

const KEYS: Record<string, TreeKey> = { ArrowUp: 'up', ArrowDown: 'down', ArrowLeft: 'left', ArrowRight: 'right', Home: 'home', End: 'end' };

/** A signed number with a real minus sign; values that round to zero get no sign. */
const signed = (v: number, d: number) => {
  const m = Math.abs(v).toFixed(d);
  return (Number(m) === 0 ? '' : v > 0 ? '+' : '−') + m;
};

/**
 * Entropy and ΔH of a branch point. The engine measures them as the mean entropy of the first k
 * tokens after the tool response divided by log |V| (ARPO's reference does), so 1 is a uniform
 * distribution: the tint runs from none at 0 to full amber at 1.
 */
export function BranchPointBadge({ branch }: { branch: NonNullable<BranchNode['branch']> }) {
  return (
    <span
      className="branch-badge"
      style={{ background: heatColor('entropy', branch.entropy, 1) || undefined }}
      title={`branched with probability ${branch.probability.toFixed(3)} (α + β·ΔH): entropy ${branch.entropy.toFixed(4)} after the tool response (mean of the first k tokens ÷ log |V|), ΔH ${signed(branch.deltaH, 4)} over the sample's first turn`}
      data-testid="branch-entropy"
    >
      H {branch.entropy.toFixed(3)} · ΔH {signed(branch.deltaH, 3)}
    </span>
  );
}

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

/** What every node of the tree reads: the open sample, the one tab stop, the collapsed nodes, and what a click does. */
interface TreeCtx {
  openId: string | null;
  tabStop: string | null;
  collapsed: ReadonlySet<string>;
  onOpen: (id: string) => Promise<void>;
  onToggle: (id: string) => void;
}

/** Sibling nodes (the roots, or a node's branches), each with its position in the set for ARIA. */
function TreeNodes({ nodes, ctx }: { nodes: BranchNode[]; ctx: TreeCtx }) {
  return (
    <>
      {nodes.map((n, i) => (
        <TreeItem key={n.id} node={n} pos={i + 1} size={nodes.length} ctx={ctx} />
      ))}
    </>
  );
}

function TreeItem({ node, pos, size, ctx }: { node: BranchNode; pos: number; size: number; ctx: TreeCtx }) {
  const { openId, tabStop, collapsed, onOpen, onToggle } = ctx;
  const t = node.summary;
  const open = !collapsed.has(node.id);
  const hasKids = node.children.length > 0;
  const b = node.branch;
  const adv = t.advantage;
  return (
    <li
      role="treeitem"
      aria-level={node.depth + 1}
      aria-setsize={size}
      aria-posinset={pos}
      aria-selected={node.id === openId}
      aria-expanded={hasKids ? open : undefined}
      aria-label={`sample ${node.sample}${b ? `, branched from sample ${b.parent} after turn ${b.turn}, entropy ${b.entropy.toFixed(3)}` : ', root'}, reward ${t.reward.toFixed(3)}${adv != null ? `, advantage ${adv.toFixed(3)}` : ''}`}
      tabIndex={node.id === tabStop ? 0 : -1}
      data-node-id={node.id}
      data-sample={node.sample}
      data-testid="branch-node"
      className="branch-item"
    >
      <div
        className={`branch-row ${node.id === openId ? 'sel' : ''}`}
        onClick={(e) => {
          (e.currentTarget.parentElement as HTMLElement).focus();
          void onOpen(node.id);
        }}
      >
        <span
          className="branch-caret"
          onClick={(e) => {
            if (!hasKids) return;
            e.stopPropagation();
            onToggle(node.id);
          }}
          aria-hidden
        >
          {hasKids ? (open ? '▾' : '▸') : ''}
        </span>
        <span className={b ? 'branch-mark fork' : 'branch-mark root'} aria-hidden>
          {b ? <ForkIcon /> : '●'}
        </span>
        <span className="branch-label">
          <span className="branch-line">
            <b>sample {node.sample}</b> {b ? null : <span className="muted">root</span>}
            {node.detached ? (
              <span className="branch-warn" title={`shown at the top level: ${node.detached}`}>
                {' '}
                ⚠ parent {b?.parent} missing
              </span>
            ) : null}
          </span>
          {b ? (
            <span className="branch-line sub">
              <span className="muted" title={`shares its first ${b.turn} turns, the prompt included (${b.tokens} tokens), with sample ${b.parent}`}>
                after turn {b.turn}
              </span>
              <BranchPointBadge branch={b} />
            </span>
          ) : null}
        </span>
        <span className="mono branch-num" style={{ color: t.reward > 0 ? 'var(--ok)' : undefined }} title="reward" data-testid="branch-reward">
          {t.reward.toFixed(3)}
        </span>
        <span
          className="mono branch-num"
          style={{ color: adv == null ? undefined : adv >= 0 ? 'var(--ok)' : 'var(--err)' }}
          title="advantage (mean over the sample's generated tokens)"
        >
          {adv == null ? '—' : signed(adv, 2)}
        </span>
      </div>
      {hasKids && open ? (
        <ul role="group">
          <TreeNodes nodes={node.children} ctx={ctx} />
        </ul>
      ) : null}
    </li>
  );
}
