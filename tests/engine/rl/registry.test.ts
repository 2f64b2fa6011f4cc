// engine/rl's registries are what the config accepts: every name the schema allows maps to a
// registered function, the schema's enums are exactly the registries' keys, and a name with no
// function behind it is refused by the schema with the field named. Plus the KL estimators (one
// formula, evaluated on host numbers and as a graph, hand-computed) and one AdamW step.
import { describe, expect, it } from 'vitest';
import { estimatorNames, getEstimator } from '../../../engine/rl';
import { KL_ESTIMATORS, klProgram, klValue } from '../../../engine/rl/kl';
import { AdamW } from '../../../engine/rl/optimizer';
import { policyLoss, policyLossNames } from '../../../engine/rl/policy-losses';
import { NamedRegistry } from '../../../engine/base/registry';
import { traceGraph } from '../../../engine/tensor/graph';
import { evaluate } from '../../../engine/tensor/refeval';
import { ConfigError, experimentJsonSchema, KL_TYPES, validateConfig } from '../../../engine/config/experiment';

const cfg = (algorithm: Record<string, unknown>) => validateConfig({ model: { init: 'tiny' }, algorithm });

function refusal(algorithm: Record<string, unknown>): { field: string; message: string }[] {
  try {
    cfg(algorithm);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues;
  }
  throw new Error('config was accepted');
}

describe('registries ↔ config', () => {
  const ADV_ESTIMATORS = estimatorNames();
  const CONFIG_POLICY_LOSSES = policyLossNames();
  it('the config enums are the registries’ names, the first registered the default', () => {
    const alg = (experimentJsonSchema() as { properties: { algorithm: { properties: Record<string, { enum?: string[]; default?: string }> } } }).properties
      .algorithm.properties;
    expect(alg.adv_estimator!.enum).toEqual(ADV_ESTIMATORS);
    expect(alg.policy_loss!.enum).toEqual(CONFIG_POLICY_LOSSES);
    expect(cfg({}).algorithm).toMatchObject({ adv_estimator: ADV_ESTIMATORS[0], policy_loss: CONFIG_POLICY_LOSSES[0] });
    expect([...KL_TYPES]).toEqual(Object.keys(KL_ESTIMATORS));
    expect(CONFIG_POLICY_LOSSES).toEqual(['ppo', 'gspo', 'aepo']);
    expect(ADV_ESTIMATORS).toEqual(['grpo', 'drgrpo', 'rloo', 'reinforce_pp', 'reinforce_pp_baseline', 'gae', 'gigpo']);
  });

  it('every advantage estimator name maps to a registered function', () => {
    for (const name of ADV_ESTIMATORS) {
      const c = cfg({ adv_estimator: name });
      expect(typeof getEstimator(c.algorithm.adv_estimator).compute).toBe('function');
    }
  });

  it('every policy loss name builds its own loss program', () => {
    const keys = new Set<string>();
    for (const name of CONFIG_POLICY_LOSSES) {
      const spec = policyLoss(cfg({ policy_loss: name }));
      expect(typeof spec.program).toBe('function');
      expect(spec.key.startsWith(`${name}:`)).toBe(true);
      keys.add(spec.key);
    }
    expect(keys.size).toBe(CONFIG_POLICY_LOSSES.length);
  });

  it('every KL name maps to a formula', () => {
    for (const name of KL_TYPES) expect(Number.isFinite(klValue(cfg({ kl_type: name, kl_coef: 0.01 }).algorithm.kl_type, -1, -2))).toBe(true);
  });

  it('a name with no registered function is refused by the schema, naming the field and the allowed values', () => {
    for (const [field, value] of [
      ['policy_loss', 'grpo_clip'],
      ['adv_estimator', 'gigpo2'],
      ['kl_type', 'k9'],
    ] as const) {
      const issues = refusal({ [field]: value });
      expect(issues[0]!.field).toBe(`algorithm.${field}`);
      expect(issues[0]!.message).toContain(JSON.stringify(value));
      expect(issues[0]!.message).toContain('allowed values');
    }
  });

  it('GSPO refuses dual clip (it clips the sequence ratio with its own range)', () => {
    expect(refusal({ policy_loss: 'gspo', dual_clip: 3 })[0]!.field).toBe('algorithm.dual_clip');
    expect((cfg({ policy_loss: 'gspo' }).algorithm as Record<string, unknown>).gspo).toEqual({ clip_ratio_low: 3e-4, clip_ratio_high: 4e-4 });
  });
});

