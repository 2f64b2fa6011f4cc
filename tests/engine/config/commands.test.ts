// One rule for configs and flags, over the README's commands (real CLI): given `--config`, a
// command honours each key it reads (a flag's default never overrides it; a flag the user gives
// does), refuses a key whose feature is switched off naming it, and refuses a bad flag naming it,
// all before anything is written.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { INERT_RULES, validateConfig } from '../../../engine/config/experiment';

const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
const home = mkdtempSync(join(tmpdir(), 'arbor-config-rule-'));
const work = mkdtempSync(join(tmpdir(), 'arbor-config-files-'));
const arbor = (...args: string[]) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, cwd: work, timeout: 240_000 });
const config = (name: string, yaml: string) => {
  const f = join(work, name);
  writeFileSync(f, yaml);
  return f;
};
const runsWritten = () => (existsSync(join(home, 'runs')) ? readdirSync(join(home, 'runs')) : []);
const refused = (c: unknown, job?: Parameters<typeof validateConfig>[1] extends infer O ? (O extends { job?: infer J } ? J : never) : never) => {
  try {
    validateConfig(c, { checkFiles: false, job });
    return '';
  } catch (e) {
    return (e as Error).message;
  }
};

describe('switched-off keys are refused, naming the key (one mechanism: INERT_RULES)', () => {
  const tiny = { model: { init: 'tiny' } };
  it.each([
    ['algorithm.gspo.clip_ratio_low', { algorithm: { gspo: { clip_ratio_low: 1e-3 } } }],
    ['algorithm.gigpo.step_weight', { algorithm: { gigpo: { step_weight: 2 } } }],
    ['algorithm.lam', { algorithm: { lam: 0.9 } }],
    ['algorithm.value_clip', { algorithm: { value_clip: 0.5 } }],
    ['algorithm.value_coef', { algorithm: { value_coef: 1 } }],
    ['algorithm.kl_type', { algorithm: { kl_type: 'k1' } }],
    ['algorithm.kl_in', { algorithm: { kl_in: 'reward' } }],
    ['optim.min_lr_ratio', { optim: { min_lr_ratio: 0.2 } }],
    ['task.hops', { task: { kind: 'tools', hops: [2] } }],
    ['task.train_seed', { task: { kind: 'custom', train_seed: 5 }, environment: { tasks: 't.jsonl' } }],
    ['task.eval_seed', { task: { kind: 'tools', eval_seed: 5 } }],
    ['task.top_k', { task: { kind: 'tools', top_k: 1 } }],
    ['task.dataset', { task: { kind: 'multihop', dataset: 'd.jsonl' } }],
    ['algorithm.tis', { algorithm: { old_logprobs: 'rollout', tis: { cap: 2 } } }],
    ['rollout.quantize', { backend: 'tfjs', rollout: { quantize: 'int8' } }],
  ])('%s', (key, c) => {
    const field = key
      .split('.')
      .slice(0, key.startsWith('algorithm.g') ? 2 : undefined)
      .join('.');
    expect(refused({ ...tiny, ...c })).toMatch(new RegExp(`${field.replace(/\./g, '\\.')}: has no effect`));
  });
  it('…and accepted where their feature is on', () => {
    for (const c of [
      { algorithm: { policy_loss: 'gspo', gspo: { clip_ratio_low: 1e-3 } } },
      { algorithm: { adv_estimator: 'gigpo', gigpo: { step_weight: 2 } } },
      { algorithm: { adv_estimator: 'gae', lam: 0.9, value_clip: 0.5, value_coef: 1 } },
      { algorithm: { kl_coef: 0.1, kl_type: 'k1', kl_in: 'reward' } },
      { optim: { schedule: 'cosine', min_lr_ratio: 0.2 } },
      { task: { kind: 'multihop', hops: [2], train_seed: 5, eval_seed: 5, top_k: 1 } },
      { algorithm: { tis: { cap: 2 } }, rollout: { quantize: 'int8' } },
    ])
      expect(refused({ ...tiny, ...c })).toBe('');
  });
  it('task.hops beyond the world (4) is refused, not silently 3', () => {
    expect(refused({ ...tiny, task: { hops: [4] } })).toMatch(/task\.hops\.0: must be ≤ 3/);
  });
  it('arbor train runs SFT only with sft.warm_start: an SFT key without it is refused', () => {
    expect(refused({ ...tiny, sft: { epochs: 5 } }, 'train')).toMatch(/sft\.epochs: has no effect with sft\.warm_start false/);
    expect(refused({ ...tiny, sft: { warm_start: true, epochs: 5 } }, 'train')).toBe('');
    expect(refused({ ...tiny, sft: { epochs: 5 } }, 'demo')).toBe('');
  });
  it('every rule names keys of the schema', () => {
    const keys = INERT_RULES.flatMap((r) => r.keys);
    for (const k of keys) expect(refused({ ...tiny, [k.split('.')[0]!]: {} }), k).not.toMatch(/unknown field/);
  });
});

