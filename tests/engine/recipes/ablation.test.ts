// `arbor demo --algorithms` at a tiny scale: one SFT, then each algorithm from that checkpoint
// until the same rollout token budget; the table's fields; the per-algorithm metrics reach the
// run folders (GiGPO's step groups, GSPO's sequence clip fraction); bad names are refused.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseAlgorithms, runAblation } from '../../../engine/recipes/ablation';
import { readMetricsJsonl } from '../../../engine/run/sinks';
import { openTaskSession } from '../../../engine/run/open';

const prevHome = process.env.ARBOR_HOME;
afterEach(() => {
  if (prevHome === undefined) delete process.env.ARBOR_HOME;
  else process.env.ARBOR_HOME = prevHome;
});

function tinyConfig(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'arbor-abl-cfg-')), 'demo.yaml');
  writeFileSync(
    file,
    [
      'name: ablation-test',
      'model: { init: tiny }',
      'task: { kind: multihop, hops: [1, 2] }',
      'rollout: { prompts_per_step: 2, n: 2, max_turns: 3, max_new_tokens: 12 }',
      'sft: { epochs: 1, demos: 8, batch_size: 4 }',
      'eval: { every: 0, n_questions: 4 }',
      'checkpoint: { every: 50, keep: 1 }',
    ].join('\n'),
  );
  return file;
}

describe('arbor demo --algorithms', () => {
  it('trains each algorithm from one SFT checkpoint to the same token budget and reports the table', async () => {
    process.env.ARBOR_HOME = mkdtempSync(join(tmpdir(), 'arbor-abl-home-'));
    const stages: string[] = [];
    const res = await runAblation({
      openTaskSession,
      algorithms: ['grpo', 'gspo', 'gigpo'],
      tokenBudget: 60,
      configFile: tinyConfig(),
      onStage: (s) => stages.push(s),
    });
    expect(stages.filter((s) => s.startsWith('SFT'))).toHaveLength(1);
    expect(res.rows.map((r) => r.algorithm)).toEqual(['grpo', 'gspo', 'gigpo']);
    for (const r of res.rows) {
      expect(r.tokens).toBeGreaterThanOrEqual(60);
      expect(r.steps).toBeGreaterThanOrEqual(1);
      // Scored on the config's 4 held-out questions: the exact match is a count of them.
      expect([0, 0.25, 0.5, 0.75, 1]).toContain(r.exactMatch);
      expect(Object.keys(r.exactMatchByHops).length).toBeGreaterThan(0);
      const rows = readMetricsJsonl(join(r.runDir, 'metrics.jsonl'));
      expect(rows).toHaveLength(r.steps);
      expect(rows.reduce((a, x) => a + x.values['rollout/model_tokens']!, 0)).toBe(r.tokens);
      // Without the last step the budget was not yet reached.
      expect(r.tokens - rows.at(-1)!.values['rollout/model_tokens']!).toBeLessThan(60);
    }
    const metrics = (alg: string) => readMetricsJsonl(join(res.rows.find((r) => r.algorithm === alg)!.runDir, 'metrics.jsonl'))[0]!.values;
    expect(metrics('gigpo')['advantage/step_groups']).toBeGreaterThan(0);
    // GSPO's sequence clip fraction, a share of the step's sequences (GRPO's loss has none). One
    // ratio and (GRPO's) one advantage per sequence: a sequence's tokens are clipped all or none, so
    // some token was clipped exactly when some sequence was.
    const gspo = metrics('gspo');
    expect(gspo['actor/seq_clip_fraction']).toBeGreaterThanOrEqual(0);
    expect(gspo['actor/seq_clip_fraction']).toBeLessThanOrEqual(1);
    expect(gspo['actor/seq_clip_fraction']! > 0).toBe(gspo['actor/clip_fraction']! > 0);
    expect(metrics('grpo')['actor/seq_clip_fraction']).toBeUndefined();
    expect(JSON.parse(JSON.stringify(res))).toMatchObject({ tokenBudget: 60, miniBatches: 2, sft: { exactMatch: expect.any(Number) } });
  });

  it('the CLI refuses flags that would not apply, and bad names, before any work', () => {
    const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
    const arbor = (...args: string[]) =>
      spawnSync(process.execPath, [bin, 'demo', ...args], {
        encoding: 'utf8',
        env: { ...process.env, ARBOR_HOME: mkdtempSync(join(tmpdir(), 'arbor-abl-home-')) },
      });
    for (const [args, message] of [
      [['--algorithms', 'grpo', '--budget', '5'], /--budget: .*--token-budget/],
      [['--token-budget', '5'], /--token-budget: applies only with --algorithms/],
      [['--algorithms', 'grpo,vapo'], /unknown algorithm "vapo"/],
    ] as const) {
      const r = arbor(...args);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(message);
    }
  });

  it('refuses unknown or repeated algorithm names', () => {
    expect(parseAlgorithms('grpo, gigpo')).toEqual(['grpo', 'gigpo']);
    expect(() => parseAlgorithms('grpo,vapo')).toThrow(/unknown algorithm "vapo"; available: grpo, gspo, gigpo/);
    expect(() => parseAlgorithms('gspo,gspo')).toThrow(/twice/);
  });
});