describe('NamedRegistry (every registry: built-ins register as plugins do)', () => {
  const words: [string, string, string, string] = ['registerPolicyLoss', 'a policy loss', 'algorithm.policy_loss', 'policy loss'];
  it('an unknown name names the field; with nothing registered it says the built-ins were not loaded', () => {
    const r = new NamedRegistry<{ default?: boolean }>(words);
    expect(() => r.get('ppo')).toThrow(/^algorithm\.policy_loss: unknown policy loss "ppo"; none is registered in this process .*engine\/builtins\.ts/);
    r.register('a', {});
    expect(() => r.get('b')).toThrow('algorithm.policy_loss: unknown policy loss "b"; available: a');
  });
  it('the entry marked default is listed first and is the default, whatever the import order; one default only', () => {
    const r = new NamedRegistry<{ default?: boolean }>(words);
    r.register('x', {});
    r.register('y', { default: true });
    r.register('z', {});
    expect(r.names()).toEqual(['y', 'x', 'z']);
    expect(r.defaultName()).toBe('y');
    expect(() => r.register('w', { default: true })).toThrow(/"w" says it is the default, but "y" is/);
    expect(() => r.register('x', {})).toThrow(/a policy loss "x" is already registered/);
    expect(() => r.register('Bad', {})).toThrow(/not a config name/);
  });
});

describe('KL estimators (d = log π_ref − log π), hand-computed', () => {
  const logp = [-1, -2, -0.5];
  const ref = [-1.5, -1, -0.5];
  const d = [-0.5, 1, 0];
  const expected: Record<string, number[]> = {
    k1: [0.5, -1, 0],
    k2: [0.125, 0.5, 0],
    k3: [Math.exp(-0.5) + 0.5 - 1, Math.E - 2, 0],
  };
  it('on host numbers', () => {
    for (const [name, want] of Object.entries(expected)) logp.forEach((lp, i) => expect(klValue(name, lp, ref[i]!)).toBeCloseTo(want[i]!, 6));
    expect(d).toEqual(ref.map((r, i) => r - logp[i]!));
  });
  it('as a graph, the same formula', () => {
    const f = (x: number[]) => ({ dtype: 'float32' as const, shape: [1, 3], data: Float32Array.from(x) });
    for (const [name, want] of Object.entries(expected)) {
      const g = traceGraph(
        [
          { name: 'lp', dtype: 'float32', shape: ['b', 's'] },
          { name: 'ref', dtype: 'float32', shape: ['b', 's'] },
        ],
        (o, x) => ({ kl: klProgram(name, o, x.lp!, x.ref!) }),
      );
      const out = evaluate(g, { lp: f(logp), ref: f(ref) }).kl!.data;
      want.forEach((w, i) => expect(Number(out[i])).toBeCloseTo(w, 5));
    }
  });
  it('an unknown name is an error naming algorithm.kl_type', () => {
    expect(() => klValue('k9', 0, 0)).toThrow(/algorithm\.kl_type/);
  });
});

describe('AdamW (engine/rl/optimizer.ts)', () => {
  it('two steps, hand-computed, with decoupled weight decay', () => {
    const w = new Map([['w', Float32Array.from([1, -2])]]);
    const opt = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: 0.1, eps: 0 });
    // Step 1: m̂ = g, v̂ = g² → update = lr·sign(g); w ← w·(1 − lr·wd) − lr·sign(g).
    opt.step(w, new Map([['w', Float32Array.from([0.5, -4])]]), 0.01);
    expect(w.get('w')![0]).toBeCloseTo(1 * (1 - 0.001) - 0.01, 6);
    expect(w.get('w')![1]).toBeCloseTo(-2 * (1 - 0.001) + 0.01, 6);
    // Step 2 with g = (0.5, 0): m = (0.095, −0.36), v = (0.0004975, 0.015984), bias corrections 0.19, 0.001999.
    const w0 = Float32Array.from(w.get('w')!);
    opt.step(w, new Map([['w', Float32Array.from([0.5, 0])]]), 0.01);
    const m = [0.9 * 0.05 + 0.1 * 0.5, 0.9 * -0.4];
    const v = [0.999 * 0.00025 + 0.001 * 0.25, 0.999 * 0.016];
    const c1 = 1 - 0.9 ** 2;
    const c2 = 1 - 0.999 ** 2;
    m.forEach((mi, i) => expect(w.get('w')![i]).toBeCloseTo(w0[i]! * (1 - 0.001) - (0.01 * (mi / c1)) / Math.sqrt(v[i]! / c2), 6));
  });
});
