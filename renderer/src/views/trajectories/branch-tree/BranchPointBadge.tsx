import type { BranchNode } from '../../../lib/branchTree';
import { heatColor } from '../../../lib/heat';

/** A signed number with a real minus sign; values that round to zero get no sign. */
export const signed = (v: number, d: number) => {
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