describe('the README commands with --config (real CLI)', () => {
  const multihop = config(
    'multihop.yaml',
    'model: { init: tiny }\ntask: { kind: multihop }\nseed: 7\nrollout: { n: 2, temperature: 0.7, top_p: 0.9 }\neval: { n_questions: 3 }\n',
  );

  it('arbor rollout: rollout.n and seed from the config unless the flag is given', () => {
    const out = join(work, 'r1.jsonl');
    const r = arbor('rollout', '--config', multihop, '--policy', 'expert', '--questions', '2', '--out', out, '--json');
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ n: 2, seed: 7, questions: 2, trajectories: 4 });
    const g = arbor(
      'rollout',
      '--config',
      multihop,
      '--policy',
      'expert',
      '--questions',
      '2',
      '--n',
      '3',
      '--seed',
      '1',
      '--out',
      join(work, 'r2.jsonl'),
      '--json',
    );
    expect(g.status, g.stderr).toBe(0);
    expect(JSON.parse(g.stdout)).toMatchObject({ n: 3, seed: 1, trajectories: 6 });
  }, 240_000);

  it('arbor rollout: backend tfjs refused naming it; --out an existing folder refused naming --out', () => {
    const tf = arbor('rollout', '--config', config('tfjs.yaml', 'model: { init: tiny }\nbackend: tfjs\n'), '--policy', 'expert');
    expect(tf.status).not.toBe(0);
    expect(tf.stderr).toMatch(/backend: "tfjs" does not apply to `arbor rollout`/);
    mkdirSync(join(work, 'folder'), { recursive: true });
    const o = arbor('rollout', '--config', multihop, '--policy', 'expert', '--out', join(work, 'folder'));
    expect(o.status).not.toBe(0);
    expect(o.stderr).toMatch(/--out: .*folder is a folder/);
  }, 240_000);

  it('arbor init-model: model.hidden_size / layers / heads from the config; arbor eval: eval.n_questions from the config', () => {
    const sized = config('sized.yaml', 'model: { init: tiny, hidden_size: 32, layers: 1 }\ntask: { kind: multihop }\neval: { n_questions: 3 }\n');
    const headed = config('headed.yaml', 'model: { init: tiny, heads: 8 }\ntask: { kind: multihop }\n');
    const h = arbor('init-model', '--tiny', '--config', headed, join(work, 'headed'), '--json');
    expect(h.status, h.stderr).toBe(0);
    const hh = JSON.parse(readFileSync(join(work, 'headed', 'config.json'), 'utf8')) as { num_attention_heads: number; num_key_value_heads: number };
    expect([hh.num_attention_heads, hh.num_key_value_heads]).toEqual([8, 4]);
    const dir = join(work, 'tiny');
    const r = arbor('init-model', '--tiny', '--config', sized, dir, '--json');
    expect(r.status, r.stderr).toBe(0);
    const hf = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as { hidden_size: number; num_hidden_layers: number };
    expect([hf.hidden_size, hf.num_hidden_layers]).toEqual([32, 1]);
    const given = arbor('init-model', '--tiny', '--config', sized, join(work, 'tiny2'), '--layers', '2', '--json');
    expect(given.status, given.stderr).toBe(0);
    expect((JSON.parse(readFileSync(join(work, 'tiny2', 'config.json'), 'utf8')) as { num_hidden_layers: number }).num_hidden_layers).toBe(2);
    const e = arbor('eval', dir, '--config', multihop, '--json');
    expect(e.status, e.stderr).toBe(0);
    expect(JSON.parse(e.stdout)).toMatchObject({ n: 3 });
  }, 240_000);

  it('arbor train: a switched-off key refused naming it, before any run folder exists', () => {
    const demoLike = config('demo-like.yaml', 'model: { init: tiny }\nsft: { epochs: 2 }\n');
    const r = arbor('train', demoLike);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/sft\.epochs: has no effect with sft\.warm_start false/);
    const g = arbor('train', config('gspo.yaml', 'model: { init: tiny }\nalgorithm: { gspo: { clip_ratio_high: 0.01 } }\n'));
    expect(g.stderr).toMatch(/algorithm\.gspo: has no effect unless algorithm\.policy_loss is "gspo"/);
    expect(runsWritten()).toEqual([]);
  }, 240_000);

  it('arbor eval names the keys it does not read in one warning (a training config is shared)', () => {
    const training = config('training.yaml', 'model: { init: tiny }\ntask: { kind: multihop }\nsteps: 3\noptim: { lr: 0.01 }\neval: { n_questions: 2 }\n');
    const e = arbor('eval', join(work, 'tiny'), '--config', training, '--json');
    expect(e.status, e.stderr).toBe(0);
    expect(e.stderr).toMatch(/warning: .*training\.yaml: not used by this command .*: steps, optim\.lr/);
  }, 240_000);
});

