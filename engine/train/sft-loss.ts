/**
 * The SFT loss as a program over the op set (so it runs in the ORT train graph and in tfjs):
 * masked next-token negative log-likelihood, averaged over model tokens.
 *
 *   loss = −Σ_t mask_t · log π(y_t | y_<t) / max(1, Σ_t mask_t)
 *
 * `logprobs` are the per-token log-probabilities of the given tokens ([batch, seq], aligned so
 * position t scores token t), `mask` is the loss mask as float (1 = model token).
 */
import type { Ops } from '../tensor/ops';

export function maskedNllLoss<T>(o: Ops<T>, logprobs: T, mask: T): { loss: T; tokens: T } {
  const tokens = o.sum(mask, [0, 1]);
  const denom = o.maximum(tokens, o.scalar(1, o.dtype(mask)));
  const loss = o.neg(o.div(o.sum(o.mul(logprobs, mask), [0, 1]), denom));
  return { loss, tokens };
}

/** Token log-probabilities from logits [batch, seq, vocab] for targets [batch, seq] (int32). */
export function tokenLogprobs<T>(o: Ops<T>, logits: T, targets: T): T {
  const lp = o.logSoftmax(logits, -1);
  return o.squeeze(o.gatherElements(lp, o.unsqueeze(targets, [2]), 2), [2]);
}
