/**
 * One LoRA training step on synthetic tokens, for benchmarks (bench:model's "LoRA step, batch
 * 4 × 512"): masked next-token loss on the adapters' train graph, gradients for the adapters only,
 * then the caller's optimizer step on them. The same code path as a training run's update
 * (PolicyModel.trainStep with the default trainable set), minus the loop around it.
 */
import type { Ops } from '../tensor/ops';
import type { Weights } from './checkpoint';
import { packSequences, type LossSpec, type PackedBatch } from './graphs';
import type { PolicyModel } from './runtime';

/** Mean NLL over the loss mask. */
export const nllLoss: LossSpec = {
  key: 'bench-nll',
  inputs: [],
  program: <T>(o: Ops<T>, t: { logprobs: T; mask: T }) => ({
    loss: o.div(o.neg(o.sum(o.mul(t.logprobs, t.mask), [0, 1])), o.maximum(o.sum(t.mask, [0, 1]), o.scalar(1))),
  }),
};

/** `batch` sequences of `length` + 1 seeded random token ids below `vocab` (so the packed batch is [batch, length]). */
export function randomTokenBatch(vocab: number, batch: number, length: number, seed = 1): PackedBatch {
  let s = seed >>> 0;
  const next = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
  return packSequences(
    Array.from({ length: batch }, () => Array.from({ length: length + 1 }, () => Math.floor(next() * vocab))),
    0,
  );
}

export interface LoraStepTiming {
  loss: number;
  /** Forward + backward (the train graph), seconds. */
  gradSeconds: number;
  /** The optimizer step on the adapters, seconds. */
  optimizerSeconds: number;
  /** Trainable parameters (adapter values). */
  trainable: number;
}

/** One step: gradients of `nllLoss` for the model's trainable tensors (the adapters under LoRA), then `optimizer.step`. */
export async function loraTrainStep(
  model: PolicyModel,
  batch: PackedBatch,
  optimizer: { step(weights: Weights, grads: Weights, lr: number): void },
  lr = 1e-4,
): Promise<LoraStepTiming> {
  if (!model.lora) throw new Error('loraTrainStep: the model has no LoRA adapters (PolicyModel option lora)');
  const t0 = performance.now();
  const r = await model.trainStep(batch, nllLoss, batch.valid);
  const t1 = performance.now();
  optimizer.step(model.weights, r.grads, lr);
  model.markWeightsUpdated();
  const t2 = performance.now();
  let trainable = 0;
  for (const g of r.grads.values()) trainable += g.length;
  return { loss: r.loss, gradSeconds: (t1 - t0) / 1000, optimizerSeconds: (t2 - t1) / 1000, trainable };
}