describe('arbor demo --config keeps the model options in its RL phases', () => {
  it('lora and recompute_layers reach the GRPO/PPO configs; the SFT section does not', async () => {
    const { rlPhaseConfig } = await import('../../../engine/recipes/demo');
    const cfg = validateConfig(
      { model: { init: 'tiny', lora: { rank: 4 }, recompute_layers: true }, sft: { warm_start: true, epochs: 2 } },
      { checkFiles: false },
    );
    const rl = rlPhaseConfig(cfg, '/ckpt', { adv_estimator: 'gae', lam: 0.95 });
    expect(rl.model).toMatchObject({ path: '/ckpt', lora: { rank: 4 }, recompute_layers: true });
    expect(rl.sft.epochs).toBe(3);
    expect(rl.algorithm).toMatchObject({ adv_estimator: 'gae', lam: 0.95 });
  });
});

describe('bad flags and files are named, and nothing is written', () => {
  it.each([
    [['train', '--resume', 'nope', '--steps', 'abc'], /--steps must be a positive integer \(got "abc"\)/],
    [['demo', '--budget', 'abc'], /--budget must be a number ≥ 0 \(got "abc"\)/],
    [['serve', '--port', 'abc'], /--port must be an integer ≥ 0 \(got "abc"\)/],
    [['rollout', '--task', 'multihop', '--policy', 'expert', '--n', '0'], /--n must be a positive integer \(got "0"\)/],
  ])('arbor %s', (args, message) => {
    const r = arbor(...(args as string[]));
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(message);
    expect(runsWritten()).toEqual([]);
  });

  it('a corrupt run config.json is named', () => {
    const run = join(work, 'broken-run');
    mkdirSync(run, { recursive: true });
    writeFileSync(join(run, 'config.json'), '{ "model": ');
    const r = arbor('train', '--resume', run);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/cannot read its config .*broken-run\/config\.json/);
  });
});
