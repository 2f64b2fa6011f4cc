/**
 * Rotary position embedding frequencies, with the `rope_scaling` types transformers implements
 * for Llama 3.x and Qwen2.5/3 (modeling_rope_utils.py): `linear`, `dynamic` (NTK), `yarn` and
 * `llama3`. Static types give fixed inverse frequencies (and, for yarn, a factor on cos/sin);
 * `dynamic` depends on the call's longest position, so it is computed inside the graph.
 */
import type { Ops } from '../tensor/ops';
import type { ModelConfig, RopeScaling } from './config';

/** Inverse frequencies θ^(-2i/d), i < d/2, before any scaling. */
function defaultInvFreq(theta: number, dim: number): number[] {
  return Array.from({ length: dim / 2 }, (_, i) => 1 / Math.pow(theta, (2 * i) / dim));
}

const num = (r: RopeScaling, k: string): number | undefined => (typeof r[k] === 'number' ? (r[k] as number) : undefined);

function llama3InvFreq(inv: number[], r: RopeScaling): number[] {
  const factor = r.factor,
    low = num(r, 'low_freq_factor')!,
    high = num(r, 'high_freq_factor')!;
  const oldCtx = num(r, 'original_max_position_embeddings')!;
  const lowWavelen = oldCtx / low,
    highWavelen = oldCtx / high;
  return inv.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < highWavelen) return f; // high frequencies: unchanged
    if (wavelen > lowWavelen) return f / factor; // low frequencies: interpolated
    const smooth = (oldCtx / wavelen - low) / (high - low);
    return (1 - smooth) * (f / factor) + smooth * f;
  });
}

function yarnGetMscale(scale: number, mscale = 1): number {
  return scale <= 1 ? 1 : 0.1 * mscale * Math.log(scale) + 1;
}

function yarn(theta: number, dim: number, maxPos: number, r: RopeScaling): { invFreq: number[]; attentionFactor: number } {
  const factor = r.factor;
  const originalMax = num(r, 'original_max_position_embeddings') ?? maxPos;
  const mscale = num(r, 'mscale'),
    mscaleAllDim = num(r, 'mscale_all_dim');
  let attentionFactor = num(r, 'attention_factor');
  if (attentionFactor === undefined) {
    attentionFactor = mscale && mscaleAllDim ? yarnGetMscale(factor, mscale) / yarnGetMscale(factor, mscaleAllDim) : yarnGetMscale(factor);
  }
  const betaFast = num(r, 'beta_fast') || 32,
    betaSlow = num(r, 'beta_slow') || 1;
  const truncate = r.truncate !== false;
  const correctionDim = (rot: number) => (dim * Math.log(originalMax / (rot * 2 * Math.PI))) / (2 * Math.log(theta));
  let low = correctionDim(betaFast),
    high = correctionDim(betaSlow);
  if (truncate) {
    low = Math.floor(low);
    high = Math.ceil(high);
  }
  low = Math.max(low, 0);
  high = Math.min(high, dim - 1);
  if (low === high) high += 0.001;
  const invFreq = Array.from({ length: dim / 2 }, (_, i) => {
    const posFreq = Math.pow(theta, (2 * i) / dim);
    const extrapolation = 1 / posFreq,
      interpolation = 1 / (factor * posFreq);
    const ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
    const extrapolationFactor = 1 - ramp;
    return interpolation * (1 - extrapolationFactor) + extrapolation * extrapolationFactor;
  });
  return { invFreq, attentionFactor };
}

/** Fixed inverse frequencies and cos/sin factor for every type except `dynamic`. */
export function staticRope(c: ModelConfig): { invFreq: number[]; attentionFactor: number } {
  const dim = c.headDim,
    r = c.ropeScaling;
  const inv = defaultInvFreq(c.ropeTheta, dim);
  if (!r) return { invFreq: inv, attentionFactor: 1 };
  switch (r.rope_type) {
    case 'linear':
      return { invFreq: inv.map((f) => f / r.factor), attentionFactor: 1 };
    case 'llama3':
      return { invFreq: llama3InvFreq(inv, r), attentionFactor: 1 };
    case 'yarn':
      return yarn(c.ropeTheta, dim, c.maxPositionEmbeddings, r);
    case 'dynamic':
      return { invFreq: inv, attentionFactor: 1 };
  }
}

/**
 * Rotary angles position × inverse frequency, [B, T, d/2], and the factor on cos/sin.
 * `dynamic`: when the call's longest sequence (max position + 1) exceeds the original context,
 * the base grows to θ·(f·L/L₀ − (f − 1))^(d/(d−2)) (as transformers' dynamic_rope_update does per
 * forward call; in KV decoding, earlier calls' keys keep their rotation, as in transformers).
 * `lengthOffset`: positions beyond the last input that count towards the length (1 when scoring).
 */
export function rotaryAngles<T>(o: Ops<T>, c: ModelConfig, positionIds: T, lengthOffset = 0): { angles: T; attentionFactor: number } {
  const half = c.headDim / 2;
  const pos = o.unsqueeze(o.cast(positionIds, 'float32'), [2]); // [B, T, 1]
  const r = c.ropeScaling;
  if (r?.rope_type === 'dynamic') {
    const dim = c.headDim,
      factor = r.factor;
    const originalMax = num(r, 'original_max_position_embeddings') ?? c.maxPositionEmbeddings;
    const seqLen = o.add(o.max(o.cast(positionIds, 'float32'), [0, 1]), o.scalar(1 + lengthOffset)); // scalar
    const ratio = o.maximum(o.sub(o.mul(seqLen, o.scalar(factor / originalMax)), o.scalar(factor - 1)), o.scalar(1));
    const logBase = o.add(o.scalar(Math.log(c.ropeTheta)), o.mul(o.log(ratio), o.scalar(dim / (dim - 2))));
    const expo = o.constant(
      Array.from({ length: half }, (_, i) => -(2 * i) / dim),
      [half],
    );
    const invFreq = o.exp(o.mul(expo, logBase)); // [half]
    return { angles: o.mul(pos, invFreq), attentionFactor: 1 };
  }
  const { invFreq, attentionFactor } = staticRope(c);
  return { angles: o.mul(pos, o.constant(invFreq, [half])), attentionFactor };
}
