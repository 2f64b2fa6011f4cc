// AEPO's entropy-balanced clipping (engine/rl/policy-losses.ts aepoLoss), hand-computed on two
// sequences: clipped high-entropy tokens keep the gradient −A·clip(ρ)·∇log π through the
// stop-gradient factor, clipped low-entropy tokens get none (as PPO), unclipped tokens are PPO's.
import { describe, expect, it } from 'vitest';
import { aepoLoss } from '../../../engine/rl/loss/aepo';
import { ppoClipLoss } from '../../../engine/rl/loss/ppo';
import { withGradients } from '../../../engine/tensor/autodiff';
import { traceGraph } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import { ConfigError, validateConfig } from '../../../engine/config/experiment';

const cfgWith = (algorithm: Record<string, unknown>) => validateConfig({ model: { init: 'tiny' }, algorithm, optim: { grad_clip: 0 } });

describe('AEPO entropy-balanced clipping, hand-computed (2 sequences × 3 positions, ε = 0.2 / 0.28)', () => {
  // Sequence 0 (A = +1): log-ratios 0.5, 0.5 → ρ = e^0.5 ≈ 1.649 > 1.28: both clipped; entropies 2 (high), 0.1 (low).
  // Sequence 1 (A = −1): log-ratios −0.5 → ρ ≈ 0.607 < 0.8: clipped (entropy 1.5, high); 0.1 → ρ ≈ 1.105: not clipped.
  // Position 2 of each is a tool token (mask 0) with a large log-ratio and entropy that must not count.
  const old = [-1, -2, -0.5, /**/ -0.7, -1.1, -2.2];
  const logRatio = [0.5, 0.5, 3, /**/ -0.5, 0.1, 3];
  const lp = old.map((o, i) => o + logRatio[i]!);
  const mask = [1, 1, 0, /**/ 1, 1, 0];
  const adv = [1, 1, 0, /**/ -1, -1, 0];
  const ent = [2, 0.1, 9, /**/ 1.5, 0.2, 9];
  const f = (d: number[]) => ({ dtype: 'float32' as const, shape: [2, 3], data: Float32Array.from(d) });

  function run(build: typeof aepoLoss, algorithm: Record<string, unknown> = {}) {
    const spec = build(cfgWith({ policy_loss: build === aepoLoss ? 'aepo' : 'ppo', ...algorithm }));
    const names = ['logprobs', 'entropy', 'mask', ...spec.inputs.map((i) => i.name)];
    const g = withGradients(
      traceGraph(
        names.map((name) => ({ name, dtype: 'float32' as const, shape: ['b', 's'] })),
        (o, x) => spec.program(o, x as never),
      ),
      'loss',
      ['logprobs'],
    );
    const out = evaluate(g, { logprobs: f(lp), entropy: f(ent), mask: f(mask), advantages: f(adv), old_logprobs: f(old) });
    const scalar = (k: string) => (out[k] ? Number(out[k].data[0]) : NaN);
    return {
      loss: scalar('loss'),
      clip: scalar('clip_fraction'),
      high: scalar('high_entropy_fraction'),
      kept: scalar('clip_kept_fraction'),
      grad: Array.from(out['grad.logprobs']!.data, Number),
    };
  }
  const r1 = Math.exp(0.1);

  it('the loss value equals PPO-clip’s (only gradients change)', () => {
    const a = run(aepoLoss);
    const p = run(ppoClipLoss);
    // token-mean over 4 model tokens: −1.28, −1.28, +0.8, +ρ1.
    expect(a.loss).toBeCloseTo((-1.28 - 1.28 + 0.8 + r1) / 4, 6);
    expect(a.loss).toBeCloseTo(p.loss, 6);
  });

  it('clipped high-entropy tokens keep −A·clip(ρ)·∇log π; clipped low-entropy tokens get 0; PPO drops both', () => {
    const a = run(aepoLoss);
    // Mean entropy over model tokens (2 + 0.1 + 1.5 + 0.2) / 4 = 0.95: tokens 0 of each sequence are high-entropy.
    const want = [-1.28 / 4, 0, 0, /**/ 0.8 / 4, r1 / 4, 0];
    want.forEach((w, i) => expect(a.grad[i]).toBeCloseTo(w, 6));
    expect(a.clip).toBeCloseTo(3 / 4, 6);
    expect(a.high).toBeCloseTo(2 / 4, 6);
    expect(a.kept).toBeCloseTo(2 / 4, 6);
    const p = run(ppoClipLoss);
    [0, 0, 0, 0, r1 / 4, 0].forEach((w, i) => expect(p.grad[i]).toBeCloseTo(w, 6));
  });

  it('the threshold decides which tokens are high-entropy (3 × mean: none, so PPO’s gradient)', () => {
    const a = run(aepoLoss, { aepo: { entropy_threshold: 3 } });
    [0, 0, 0, 0, r1 / 4, 0].forEach((w, i) => expect(a.grad[i]).toBeCloseTo(w, 6));
    expect(a.kept).toBe(0);
  });

  it('config: algorithm.aepo is refused unless policy_loss is aepo; dual_clip is refused with aepo', () => {
    const issues = (alg: Record<string, unknown>) => {
      try {
        cfgWith(alg);
      } catch (e) {
        return (e as ConfigError).issues.map((i) => i.field);
      }
      return [];
    };
    expect(issues({ aepo: { entropy_threshold: 2 } })).toContain('algorithm.aepo');
    expect(issues({ policy_loss: 'aepo', dual_clip: 3 })).toContain('algorithm.dual_clip');
    expect(issues({ policy_loss: 'aepo', aepo: { entropy_threshold: -1 } })).toContain('algorithm.aepo.entropy_threshold');
  });
});
