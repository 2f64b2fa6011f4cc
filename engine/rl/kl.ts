/**
 * The KL-estimator registry, keyed by the config's `algorithm.kl_type`: one formula per
 * estimator, written once and used twice — on host numbers (KL in the reward, engine/train/advantage.ts)
 * and as an op-set program (KL in the loss, ./policy-losses.ts). With d = log π_ref − log π
 * (Schulman's "Approximating KL divergence"; verl's kl_penalty names in brackets):
 *
 *   k1  −d                 unbiased, high variance          ("kl")
 *   k2  ½·d²               biased, low variance             ("mse")
 *   k3  e^d − d − 1        unbiased, low variance, ≥ 0      ("low_var_kl")
 */
import type { Ops } from '../tensor/ops';

export interface KlEstimator {
  /** KL_t from the log-ratio d = log π_ref − log π, written against a minimal arithmetic. */
  formula<T>(m: KlMath<T>, d: T): T;
}

/** The arithmetic a formula needs, over plain numbers or over graph tensors. */
export interface KlMath<T> {
  neg(x: T): T;
  sub(a: T, b: T): T;
  mul(a: T, b: T): T;
  exp(x: T): T;
  scalar(v: number): T;
}

const numberMath: KlMath<number> = { neg: (x) => -x, sub: (a, b) => a - b, mul: (a, b) => a * b, exp: Math.exp, scalar: (v) => v };

export const KL_ESTIMATORS = {
  k1: { formula: (m, d) => m.neg(d) },
  k2: { formula: (m, d) => m.mul(m.scalar(0.5), m.mul(d, d)) },
  k3: { formula: (m, d) => m.sub(m.sub(m.exp(d), d), m.scalar(1)) },
} as const satisfies Record<string, KlEstimator>;

export type KlType = keyof typeof KL_ESTIMATORS;

export function getKlEstimator(name: string): KlEstimator {
  const k = (KL_ESTIMATORS as Record<string, KlEstimator>)[name];
  if (!k) throw new Error(`algorithm.kl_type: unknown KL estimator "${name}"; available: ${Object.keys(KL_ESTIMATORS).join(', ')}`);
  return k;
}

/** KL_t of one token on host numbers: `logp` under the policy, `ref` under the reference. */
export function klValue(name: string, logp: number, ref: number): number {
  return getKlEstimator(name).formula(numberMath, ref - logp);
}

/** KL per token as a graph: `logprobs` and `refLogprobs` are [batch, seq] tensors. */
export function klProgram<T>(name: string, o: Ops<T>, logprobs: T, refLogprobs: T): T {
  const m: KlMath<T> = { neg: (x) => o.neg(x), sub: (a, b) => o.sub(a, b), mul: (a, b) => o.mul(a, b), exp: (x) => o.exp(x), scalar: (v) => o.scalar(v) };
  return getKlEstimator(name).formula(m, o.sub(refLogprobs, logprobs));
}
