/**
 * Branching rollouts (ARPO, Dong et al. 2025; AEPO, its entropy-balanced successor): the
 * decision logic, kept apart from the scheduler (./engine.ts) so it can be checked by hand.
 *
 * Per prompt the budget is M = rollout.n trajectories.
 *  - ARPO: start N of them (`initialSamples`). After each tool response a sample generates its
 *    next turn; the mean entropy of that turn's first k tokens (`entropyWindow`), normalised by
 *    log |V| as the reference does, minus the same measure on the sample's first turn is ΔH.
 *    Each of the beam − 1 candidate branches is created with probability clip(α + β·ΔH, 0, 1)
 *    while the budget lasts; a branch continues from the tool response (the parent's KV cache is
 *    forked, not recomputed). Budget left when the group has no live sample is filled with fresh
 *    samples, so every prompt yields exactly M trajectories (as the reference does).
 *  - AEPO adds (1) entropy pre-monitoring: one sample is rolled out first; its first-turn
 *    entropy H_root and mean post-tool entropy H_tool split the budget into
 *    m = round(M·σ(β_b·(H_root − H_tool))) global samples (that one included; at least 1) and
 *    M − m branches; (2) a branch penalty: the probability is multiplied by (1 − λ)^l, l the
 *    number of consecutive earlier tool steps of the lineage with ΔH > 0 (high entropy).
 *
 * Determinism: decisions draw from each sample's own decision stream (not its token stream, so
 * a parent samples the same tokens whether it branches or not), and a group's decisions at tool
 * step r are taken together, in sample order, once every live sample of the group has measured
 * step r or finished: who gets the budget does not depend on tool latencies or batch order.
 */

export const BRANCHING_MODES = ['none', 'arpo', 'aepo'] as const;
export type BranchingMode = (typeof BRANCHING_MODES)[number];

export interface BranchingOptions {
  mode: Exclude<BranchingMode, 'none'>;
  /** ARPO's N: samples started per prompt (≤ M). AEPO sets it from pre-monitoring instead. */
  initialSamples: number;
  /** Beam size b: up to b − 1 branches per sample per tool step. */
  beamSize: number;
  /** Base branching probability α. */
  alpha: number;
  /** Weight β of the entropy change ΔH. */
  beta: number;
  /** k: tokens of a turn whose mean entropy is measured. */
  entropyWindow: number;
  /** AEPO: β_b of the pre-monitoring split m = M·σ(β_b·(H_root − H_tool)). */
  budgetBeta: number;
  /** AEPO: λ of the consecutive high-entropy branch penalty (1 − λ)^l. */
  branchPenalty: number;
}

/** Mean entropy of the first k tokens (all of them if fewer), divided by log |V| (0 for none). */
export function windowEntropy(entropy: ArrayLike<number>, k: number, vocabSize: number): number {
  const n = Math.min(k, entropy.length);
  if (n === 0) return 0;
  let s = 0;
  for (let i = 0; i < n; i++) s += entropy[i]!;
  return s / n / Math.log(Math.max(2, vocabSize));
}

/** The probability each candidate branch is taken with: clip(α + β·ΔH, 0, 1), times AEPO's penalty (1 − λ)^l. */
export function branchProbability(o: Pick<BranchingOptions, 'mode' | 'alpha' | 'beta' | 'branchPenalty'>, deltaH: number, consecutive: number): number {
  const p = Math.min(1, Math.max(0, o.alpha + o.beta * deltaH));
  return o.mode === 'aepo' ? p * Math.pow(1 - o.branchPenalty, consecutive) : p;
}

/** AEPO's global samples m = round(M·σ(β_b·(H_root − H_tool))), in [1, M]. */
export function aepoGlobalSamples(M: number, budgetBeta: number, hRoot: number, hTool: number): number {
  const sig = 1 / (1 + Math.exp(-budgetBeta * (hRoot - hTool)));
  return Math.min(M, Math.max(1, Math.round(M * sig)));
}

export interface BranchCandidate {
  /** ΔH of the sample at this tool step. */
  deltaH: number;
  /** AEPO: consecutive earlier high-entropy tool steps of the lineage. */
  consecutive: number;
  /** The sample's decision stream. */
  rng: { next(): number };
}

export interface BranchDecision {
  /** Branches created from this candidate. */
  children: number;
  probability: number;
  /** The lineage's consecutive high-entropy count after this step (children inherit it). */
  consecutive: number;
}

/**
 * One group's decisions at one tool step, candidates in sample order. Every candidate draws
 * beam − 1 uniforms whatever the budget (so its stream does not depend on the others); a draw
 * below the probability creates a branch while `budget` lasts.
 */
export function decideBranches(
  o: Pick<BranchingOptions, 'mode' | 'alpha' | 'beta' | 'branchPenalty' | 'beamSize'>,
  cands: BranchCandidate[],
  budget: number,
): BranchDecision[] {
  let left = budget;
  return cands.map((c) => {
    const probability = branchProbability(o, c.deltaH, c.consecutive);
    let children = 0;
    for (let j = 0; j < o.beamSize - 1; j++) {
      const u = c.rng.next();
      if (u < probability && left > 0) {
        children++;
        left--;
      }
    }
    return { children, probability, consecutive: c.deltaH > 0 ? c.consecutive + 1 : 0 };
  });
}

/** Checks of the options against the budget M (rollout.n), naming the field. */
export function validateBranching(o: BranchingOptions, M: number, field = 'rollout.branching'): void {
  const bad = (f: string, v: unknown, want: string) => new Error(`${field}.${f} must be ${want} (got ${String(v)})`);
  if (!Number.isInteger(o.initialSamples) || o.initialSamples < 1 || o.initialSamples > M)
    throw bad('initial_samples', o.initialSamples, `an integer in [1, rollout.n = ${M}]`);
  if (!Number.isInteger(o.beamSize) || o.beamSize < 1) throw bad('beam_size', o.beamSize, 'an integer ≥ 1');
  if (!Number.isInteger(o.entropyWindow) || o.entropyWindow < 1) throw bad('entropy_window', o.entropyWindow, 'an integer ≥ 1');
  if (!(o.branchPenalty >= 0 && o.branchPenalty <= 1)) throw bad('aepo.branch_penalty', o.branchPenalty, 'in [0, 1]');
  for (const [f, v] of [
    ['alpha', o.alpha],
    ['beta', o.beta],
    ['aepo.budget_beta', o.budgetBeta],
  ] as const)
    if (!Number.isFinite(v)) throw bad(f, v, 'a finite number');
}
