// "Why didn't it learn?" (engine/train/diagnostics.ts and the loop's learn/* metrics), the warnings
// for flat groups and a policy that stopped calling tools, and the best checkpoint kept beside the last.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { advantagePort } from '../../../engine/train/advantage';
import { bestCheckpoint, listCheckpoints, readBest } from '../../../engine/train/checkpoints';
import { validateConfig, type ExperimentInput } from '../../../engine/config/experiment';
import { runTrainingLoop, type RolloutPort, type SinkPort } from '../../../engine/train/loop';
import { JsonlSink, readMetricsJsonl, teeSink } from '../../../engine/run/sinks';
import { FLAT_STREAK, LearningWatch, flaggedSteps, quantiles, seriesWarnings, stepFlags } from '../../../engine/train/diagnostics';
import { TabularPolicy } from './tabular';

function setup(over: Partial<ExperimentInput> = {}) {
  const cfg = validateConfig({
    model: { init: 'tiny' },
    steps: 12,
    seed: 11,
    rollout: { prompts_per_step: 4, n: 8 },
    algorithm: { ppo_epochs: 2, mini_batches: 2, micro_batches: 2 },
    optim: { lr: 0.1, warmup_steps: 0 },
    checkpoint: { every: 10, keep: 1 },
    eval: { every: 0 },
    ...over,
  });
  const policy = new TabularPolicy({ prompts: 4, length: 3, vocab: 6, seed: 5 }, cfg);
  const runDir = mkdtempSync(join(tmpdir(), 'arbor-diag-'));
  const events: { kind: string; payload: Record<string, unknown> }[] = [];
  const recorder: SinkPort = { metrics() {}, truncateAfter() {}, event: (kind, payload) => events.push({ kind, payload }) };
  const sink = teeSink(new JsonlSink(runDir), recorder);
  return { cfg, policy, runDir, events, ports: { rollout: policy as RolloutPort, policy, advantage: advantagePort(cfg), sink } };
}

describe('per-step learning figures', () => {
  it('the loop logs zero-variance groups, gradient share, the advantage quantiles and clipping by side', async () => {
    const { cfg, ports, runDir } = setup({ steps: 6 });
    await runTrainingLoop(cfg, ports, { runDir });
    const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
    for (const r of rows) {
      const v = r.values;
      expect(v['learn/zero_variance_groups']).toBeGreaterThanOrEqual(0);
      expect(v['learn/zero_variance_groups']).toBeLessThanOrEqual(1);
      expect(v['advantage/p05']!).toBeLessThanOrEqual(v['advantage/p50']!);
      expect(v['advantage/p50']!).toBeLessThanOrEqual(v['advantage/p95']!);
      expect(v['learn/gradient_share']).toBeGreaterThan(0);
    }
    // A group whose rewards are all equal gets advantage 0 under GRPO: the gradient share is at most
    // the share of tokens in groups with variance.
    const r0 = rows[0]!.values;
    expect(r0['learn/gradient_share']!).toBeLessThanOrEqual(1 - r0['learn/zero_variance_groups']! + 1e-9);
  });

  it('flat groups for 10 steps give one warning; a step with no signal is flagged', async () => {
    const s = setup({ steps: 12 });
    const inner = s.policy;
    // Every sample of every prompt gets reward 0: no signal.
    s.ports.rollout = {
      async sample(a) {
        const eps = await inner.sample(a);
        for (const e of eps) e.reward = 0;
        return eps;
      },
    };
    await runTrainingLoop(s.cfg, s.ports, { runDir: s.runDir });
    const warnings = s.events.filter((e) => e.kind === 'warning');
    expect(warnings.length).toBe(1);
    expect(warnings[0]!.payload.step).toBe(FLAT_STREAK);
    expect(String(warnings[0]!.payload.message)).toMatch(/flat for 10 steps \(steps 1–10\)/);
    const rows = readMetricsJsonl(join(s.runDir, 'metrics.jsonl'));
    expect(rows.every((r) => r.values['learn/zero_variance_groups'] === 1 && r.values['learn/gradient_share'] === 0)).toBe(true);
    const series = Object.fromEntries(
      ['learn/zero_variance_groups', 'learn/gradient_share', 'tool_calls_per_episode'].map((k) => [
        k,
        { step: rows.map((r) => r.step), value: rows.map((r) => r.values[k] ?? null) },
      ]),
    );
    expect(flaggedSteps(series).map((f) => f.step)).toEqual(rows.map((r) => r.step));
    expect(flaggedSteps(series)[0]!.reasons[0]).toMatch(/no signal/);
    // The Run view and `arbor show` replay the same warning from the stored series.
    expect(seriesWarnings(series).map((w) => w.step)).toEqual([10]);
  });

  it('the policy that stops calling tools is named after 5 steps without a call', () => {
    const w = new LearningWatch();
    const out: string[] = [];
    for (let step = 1; step <= 12; step++) out.push(...w.observe(step, { tool_calls_per_episode: step <= 3 ? 2 : 0 }).map((m) => `${step}: ${m}`));
    expect(out.length).toBe(1);
    expect(out[0]).toMatch(/^8: the policy stopped calling tools: no tool call in 5 steps \(since step 4\)/);
    // A task that never called tools is not warned about.
    const never = new LearningWatch();
    expect([1, 2, 3, 4, 5, 6].flatMap((s) => never.observe(s, { tool_calls_per_episode: 0 }))).toEqual([]);
  });

  it('flags: thresholds by hand', () => {
    expect(stepFlags({ 'learn/zero_variance_groups': 0.5, 'learn/gradient_share': 0.5, 'actor/grad_norm': 1 })).toEqual([]);
    expect(stepFlags({ 'learn/zero_variance_groups': 0.75, 'learn/gradient_share': 0.05 })).toEqual([
      '75% of groups had no reward variance',
      'only 5.0% of model tokens carried a gradient',
    ]);
    expect(stepFlags({ truncated_rate: 0.6, format_rate: 0.3, 'actor/clip_low_fraction': 0.2, 'actor/clip_high_fraction': 0.15 })).toEqual([
      '60% of episodes truncated',
      '70% of episodes with format errors',
      '35% of tokens clipped',
    ]);
    expect(quantiles([3, 1, 2, 4], [0, 0.5, 1])).toEqual([1, 2.5, 4]);
  });
});

