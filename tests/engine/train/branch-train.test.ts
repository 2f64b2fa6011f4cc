// Training over branching rollouts: the config keys (each name maps to what the engine runs, bad
// values refused with the field named), hard advantage attribution by hand, the stored record's
// branch point, the per-step metrics, and `arbor train --steps 2` with rollout.branching.mode
// arpo and aepo on the multi-hop task storing trajectories with `branch` set.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BRANCHING_MODES } from '../../../engine/rollout/branching';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import { hardAttribution } from '../../../engine/train/advantage';
import { ConfigError, validateConfig } from '../../../engine/config/experiment';
import { branchMetrics, generatedTokenCount, type Episode } from '../../../engine/train/episode';
import { branchingOptions } from '../../../engine/train/rollout-port';
import { episodeToRecord } from '../../../engine/run/store-sink';

const cfg = (rollout: Record<string, unknown>, algorithm: Record<string, unknown> = {}) => validateConfig({ model: { init: 'tiny' }, rollout, algorithm });
function refused(rollout: Record<string, unknown>): string[] {
  try {
    cfg(rollout);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).issues.map((i) => `${i.field}: ${i.message}`);
  }
  throw new Error('accepted');
}

/** An episode of `mask` (1 = model token) with one advantage value per token. */
function ep(sample: number, mask: number[], branch?: { parent: number; tokens: number }): Episode {
  return {
    group: 0,
    sample,
    taskId: 't',
    tokens: Int32Array.from(mask.map((_, i) => i + 10)),
    lossMask: Uint8Array.from(mask),
    rolloutLogprobs: new Float32Array(mask.length),
    entropy: new Float32Array(mask.length),
    reward: 0,
    rewardComponents: {},
    exactMatch: false,
    formatOk: false,
    toolCalls: 0,
    toolErrors: 0,
    turns: 1,
    stepRewards: [],
    truncated: false,
    promptLength: 1,
    ...(branch ? { branch: { ...branch, turn: 2, entropy: 0.5, deltaH: 0.1, probability: 0.6 } } : {}),
    timings: branch ? { forkedTokens: branch.tokens - 1 } : {},
  };
}

describe('rollout.branching config', () => {
  it('every mode is accepted and maps to the engine options (ARPO defaults from the release: N = n/2, beam 2, α 0.5, β 0.2, k 20)', () => {
    expect([...BRANCHING_MODES]).toEqual(['none', 'arpo', 'aepo']);
    expect(cfg({}).rollout.branching.mode).toBe('none');
    expect(() => branchingOptions(cfg({}))).toThrow(/none/);
    expect(branchingOptions(cfg({ n: 8, branching: { mode: 'arpo' } }))).toEqual({
      mode: 'arpo',
      initialSamples: 4,
      beamSize: 2,
      alpha: 0.5,
      beta: 0.2,
      entropyWindow: 20,
      budgetBeta: 10,
      branchPenalty: 0.5,
    });
    const o = branchingOptions(
      cfg({ n: 6, branching: { mode: 'aepo', beam_size: 3, alpha: 0.3, entropy_window: 5, aepo: { budget_beta: 4, branch_penalty: 0.2 } } }),
    );
    expect(o).toMatchObject({ mode: 'aepo', beamSize: 3, alpha: 0.3, entropyWindow: 5, budgetBeta: 4, branchPenalty: 0.2 });
    expect(branchingOptions(cfg({ n: 6, branching: { mode: 'arpo', initial_samples: 2, attribution: 'hard' } })).initialSamples).toBe(2);
  });

  it('bad values are refused naming the field', () => {
    expect(refused({ branching: { mode: 'beam' } }).join('\n')).toMatch(/^rollout\.branching\.mode: .*none.*arpo.*aepo/m);
    expect(refused({ n: 4, branching: { mode: 'arpo', initial_samples: 5 } }).join('\n')).toMatch(
      /rollout\.branching\.initial_samples: must be ≤ rollout\.n = 4/,
    );
    expect(refused({ branching: { mode: 'arpo', alpha: 1.5 } }).join('\n')).toMatch(/rollout\.branching\.alpha/);
    expect(refused({ branching: { mode: 'arpo', attribution: 'mean' } }).join('\n')).toMatch(/rollout\.branching\.attribution/);
    expect(refused({ branching: { mode: 'arpo', beam_size: 0 } }).join('\n')).toMatch(/rollout\.branching\.beam_size/);
    expect(refused({ branching: { mode: 'aepo', aepo: { branch_penalty: 2 } } }).join('\n')).toMatch(/rollout\.branching\.aepo\.branch_penalty/);
    expect(refused({ branching: { mode: 'arpo', beams: 2 } }).join('\n')).toMatch(/rollout\.branching/);
    // Keys that would do nothing are refused too.
    expect(refused({ branching: { alpha: 0.7 } }).join('\n')).toMatch(/rollout\.branching\.alpha: has no effect with rollout\.branching\.mode "none"/);
    expect(refused({ branching: { mode: 'arpo', aepo: { branch_penalty: 0.1 } } }).join('\n')).toMatch(/rollout\.branching\.aepo: has no effect/);
    expect(refused({ branching: { mode: 'aepo', initial_samples: 2 } }).join('\n')).toMatch(/rollout\.branching\.initial_samples: has no effect/);
  });
});

