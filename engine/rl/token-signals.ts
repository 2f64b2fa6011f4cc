/**
 * What a policy update applied to each token, for the replay's heat map (stored per turn next to
 * the advantages): the importance ratio, whether the clip cut the token's gradient and on which
 * side, and the token's weight in the aggregated loss (algorithm.loss_agg_mode). Host arithmetic
 * on the same inputs as the loss graph (./policy-losses.ts), so the values are the loss's own:
 *
 *  ratio    exp(log π − log π_old) per token, or, for a loss whose signals say `ratio: 'sequence'`,
 *           the sequence ratio s_i = exp(mean over the sample's model tokens of
 *           (log π − log π_old)), which every token of the sample carries.
 *  clipped  0 not clipped; +1 the upper bound cut it (A > 0, ratio > 1 + ε_high); −1 the lower
 *           bound (A < 0, ratio < 1 − ε_low); 2 the dual clip bounded it (A < 0, ratio > c). The
 *           bounds are the loss entry's own (its `signals.clip`); a loss without `signals` marks none.
 *  weight   d(loss)/d(token loss term) under the aggregation over the mini-batch: token-mean
 *           1/N tokens; seq-mean-token-mean 1/(n_i · S); seq-mean-token-sum 1/S;
 *           seq-mean-token-sum-norm 1/(L_max · S) (S sequences with model tokens). 0 off the mask.
 */
import { getPolicyLoss, lossOptions, type LossAggMode, type PolicyLossConfig } from './policy-losses';

export interface TokenSignal {
  ratio: Float32Array;
  clipped: Float32Array;
  weight: Float32Array;
}

export interface TokenSignalInput {
  mask: ArrayLike<number>;
  advantages: ArrayLike<number>;
  oldLogprobs: ArrayLike<number>;
  /** Log π at the update (null: the weights that scored oldLogprobs, so the ratio is 1). */
  logprobs: ArrayLike<number> | null;
}

/** Per-token loss weights of one mini-batch under the aggregation mode. */
export function tokenLossWeights(masks: ArrayLike<number>[], mode: LossAggMode, maxLength: number): Float32Array[] {
  const counts = masks.map((m) => {
    let c = 0;
    for (let i = 0; i < m.length; i++) c += m[i] ? 1 : 0;
    return c;
  });
  const tokens = counts.reduce((a, c) => a + c, 0);
  const seqs = Math.max(1, counts.filter((c) => c > 0).length);
  return masks.map((m, k) => {
    const w = new Float32Array(m.length);
    const per =
      mode === 'token-mean'
        ? 1 / Math.max(1, tokens)
        : mode === 'seq-mean-token-mean'
          ? 1 / (Math.max(1, counts[k]!) * seqs)
          : mode === 'seq-mean-token-sum'
            ? 1 / seqs
            : 1 / (maxLength * seqs);
    for (let i = 0; i < m.length; i++) if (m[i]) w[i] = per;
    return w;
  });
}

/** Ratio, clip side and loss weight of every token of a mini-batch's episodes. */
export function tokenSignals(eps: TokenSignalInput[], cfg: PolicyLossConfig): TokenSignal[] {
  const a = cfg.algorithm;
  const weights = tokenLossWeights(
    eps.map((e) => e.mask),
    a.loss_agg_mode,
    cfg.rollout.max_total_length,
  );
  const signals = getPolicyLoss(a.policy_loss).signals;
  const clip = signals?.clip(cfg, lossOptions(cfg));
  const perSequence = signals?.ratio === 'sequence';
  return eps.map((e, k) => {
    const n = e.mask.length;
    const ratio = new Float32Array(n);
    const clipped = new Float32Array(n);
    const logRatio = (i: number) => (e.logprobs ? e.logprobs[i]! - e.oldLogprobs[i]! : 0);
    let seq = 1;
    if (perSequence) {
      let s = 0;
      let c = 0;
      for (let i = 0; i < n; i++)
        if (e.mask[i]) {
          s += logRatio(i);
          c++;
        }
      seq = Math.exp(c ? s / c : 0);
    }
    for (let i = 0; i < n; i++) {
      if (!e.mask[i]) continue;
      const r = perSequence ? seq : Math.exp(logRatio(i));
      ratio[i] = r;
      if (clip) clipped[i] = clipSide(e.advantages[i]!, r, clip);
    }
    return { ratio, clipped, weight: weights[k]! };
  });
}

/** Which bound cut a token's gradient: +1 the upper (A > 0, ratio > 1 + high), −1 the lower (A < 0, ratio < 1 − low), 2 the dual clip (A < 0, ratio > c), 0 none. */
function clipSide(A: number, r: number, clip: { low: number; high: number; dual: number | null }): number {
  if (A > 0 && r > 1 + clip.high) return 1;
  if (A < 0 && r < 1 - clip.low) return -1;
  if (A < 0 && clip.dual !== null && r > clip.dual) return 2;
  return 0;
}
