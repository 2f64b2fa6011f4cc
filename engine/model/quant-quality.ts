/**
 * How far a quantized base (model.quantize_base) moves a model's next-token distributions: the
 * same weights with the float32 base and with the quantized one, compared at the last position of
 * each prompt of a fixed set (`arbor generate --json`, the parity fixtures' pinned bounds in
 * tests/engine/model/quantize-quality.test.ts). Both models decode as they sample (the quantized
 * one on the CPU with int8 activations, engine/model/quantize.ts).
 */
import type { PolicyModel } from './runtime';

/** A fixed prompt set (texts; tokenized by the model's tokenizer), the same on every call. */
export const QUALITY_PROMPTS = [
  'The capital of France is',
  'def fibonacci(n):\n    if n < 2:\n        return n\n',
  'Question: What is 17 times 3?\nAnswer:',
  'Once upon a time, in a small village by the sea, there lived',
] as const;

export interface QuantQuality {
  /** Prompts compared. */
  prompts: number;
  /** Largest |logit_q − logit_f| over the prompts' next-token logits. */
  maxAbsLogit: number;
  /** KL(p_float ‖ p_quant) of the next-token distributions (nats): mean and largest over the prompts. */
  klMean: number;
  klMax: number;
  /** Prompts whose argmax next token differs. */
  argmaxChanged: number;
}

/** KL(p ‖ q) of softmax(a) and softmax(b), in float64. */
export function klOfLogits(a: Float32Array, b: Float32Array): number {
  const lse = (x: Float32Array) => {
    let m = -Infinity;
    for (const v of x) m = Math.max(m, v);
    let z = 0;
    for (const v of x) z += Math.exp(v - m);
    return m + Math.log(z);
  };
  const la = lse(a),
    lb = lse(b);
  let kl = 0;
  for (let i = 0; i < a.length; i++) {
    const lpa = a[i]! - la;
    kl += Math.exp(lpa) * (lpa - (b[i]! - lb));
  }
  return Math.max(0, kl);
}

const argmax = (x: Float32Array) => x.reduce((best, v, i) => (v > x[best]! ? i : best), 0);

/** The quantized model's next-token logits against the float model's on each token sequence. */
export async function quantizationQuality(quantized: PolicyModel, float: PolicyModel, seqs: number[][]): Promise<QuantQuality> {
  const [q, f] = [await quantized.lastLogits(seqs), await float.lastLogits(seqs)];
  let maxAbsLogit = 0,
    klSum = 0,
    klMax = 0,
    argmaxChanged = 0;
  for (let i = 0; i < seqs.length; i++) {
    const a = f[i]!,
      b = q[i]!;
    for (let j = 0; j < a.length; j++) maxAbsLogit = Math.max(maxAbsLogit, Math.abs(a[j]! - b[j]!));
    const kl = klOfLogits(a, b);
    klSum += kl;
    klMax = Math.max(klMax, kl);
    if (argmax(a) !== argmax(b)) argmaxChanged++;
  }
  return { prompts: seqs.length, maxAbsLogit, klMean: klSum / Math.max(1, seqs.length), klMax, argmaxChanged };
}
