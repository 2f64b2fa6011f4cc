// `arbor demo --algorithms arpo,aepo` at a tiny scale: both run from the shared SFT checkpoint to
// the same generated-token budget (a branch's copy of its parent's prefix is not counted) and take
// branches (counted from the branching metrics every step records); AEPO trains with
// entropy-balanced clipping.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ABLATION_ALGORITHMS, parseAlgorithms, runAblation } from '../../../engine/recipes/ablation';
import { readMetricsJsonl } from '../../../engine/run/sinks';
import { openTaskSession } from '../../../engine/run/open';

const FIXTURE = join(__dirname, '..', 'model', 'fixtures', 'multihop-tiny-sft');
const prevHome = process.env.ARBOR_HOME;
afterEach(() => {
  if (prevHome === undefined) delete process.env.ARBOR_HOME;
  else process.env.ARBOR_HOME = prevHome;
});

describe('arbor demo --algorithms arpo,aepo', () => {
  it('names arpo and aepo, with branching rollouts and AEPO’s loss', () => {
    expect(parseAlgorithms('grpo,arpo,aepo')).toEqual(['grpo', 'arpo', 'aepo']);
    expect(ABLATION_ALGORITHMS.arpo!.rollout).toEqual({ branching: { mode: 'arpo' } });
    expect(ABLATION_ALGORITHMS.aepo).toEqual({ algorithm: { adv_estimator: 'grpo', policy_loss: 'aepo' }, rollout: { branching: { mode: 'aepo' } } });
  });

  it('runs both to the token budget with branches in their rollouts', async () => {
    process.env.ARBOR_HOME = mkdtempSync(join(tmpdir(), 'arbor-babl-home-'));
    const file = join(mkdtempSync(join(tmpdir(), 'arbor-babl-cfg-')), 'demo.yaml');
    writeFileSync(
      file,
      [
        'name: branch-ablation-test',
        // A base that already calls the search tool (an untrained one may never get a tool response to branch after,
        // depending on the CPU's rounding), and α = 1: every candidate branch after a tool response is taken.
        `model: { path: ${JSON.stringify(FIXTURE)} }`,
        'task: { kind: multihop, hops: [1, 2] }',
        'rollout: { prompts_per_step: 2, n: 4, max_turns: 3, max_new_tokens: 12, branching: { mode: arpo, alpha: 1 } }',
        'sft: { epochs: 1, demos: 8, batch_size: 4 }',
        'eval: { every: 0, n_questions: 4 }',
        'checkpoint: { every: 50, keep: 1 }',
      ].join('\n'),
    );
    const res = await runAblation({ openTaskSession, algorithms: ['arpo', 'aepo'], tokenBudget: 150, configFile: file });
    expect(res.rows.map((r) => r.algorithm)).toEqual(['arpo', 'aepo']);
    for (const r of res.rows) {
      expect(r.tokens).toBeGreaterThanOrEqual(150);
      const rows = readMetricsJsonl(join(r.runDir, 'metrics.jsonl'));
      expect(rows.reduce((a, x) => a + x.values['rollout/model_tokens']!, 0)).toBe(r.tokens);
      // Branches taken, counted from what each step records: branches per prompt × the step's 2 prompts.
      let branches = 0;
      for (const { values: v } of rows) {
        const perPrompt = v['rollout/branches_per_prompt']!;
        // At most n − 1 = 3 per prompt: every prompt keeps at least one sample started from the prompt.
        expect(perPrompt).toBeLessThanOrEqual(3);
        expect(perPrompt * 2).toBe(Math.round(perPrompt * 2));
        branches += perPrompt * 2;
        // A branch continues from its parent’s forked KV cache (this backend forks: prefix tokens not prefilled again), at a
        // point whose normalised entropy it records; a step without branches saves and records none.
        if (perPrompt > 0) {
          expect(v['rollout/prefix_tokens_saved']).toBeGreaterThan(0);
          expect(v['rollout/branch_entropy_mean']).toBeGreaterThan(0);
        } else expect(v['rollout/prefix_tokens_saved']).toBe(0);
      }
      expect(branches).toBeGreaterThan(0);
    }
    // AEPO keeps the gradient of clipped high-entropy tokens: those are clipped tokens and high-entropy tokens both.
    const aepo = readMetricsJsonl(join(res.rows[1]!.runDir, 'metrics.jsonl'))[0]!.values;
    expect(aepo['actor/high_entropy_fraction']).toBeGreaterThan(0);
    expect(aepo['actor/clip_kept_fraction']).toBeLessThanOrEqual(aepo['actor/clip_fraction']! + 1e-9);
    expect(aepo['actor/clip_kept_fraction']).toBeLessThanOrEqual(aepo['actor/high_entropy_fraction']! + 1e-9);
  });
});