describe('hard advantage attribution (ARPO)', () => {
  // Sample 0: prompt 1 token, model tokens 1–2, tool 3, model 4–5. Sample 1 branched from 0 after
  // the tool (tokens 0–3 shared), own model tokens 4–5. Sample 2 branched from 1 at 5 (0–4
  // shared: token 4 is sample 1's), own token 5. Advantages: 1, −1, 4 (one value per trajectory).
  const m = [0, 1, 1, 0, 1, 1];
  const eps = [ep(0, m), ep(1, m, { parent: 0, tokens: 4 }), ep(2, m, { parent: 1, tokens: 5 })];
  const adv = [1, -1, 4].map((a) => Float32Array.from(m, (x) => x * a));

  it('shared tokens get the mean over the trajectories that contain them; own tokens keep theirs', () => {
    const out = hardAttribution(eps, adv).map((a) => Array.from(a));
    const all3 = (1 - 1 + 4) / 3; // tokens 1, 2: in all three
    const s12 = (-1 + 4) / 2; // token 4 of samples 1 and 2 (generated by 1)
    const near = (xs: number[]) => xs.map((x) => expect.closeTo(x, 6));
    expect(out[0]).toEqual(near([0, all3, all3, 0, 1, 1]));
    expect(out[1]).toEqual(near([0, all3, all3, 0, s12, -1]));
    expect(out[2]).toEqual(near([0, all3, all3, 0, s12, 4]));
  });

  it('the step metrics: branches per prompt, forked prefix tokens, entropy at the branch points; generated tokens skip copies', () => {
    expect(branchMetrics(eps)).toEqual({
      'rollout/branches_per_prompt': 2,
      'rollout/prefix_tokens_saved': 3 + 4,
      'rollout/branch_entropy_mean': 0.5,
      'rollout/branch_delta_h_mean': expect.closeTo(0.1, 9),
    });
    expect(eps.map(generatedTokenCount)).toEqual([4, 2, 1]);
  });

  it('the stored record carries the branch point, its turn counted in stored turns (the prompt is stored turn 0)', () => {
    const r = episodeToRecord(1, eps[1]!, adv[1], (ids) => ids.join(' '));
    // Stored turns: [0] prompt, [1] model 1–2, [2] tool 3, [3] model 4–5: 3 shared.
    expect(r.turns.map((u) => u.role)).toEqual(['env', 'model', 'tool', 'model']);
    expect(r.branch).toEqual({ parent: 0, turn: 3, tokens: 4, entropy: 0.5, deltaH: 0.1, probability: 0.6 });
    expect(episodeToRecord(1, eps[0]!, adv[0], (ids) => ids.join(' ')).branch).toBeUndefined();
  });
});