describe('best checkpoint by held-out score', () => {
  it('is kept beside the last checkpoint (checkpoint.keep 1) and named in best.json', async () => {
    const s = setup({ steps: 8, eval: { every: 2, n_questions: 4 }, checkpoint: { every: 2, keep: 1, keep_every: 0 } });
    const scores: Record<number, number> = { 2: 0.2, 4: 0.8, 6: 0.5, 8: 0.3 };
    const ports = { ...s.ports, eval: { evaluate: async ({ step }: { step: number }) => ({ exact_match: scores[step]!, format_rate: 1 }) } };
    await runTrainingLoop(s.cfg, ports, { runDir: s.runDir });
    expect(listCheckpoints(s.runDir).map((c) => c.step)).toEqual([4, 8]);
    expect(readBest(s.runDir)).toEqual({ step: 4, metric: 'exact_match', value: 0.8 });
    expect(bestCheckpoint(s.runDir)?.step).toBe(4);
    expect(s.events.filter((e) => e.kind === 'best_checkpoint').map((e) => e.payload.step)).toEqual([2, 4]);
  });

  it('an improvement between regular saves gets its own checkpoint; keep_best false keeps only the last', async () => {
    const s = setup({ steps: 6, eval: { every: 3, n_questions: 4 }, checkpoint: { every: 6, keep: 1 } });
    const ports = { ...s.ports, eval: { evaluate: async ({ step }: { step: number }) => ({ exact_match: step === 3 ? 0.9 : 0.1 }) } };
    await runTrainingLoop(s.cfg, ports, { runDir: s.runDir });
    expect(listCheckpoints(s.runDir).map((c) => c.step)).toEqual([3, 6]);
    const t = setup({ steps: 6, eval: { every: 3, n_questions: 4 }, checkpoint: { every: 6, keep: 1, keep_best: false } });
    await runTrainingLoop(t.cfg, { ...t.ports, eval: ports.eval }, { runDir: t.runDir });
    expect(listCheckpoints(t.runDir).map((c) => c.step)).toEqual([6]);
    expect(readBest(t.runDir)).toBeUndefined();
  });

  it('a best_metric the task does not report is refused, naming the field', async () => {
    const s = setup({ steps: 2, eval: { every: 1, n_questions: 4 }, checkpoint: { every: 1, keep: 1, best_metric: 'accuracy' } });
    const ports = { ...s.ports, eval: { evaluate: async () => ({ exact_match: 0.5 }) } };
    await expect(runTrainingLoop(s.cfg, ports, { runDir: s.runDir })).rejects.toThrow(
      /checkpoint.best_metric: "accuracy" is not a held-out metric .*exact_match/,
    );
  });
});

describe('arbor show', () => {
  it('prints the flagged steps and the flat-groups warning from the stored series', async () => {
    const { spawnSync } = await import('node:child_process');
    const { openDatabase } = await import('../../../engine/store/db');
    const { Store } = await import('../../../engine/store/store');
    const home = mkdtempSync(join(tmpdir(), 'arbor-home-'));
    const s = new Store(openDatabase(join(home, 'arbor.db')));
    const id = s.createRun({ name: 'flat', status: 'completed' });
    for (let step = 1; step <= 12; step++)
      s.writeMetrics(id, step, { 'learn/zero_variance_groups': step <= 11 ? 1 : 0, 'learn/gradient_share': step <= 11 ? 0 : 1, tool_calls_per_episode: 1 });
    s.db.close();
    const bin = join(__dirname, '..', '..', '..', 'bin', 'arbor.mjs');
    const r = spawnSync(process.execPath, [bin, 'show', id], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("why didn't it learn: 11 of 12 steps flagged");
    expect(r.stdout).toMatch(/warning: step 10: groups have been flat for 10 steps/);
    expect(r.stdout).toMatch(/step {5}5 {2}every group had one reward/);
    const j = spawnSync(process.execPath, [bin, 'show', id, '--json'], { encoding: 'utf8', env: { ...process.env, ARBOR_HOME: home }, timeout: 120_000 });
    expect((JSON.parse(j.stdout) as { learning: { flagged: unknown[] } }).learning.flagged.length).toBe(11);
  }, 200_000);
});
