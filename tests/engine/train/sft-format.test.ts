// The check between SFT and RL (engine/train/diagnostics.ts sftFormatWarning, engine/run/runner.ts):
// an SFT model that writes the environment's format in (nearly) no episode is named before RL
// starts, with the keys to change. Scripted: the tabular policy trains, and the session's
// evaluation is a fixed answer, so what fires does not depend on what any model learned.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../engine/config/experiment';
import { runExperiment } from '../../../engine/run/runner';
import type { TaskSession } from '../../../engine/run/run-dir';
import type { EvalSummary } from '../../../engine/tasks/kit';
import { advantagePort } from '../../../engine/train/advantage';
import { SFT_FORMAT_FLOOR, sftFormatWarning } from '../../../engine/train/diagnostics';
import type { SinkPort } from '../../../engine/train/loop';
import { TabularPolicy } from './tabular';

const summary = (formatRate: number, exactMatch: number): EvalSummary => ({
  n: 8,
  exactMatch,
  exactMatchByHops: {},
  formatRate,
  toolCallsPerEpisode: 0,
  toolErrorsPerEpisode: 0,
});

function session(cfg: ReturnType<typeof validateConfig>, heldOut: EvalSummary, val?: Record<string, number>): TaskSession {
  const policy = new TabularPolicy({ prompts: 4, length: 3, vocab: 6, seed: 5 }, cfg);
  return {
    ports: { rollout: policy, policy, advantage: advantagePort(cfg) },
    sft: policy,
    demos: async () => policy.demos(32, 0, 3),
    evaluate: async () => heldOut,
    ...(val ? { validate: async () => val } : {}),
    loadPolicy: (dir) => policy.load(dir),
    close: async () => {},
  };
}

/** The events and the first RL metrics step, in the order the run gave them. */
function recorder() {
  const seen: string[] = [];
  const warnings: string[] = [];
  const sink: SinkPort = {
    metrics: (step, m) => void (Object.keys(m).some((k) => !k.startsWith('sft/')) && seen.push(`rl-metrics ${step}`)),
    truncateAfter: () => {},
    event: (kind, p) => {
      seen.push(kind);
      if (kind === 'warning') warnings.push(String(p.message));
    },
  };
  return { sink, seen, warnings };
}

const base = {
  model: { init: 'tiny' },
  environment: { format: 'hermes' },
  steps: 2,
  seed: 1,
  rollout: { prompts_per_step: 2, n: 2, max_turns: 1, max_new_tokens: 3, max_total_length: 4 },
  sft: { warm_start: true, epochs: 1, batch_size: 8, lr: 0.1, demos: 32 },
  eval: { every: 0, n_questions: 8 },
  checkpoint: { every: 2, keep: 1 },
};

describe('SFT without the format', () => {
  it('fires on a format rate near 0 with nothing right, naming the keys; silent otherwise', () => {
    const cfg = validateConfig(base);
    const w = sftFormatWarning(cfg, { format_rate: 0, exact_match: 0 }, 'the held-out', 4)!;
    expect(w).toContain('SFT ended without the format');
    expect(w).toContain('environment.format "hermes"');
    for (const key of [
      'sft.epochs (now 1)',
      'sft.demos (now 32)',
      'sft.lr (now 0.1)',
      'eval.validation',
      'sft.eval_every',
      'sft.keep_best',
      'sft.stop_at',
      'model.path',
    ])
      expect(w).toContain(key);
    expect(sftFormatWarning(cfg, { format_rate: SFT_FORMAT_FLOOR, exact_match: 0 }, 'x', 4)).toBeDefined();
    expect(sftFormatWarning(cfg, { format_rate: 0.3, exact_match: 0 }, 'x', 4)).toBeUndefined();
    // An environment that reports no format (rate 0) whose answers are right: nothing to say.
    expect(sftFormatWarning(cfg, { format_rate: 0, exact_match: 0.6 }, 'x', 4)).toBeUndefined();
    expect(sftFormatWarning(cfg, {}, 'x', 4)).toBeUndefined();
    // With a validation split and stop_at set, the cold-start keys are not offered again.
    const cold = validateConfig({ ...base, sft: { ...base.sft, eval_every: 2, keep_best: true, stop_at: 0.5 }, eval: { ...base.eval, validation: 2 } });
    expect(sftFormatWarning(cold, { format_rate: 0, exact_match: 0 }, 'x', 4)).not.toContain('eval.validation');
  });

  it('the run says so before RL starts (held-out scores), and not when SFT taught the format', async () => {
    const cfg = validateConfig(base);
    const off = recorder();
    const res = await runExperiment(cfg, { runDir: mkdtempSync(join(tmpdir(), 'arbor-sft-format-')), session: session(cfg, summary(0, 0)), sink: off.sink });
    expect(off.warnings).toHaveLength(1);
    expect(res.sftWarning).toBe(off.warnings[0]);
    expect(off.warnings[0]).toContain('0.0% of the held-out episodes');
    // Said before the first RL step's metrics.
    expect(off.seen.indexOf('warning')).toBeGreaterThan(-1);
    expect(off.seen.indexOf('warning')).toBeLessThan(off.seen.findIndex((s) => s.startsWith('rl-metrics')));
    expect(res.rl!.lastStep).toBe(2);

    const on = recorder();
    const ok = await runExperiment(cfg, { runDir: mkdtempSync(join(tmpdir(), 'arbor-sft-format-')), session: session(cfg, summary(0.9, 0.2)), sink: on.sink });
    expect(on.warnings).toEqual([]);
    expect(ok.sftWarning).toBeUndefined();
  });

  it('reads the validation split when SFT scored one (the step it hands on)', async () => {
    const cfg = validateConfig({ ...base, sft: { ...base.sft, eval_every: 2 }, eval: { ...base.eval, validation: 2 } });
    const r = recorder();
    // The held-out questions look fine; the validation split, which SFT scored, has no format.
    await runExperiment(cfg, {
      runDir: mkdtempSync(join(tmpdir(), 'arbor-sft-format-')),
      session: session(cfg, summary(0.9, 0.5), { format_rate: 0.02, exact_match: 0 }),
      sink: r.sink,
    });
    expect(r.warnings).toHaveLength(1);
    expect(r.warnings[0]).toContain("2.0% of the validation split's (SFT step 4) episodes");
  });
});
