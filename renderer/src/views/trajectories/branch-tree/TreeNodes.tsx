// The tree's nodes: a set of siblings (TreeNodes) and one node with its branches (TreeItem), which
// nest into each other, so the two live together.
import type { BranchNode } from '../../../lib/branchTree';
import { ForkIcon } from '../turns/ForkIcon';
import { signed, BranchPointBadge } from './BranchPointBadge';

/** What every node of the tree reads: the open sample, the one tab stop, the collapsed nodes, and what a click does. */
interface TreeCtx {
  openId: string | null;
  tabStop: string | null;
  collapsed: ReadonlySet<string>;
  onOpen: (id: string) => Promise<void>;
  onToggle: (id: string) => void;
}

/** Sibling nodes (the roots, or a node's branches), each with its position in the set for ARIA. */
export function TreeNodes({ nodes, ctx }: { nodes: BranchNode[]; ctx: TreeCtx }) {
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
