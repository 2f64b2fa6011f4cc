// Truncated importance sampling (algorithm.tis; engine/rl/policy-losses.ts tisWeights): each
// token's policy-gradient term is weighted by min(π_old / π_sampler, cap), detached, from the
// recomputed old logprobs and the rollout's (sampler's) own. Hand-computed on 2 sequences × 3 positions.
import { describe, expect, it } from 'vitest';
import { policyLoss, tisWeights } from '../../../engine/rl/policy-losses';
import { aepoLoss } from '../../../engine/rl/loss/aepo';
import { gspoLoss } from '../../../engine/rl/loss/gspo';
import { ppoClipLoss } from '../../../engine/rl/loss/ppo';
import { withGradients } from '../../../engine/tensor/autodiff';
import { traceGraph } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import { ConfigError, validateConfig, type ExperimentInput } from '../../../engine/config/experiment';

const cfgWith = (algorithm: Record<string, unknown>, rest: Partial<ExperimentInput> = {}) =>
  validateConfig({ model: { init: 'tiny' }, algorithm, optim: { grad_clip: 0 }, ...rest } as ExperimentInput);

// Learner's old logprobs vs the sampler's: log-ratios old − rollout.
const old = [-1, -2, -0.5, /**/ -0.7, -1.1, -2.2];
const sampler = [-1.3, -1.5, -4, /**/ -0.7, -2.5, -0.2];
const logRatioNow = [0.1, -0.1, 3, /**/ 0.05, 0.02, 3]; // log π − log π_old (inside the PPO clip range except masked tokens)
const lp = old.map((o, i) => o + logRatioNow[i]!);
const mask = [1, 1, 0, /**/ 1, 1, 0];
const adv = [1, 1, 0, /**/ -1, -1, 0];
const ent = [1, 1, 1, /**/ 1, 1, 1];
const f = (d: number[]) => ({ dtype: 'float32' as const, shape: [2, 3], data: Float32Array.from(d) });
const CAP = 2;
// By hand: w = min(exp(old − sampler), 2) per token.
const wHand = old.map((o, i) => Math.min(Math.exp(o - sampler[i]!), CAP));
// = [e^0.3 = 1.3499, e^−0.5 = 0.6065, 2 (e^3.5 capped), 1, 2 (e^1.4 = 4.06 capped), e^−2 = 0.1353]

function run(build: typeof ppoClipLoss, algorithm: Record<string, unknown>) {
  const spec = build(cfgWith(algorithm));
  const names = ['logprobs', 'entropy', 'mask', ...spec.inputs.map((i) => i.name)];
  const g = withGradients(
    traceGraph(
      names.map((name) => ({ name, dtype: 'float32' as const, shape: ['b', 's'] })),
      (o, x) => spec.program(o, x as never),
    ),
    'loss',
    ['logprobs'],
  );
  const feeds: Record<string, ReturnType<typeof f>> = { logprobs: f(lp), entropy: f(ent), mask: f(mask), advantages: f(adv), old_logprobs: f(old) };
  if (spec.inputs.some((i) => i.name === 'rollout_logprobs')) feeds.rollout_logprobs = f(sampler);
  const out = evaluate(g, feeds);
  const scalar = (k: string) => (out[k] ? Number(out[k].data[0]) : NaN);
  return {
    loss: scalar('loss'),
    w: scalar('tis_weight'),
    capped: scalar('tis_capped_fraction'),
    grad: Array.from(out['grad.logprobs']!.data, Number),
    inputs: spec.inputs,
  };
}

