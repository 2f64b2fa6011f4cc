/**
 * The critic's loss as an op-set program (runs in the ORT train graph): PPO value clipping as
 * verl's compute_value_loss — v_clipped = old_v + clip(v − old_v, −c, c),
 * L = ½·max((v − R)², (v_clipped − R)²), token-mean over model tokens.
 */
import type { Ops } from '../tensor/ops';

export function clippedValueLoss<T>(o: Ops<T>, x: { values: T; returns: T; old_values: T; mask: T }, clip: number): { loss: T; value_clip_fraction: T } {
  const s = (v: number) => o.scalar(v);
  const delta = o.minimum(o.maximum(o.sub(x.values, x.old_values), s(-clip)), s(clip));
  const clipped = o.add(x.old_values, delta);
  const e1 = o.sub(x.values, x.returns);
  const e2 = o.sub(clipped, x.returns);
  const l1 = o.mul(e1, e1);
  const l2 = o.mul(e2, e2);
  const per = o.mul(o.maximum(l1, l2), s(0.5));
  const tokens = o.maximum(o.sum(x.mask, [0, 1]), s(1));
  const tmean = (v: T) => o.div(o.sum(o.mul(v, x.mask), [0, 1]), tokens);
  return { loss: tmean(per), value_clip_fraction: tmean(o.cast(o.greater(l2, l1), 'float32')) };
}
