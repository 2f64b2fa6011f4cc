import type { LossSpec } from '../../../engine/model/graphs';
import type { Ops } from '../../../engine/tensor/ops';

/** Masked NLL minus 0.1 × the mean entropy: a test loss whose entropy gradient goes through the LM head. */
export const nllEntropyLoss: LossSpec = {
  key: 'nll-ent',
  inputs: [],
  entropy: true,
  program: <T>(o: Ops<T>, t: { logprobs: T; entropy?: T; mask: T }) => {
    const n = o.sum(t.mask, [0, 1]);
    const nll = o.div(o.neg(o.sum(o.mul(t.logprobs, t.mask), [0, 1])), n);
    const ent = o.div(o.sum(o.mul(t.entropy!, t.mask), [0, 1]), n);
    return { loss: o.sub(nll, o.mul(o.scalar(0.1), ent)), entropy_mean: ent };
  },
};