describe('truncated importance sampling', () => {
  it('the weights are the hand-computed capped ratios min(exp(old − rollout), cap)', () => {
    const g = traceGraph(
      [
        { name: 'old', dtype: 'float32', shape: [2, 3] },
        { name: 'rollout', dtype: 'float32', shape: [2, 3] },
      ],
      (o, x) => ({ w: tisWeights(o, x.old!, x.rollout!, CAP) }),
    );
    const w = Array.from(evaluate(g, { old: f(old), rollout: f(sampler) }).w!.data, Number);
    wHand.forEach((x, i) => expect(w[i]).toBeCloseTo(x, 6));
    expect(wHand[2]).toBe(2);
    expect(wHand[4]).toBe(2);
    expect(wHand[1]).toBeCloseTo(Math.exp(-0.5), 12);
  });

  it('PPO: the loss and each token’s gradient are the untruncated ones times w; metrics say the mean weight and the capped share', () => {
    const t = run(ppoClipLoss, { tis: { cap: CAP } });
    const p = run(ppoClipLoss, {});
    expect(t.inputs.map((i) => i.name)).toContain('rollout_logprobs');
    expect(p.inputs.map((i) => i.name)).not.toContain('rollout_logprobs');
    // Unclipped ratios: the PPO term is −A·ρ, ρ = exp(log π − log π_old); token-mean over 4 model tokens.
    const rho = logRatioNow.map(Math.exp);
    const model = [0, 1, 3, 4];
    const want = model.reduce((s, i) => s - adv[i]! * rho[i]! * wHand[i]!, 0) / 4;
    expect(t.loss).toBeCloseTo(want, 5);
    model.forEach((i) => expect(t.grad[i]).toBeCloseTo(p.grad[i]! * wHand[i]!, 6));
    expect(t.grad[2]).toBe(0);
    expect(t.w).toBeCloseTo(model.reduce((s, i) => s + wHand[i]!, 0) / 4, 6);
    expect(t.capped).toBeCloseTo(1 / 4, 6); // token 4 (masked token 2 does not count)
  });

  it('GSPO and AEPO weight their per-token terms the same way', () => {
    for (const [build, name] of [
      [gspoLoss, 'gspo'],
      [aepoLoss, 'aepo'],
    ] as const) {
      const t = run(build, { policy_loss: name, tis: { cap: CAP } });
      const p = run(build, { policy_loss: name });
      [0, 1, 3, 4].forEach((i) => expect(t.grad[i], `${name} token ${i}`).toBeCloseTo(p.grad[i]! * wHand[i]!, 6));
    }
  });

  it('a larger cap changes only the capped tokens', () => {
    const t = run(ppoClipLoss, { tis: { cap: 10 } });
    const p = run(ppoClipLoss, {});
    const w10 = old.map((o, i) => Math.min(Math.exp(o - sampler[i]!), 10));
    expect(w10[4]).toBeCloseTo(Math.exp(1.4), 6);
    [0, 1, 3, 4].forEach((i) => expect(t.grad[i]).toBeCloseTo(p.grad[i]! * w10[i]!, 6));
    expect(t.capped).toBe(0);
  });

  it('the registry builds it from the config, keyed by the cap', () => {
    expect(policyLoss(cfgWith({ tis: { cap: 2 } })).key).not.toBe(policyLoss(cfgWith({ tis: { cap: 3 } })).key);
    expect(policyLoss(cfgWith({ tis: { cap: 2 } })).key).not.toBe(policyLoss(cfgWith({})).key);
  });
});

describe('config: algorithm.tis and rollout.quantize', () => {
  const issues = (algorithm: Record<string, unknown>, rest: Partial<ExperimentInput> = {}, job?: 'train' | 'rollout') => {
    try {
      validateConfig({ model: { init: 'tiny' }, algorithm, ...rest } as ExperimentInput, { job });
      return [];
    } catch (e) {
      return (e as ConfigError).issues.map((i) => `${i.field}: ${i.message}`);
    }
  };
  it('tis with old_logprobs "rollout" is refused: nothing to correct (the old logprobs are the sampler’s)', () => {
    const got = issues({ tis: { cap: 2 }, old_logprobs: 'rollout' });
    expect(got).toHaveLength(1);
    expect(got[0]).toMatch(/^algorithm\.tis: has no effect with algorithm\.old_logprobs "rollout".*remove it/);
    expect(issues({ tis: { cap: 2 }, old_logprobs: 'recompute' })).toEqual([]);
    expect(issues({ tis: { cap: 2 } }, { rollout: { quantize: 'int8' } })).toEqual([]);
  });
  it('tis needs a positive cap; any rollout.temperature', () => {
    expect(issues({ tis: { cap: 0 } })[0]).toMatch(/^algorithm\.tis\.cap: must be positive/);
    expect(issues({ tis: {} })[0]).toMatch(/^algorithm\.tis\.cap: required/);
    expect(issues({ tis: { cap: 2 } }, { rollout: { temperature: 0.7 } })).toEqual([]);
  });
  it('rollout.quantize takes none, int8, int4; refused where nothing would sample with it', () => {
    expect(validateConfig({ model: { init: 'tiny' } }).rollout.quantize).toBe('none');
    expect(issues({}, { rollout: { quantize: 'int3' } } as never)[0]).toMatch(/^rollout\.quantize: got "int3"; allowed values: "none", "int8", "int4"/);
    expect(issues({}, { rollout: { quantize: 'int8' }, backend: 'tfjs' })[0]).toMatch(/^rollout\.quantize: has no effect with backend "tfjs"/);
    expect(issues({}, { rollout: { quantize: 'int4' }, device: 'webgpu' })[0]).toMatch(/^rollout\.quantize: has no effect with device "webgpu"/);
    expect(issues({}, { rollout: { quantize: 'int8' } }, 'rollout')[0]).toMatch(/^rollout\.quantize: has no effect in `arbor rollout`/);
    expect(issues({}, { rollout: { quantize: 'int8' } }, 'train')).toEqual([]);
  });
});
