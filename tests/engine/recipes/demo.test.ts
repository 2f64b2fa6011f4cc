// The demo orchestration at a tiny scale: every row of the Agent-R1-shaped table, the JSON
// shape, the runs recorded in the store, and the time budget stopping RL (not the bar: too slow).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runDemo } from '../../../engine/recipes/demo';
import { openTaskSession } from '../../../engine/run/open';
import { openCliStoreRun } from '../../../engine/run/store-run';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';

const prevHome = process.env.ARBOR_HOME;
afterEach(() => {
  if (prevHome === undefined) delete process.env.ARBOR_HOME;
  else process.env.ARBOR_HOME = prevHome;
});

function tinyDemoConfig(cold = false): string {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-demo-cfg-'));
  const file = join(dir, 'demo.yaml');
  writeFileSync(
    file,
    [
      'name: demo-test',
      'model: { init: tiny }',
      'task: { kind: multihop, hops: [1, 2] }',
      'steps: 3',
      'rollout: { prompts_per_step: 2, n: 2, max_turns: 3, max_new_tokens: 12 }',
      // cold: resources/configs/demo-cold.yaml's cold start (a validation split scored during SFT, GRPO from its best step).
      cold ? 'sft: { epochs: 2, demos: 8, batch_size: 4, schedule: constant, eval_every: 2, keep_best: true }' : 'sft: { epochs: 1, demos: 8, batch_size: 4 }',
      cold ? 'eval: { every: 0, n_questions: 6, validation: 4 }' : 'eval: { every: 0, n_questions: 6 }',
      'checkpoint: { every: 5, keep: 1 }',
    ].join('\n'),
  );
  return file;
}

describe('arbor demo orchestration', () => {
  it('produces every table row, records the RL run in the store, and is one JSON object', async () => {
    process.env.ARBOR_HOME = mkdtempSync(join(tmpdir(), 'arbor-demo-home-'));
    const res = await runDemo({
      openTaskSession,
      configFile: tinyDemoConfig(),
      budgetSeconds: 3600,
      // As `arbor demo` records its phases: the SFT warm start its own run, the RL runs' parent.
      record: (phase, cfg, runDir, link) => {
        const sft = phase === 'sft';
        const r = openCliStoreRun(`demo-test-${phase}`, cfg, {
          resume: false,
          template: sft ? 'sft' : cfg.task.kind,
          dir: runDir,
          parentId: link?.parentId,
          tags: sft ? ['sft-warm-start'] : undefined,
        });
        return { id: r.runId, sink: r.sink, finish: (s, e) => r.finish(s, e) };
      },
    });
    expect(res.rows.map((r) => r.method)).toEqual(expect.arrayContaining(['naive RAG', 'base tool calling', 'SFT only', 'SFT + GRPO']));
    // Every row scores the same 6 held-out questions: its exact match is a count of them.
    for (const r of res.rows) {
      const right = r.exactMatch * 6;
      expect(right).toBeCloseTo(Math.round(right), 9);
      expect(Math.round(right)).toBeGreaterThanOrEqual(0);
      expect(Math.round(right)).toBeLessThanOrEqual(6);
      expect(Number.isFinite(r.toolCallsPerEpisode)).toBe(true);
    }
    expect(res.curves.map((c) => c.step)).toEqual([1, 2, 3]);
    expect(typeof res.bar.passed).toBe('boolean');
    expect(JSON.parse(JSON.stringify(res))).toMatchObject({ rows: expect.any(Array), bar: expect.any(Object), totalSeconds: expect.any(Number) });
    // The time split: every phase ran (scoring too: the config recomputes the old policy's
    // log-probs), the rest (model building, checkpoints) is time no phase counted, and the parts add up to the total.
    const sec = res.seconds;
    // Each phase ran real work (measured with performance.now); `other` is the remainder of the total, so only ≥ 0.
    for (const k of ['sft', 'rollout', 'scoring', 'update', 'evaluation'] as const) expect(sec[k]).toBeGreaterThan(0);
    expect(sec.other).toBeGreaterThanOrEqual(0);
    expect(sec.sft + sec.rollout + sec.scoring + sec.update + sec.evaluation + sec.other).toBeCloseTo(sec.total, 6);
    expect(sec.total).toBeCloseTo(res.totalSeconds, 1);
    const store = new Store(openDatabase());
    expect(store.getRun('demo-test-grpo').status).toBe('completed');
    expect(store.metricSeries('demo-test-grpo', 'reward/mean').step).toEqual([1, 2, 3]);
    // The scoring pass ran at every step (it measures the sampler's log-prob mismatch).
    expect(store.metricSeries('demo-test-grpo', 'rollout/logprob_mismatch').step).toEqual([1, 2, 3]);
    // The SFT warm start: its own run, GRPO's parent, with its curve at SFT steps; GRPO keeps the "SFT only" evaluation as sft/eval/*.
    const sftRun = store.getRun('demo-test-sft');
    expect(sftRun).toMatchObject({ template: 'sft', status: 'completed' });
    expect(sftRun.tags).toContain('sft-warm-start');
    expect(store.getRun('demo-test-grpo').parentId).toBe('demo-test-sft');
    // Its end, as every SFT warm start records it (engine/run/runner.ts warmStart).
    expect(store.logs('demo-test-sft').filter((l) => l.text.startsWith('sft_done: '))).toHaveLength(1);
    const sftSteps = store.metricSeries('demo-test-sft', 'sft/loss').step;
    expect(sftSteps.length).toBeGreaterThan(0);
    expect(sftRun.step).toBe(sftSteps[sftSteps.length - 1]);
    expect(store.metricKeys('demo-test-sft')).toContain('sft/tokens_per_s');
    expect(store.metricKeys('demo-test-grpo').filter((k) => k.startsWith('sft/') && !k.startsWith('sft/eval/'))).toEqual([]);
    const sftOnly = res.rows.find((r) => r.method === 'SFT only')!;
    expect(store.getRun('demo-test-grpo').metrics['sft/eval/exact_match']).toBe(sftOnly.exactMatch);
    store.db.close();
  }, 240_000);

  it("the cold start's config (demo-cold.yaml's keys): SFT scores its validation split, GRPO starts from the best step", async () => {
    process.env.ARBOR_HOME = mkdtempSync(join(tmpdir(), 'arbor-demo-home-'));
    const res = await runDemo({ openTaskSession, configFile: tinyDemoConfig(true), budgetSeconds: 3600 });
    expect(res.rows.map((r) => r.method)).toEqual(expect.arrayContaining(['SFT only', 'SFT + GRPO']));
    expect(res.curves.map((c) => c.step)).toEqual([1, 2, 3]);
    const best = JSON.parse(readFileSync(join(res.runDir, 'sft', 'checkpoints', 'best.json'), 'utf8')) as { step: number };
    expect([2, 4]).toContain(best.step);
  }, 240_000);

  it('stops RL at the time budget after the current step and still evaluates', async () => {
    process.env.ARBOR_HOME = mkdtempSync(join(tmpdir(), 'arbor-demo-home-'));
    const res = await runDemo({ openTaskSession, configFile: tinyDemoConfig(), budgetSeconds: 0 });
    expect(res.rows.find((r) => r.method === 'SFT + GRPO')).toBeDefined();
    expect(res.skipped.some((s) => /grpo: stopped by the time budget after \d of 3 steps/.test(s))).toBe(true);
    expect(res.curves.length).toBeLessThan(3);
  }, 240_000);
});