describe('arbor train with branching rollouts on the multi-hop task', () => {
  const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
  it('arbor rollout --config applies rollout.branching (--n is the budget); a text policy is refused', () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-branch-rollout-'));
    const run = (...args: string[]) =>
      spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 120_000 });
    expect(run('init-model', '--tiny', '--task', 'multihop', join(home, 'm')).status).toBe(0);
    const file = join(home, 'r.yaml');
    writeFileSync(
      file,
      'model: { init: tiny }\ntask: { kind: multihop }\nrollout: { max_turns: 3, max_new_tokens: 8, branching: { mode: arpo, alpha: 1, beam_size: 3 } }\n',
    );
    const out = join(home, 'r.jsonl');
    const r = run('rollout', '--config', file, '--model', join(home, 'm'), '--n', '4', '--questions', '2', '--json', '--out', out);
    expect(r.status, r.stderr).toBe(0);
    const ts = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { group: number; branch?: { parent: number } });
    expect(ts).toHaveLength(8);
    expect(ts.filter((t) => t.branch).length).toBeGreaterThan(0);
    const e = run('rollout', '--config', file, '--policy', 'expert', '--n', '4', '--questions', '2', '--json');
    expect(e.status).not.toBe(0);
    expect(e.stderr).toMatch(/rollout\.branching: .*--model/);
  });

  for (const mode of ['arpo', 'aepo'] as const)
    it(`--steps 2 with rollout.branching.mode ${mode} stores trajectories with branch set and logs the branching metrics`, () => {
      const home = mkdtempSync(join(tmpdir(), 'arbor-branch-'));
      const file = join(home, 'c.yaml');
      writeFileSync(
        file,
        [
          `name: branch-${mode}`,
          'model: { init: tiny }',
          'steps: 5',
          `rollout: { prompts_per_step: 2, n: 4, max_turns: 3, max_new_tokens: 8, branching: { mode: ${mode}, alpha: 1, beam_size: 3${mode === 'arpo' ? ', attribution: hard' : ''} } }`,
          ...(mode === 'aepo' ? ['algorithm: { policy_loss: aepo }'] : []),
          'eval: { every: 0, n_questions: 2 }',
          'checkpoint: { every: 2, keep: 1 }',
          'logging: { full_trajectories_every: 1 }',
        ].join('\n'),
      );
      const r = spawnSync(process.execPath, [bin, 'train', file, '--steps', '2', '--json'], {
        encoding: 'utf8',
        env: { ...process.env, ARBOR_HOME: home },
        timeout: 240_000,
      });
      expect(r.status, r.stderr).toBe(0);
      const { run } = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string };
      const store = new Store(openDatabase(join(home, 'arbor.db')));
      const all = store.searchTrajectories({ runId: run });
      expect(all).toHaveLength(2 * 2 * 4); // exactly n per prompt, both steps
      const branched = all.filter((t) => t.branch);
      expect(branched.length).toBeGreaterThan(0);
      for (const t of branched) {
        const parent = all.find((p) => p.step === t.step && p.group === t.group && p.sample === t.branch!.parent)!;
        const mine = store.getTrajectory(t.id).turnsData;
        const theirs = store.getTrajectory(parent.id).turnsData;
        // The shared stored turns are the parent's, token for token.
        expect(mine.slice(0, t.branch!.turn).map((u) => u.tokenIds)).toEqual(theirs.slice(0, t.branch!.turn).map((u) => u.tokenIds));
        expect(mine[t.branch!.turn - 1]!.role).toBe('tool');
      }
      const keys = store.metricKeys(run);
      for (const k of ['rollout/branches_per_prompt', 'rollout/prefix_tokens_saved', 'rollout/branch_entropy_mean']) expect(keys).toContain(k);
      expect(store.metricSeries(run, 'rollout/branches_per_prompt').value.some((v) => (v ?? 0) > 0)).toBe(true);
      if (mode === 'aepo') expect(keys).toContain('actor/clip_kept_fraction');
      store.db.close();
    });
});
