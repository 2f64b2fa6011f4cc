import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { latestCheckpoint } from '../../../engine/train/checkpoints';
import { validateConfig } from '../../../engine/config/experiment';
import { runExperiment } from '../../../engine/run/runner';
import { JsonlSink, readMetricsJsonl } from '../../../engine/run/sinks';
import { TabularPolicy, tabularSession } from '../train/tabular';

const session = tabularSession;

describe('experiment job (SFT warm start, then RL)', () => {
  it('runs SFT then RL in one run folder; on resume SFT is not repeated and RL continues', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      steps: 6,
      rollout: { prompts_per_step: 4, n: 4 },
      sft: { warm_start: true, epochs: 2, lr: 0.05, batch_size: 16 },
      optim: { lr: 0.05 },
      checkpoint: { every: 3, keep: 2 },
      eval: { every: 0, n_questions: 16 },
    });
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-exp-'));
    const mk = () => new TabularPolicy({ prompts: 4, length: 3, vocab: 5, seed: 1 }, cfg);
    const ac = new AbortController();
    const phases: string[] = [];
    const r1 = await runExperiment(cfg, {
      runDir,
      session: session(mk(), cfg),
      sink: new JsonlSink(runDir),
      signal: ac.signal,
      onPhase: (p) => phases.push(p),
      onStep: (p, s) => p === 'rl' && s === 4 && ac.abort(),
    });
    // A finished warm start is evaluated on the held-out tasks before RL (the "SFT alone" figure).
    expect(phases).toEqual(['sft', 'eval', 'rl']);
    expect(r1.sftEval).toHaveProperty('exact_match');
    expect(r1.sft!.steps).toBe(2 * Math.ceil(120 / 16));
    expect(existsSync(join(runDir, 'sft', 'checkpoints'))).toBe(true);
    expect(r1.rl!.stopped).toBe(true);
    expect(r1.rl!.lastCheckpoint!.step).toBe(4);

    const r2 = await runExperiment(cfg, { runDir, session: session(mk(), cfg), sink: new JsonlSink(runDir), resume: true });
    expect(r2.sft).toBeUndefined(); // an RL checkpoint exists: SFT is neither repeated nor reloaded
    expect(r2.rl!.firstStep).toBe(5);
    // A fraction of the held-out questions (what the model learned is not asserted: it moves with the CPU).
    expect(Number.isFinite(r2.eval!.exact_match)).toBe(true);
    expect(r2.eval!.exact_match).toBeGreaterThanOrEqual(0);
    expect(r2.eval!.exact_match).toBeLessThanOrEqual(1);
    // RL steps once each; the SFT curve (sft/*, its own step axis) survives the RL resume's truncation.
    const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
    const isSft = (r: { values: Record<string, number> }) => Object.keys(r.values).every((k) => k.startsWith('sft/'));
    expect(rows.filter((r) => !isSft(r)).map((r) => r.step)).toEqual([1, 2, 3, 4, 5, 6]);
    const sft = rows.filter((r) => isSft(r) && 'sft/loss' in r.values);
    expect(sft.map((r) => r.step)).toEqual(Array.from({ length: r1.sft!.steps }, (_, i) => i + 1));
    // The SFT model's held-out evaluation, at SFT's last step.
    const sftEval = rows.filter((r) => 'sft/eval/exact_match' in r.values);
    expect(sftEval.map((r) => r.step)).toEqual([r1.sft!.steps]);
    expect(Object.keys(sft[0]!.values)).toEqual(expect.arrayContaining(['sft/loss', 'sft/lr', 'sft/tokens_per_s']));
  });

  describe('a stop during the SFT warm start', () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      steps: 3,
      rollout: { prompts_per_step: 4, n: 4 },
      sft: { warm_start: true, epochs: 2, lr: 0.05, batch_size: 16 },
      optim: { lr: 0.05 },
      checkpoint: { every: 3, keep: 2 },
      eval: { every: 0, n_questions: 16 },
    });
    const total = 2 * Math.ceil(120 / 16); // 16 SFT steps, 8 per epoch
    const mk = () => new TabularPolicy({ prompts: 4, length: 3, vocab: 5, seed: 1 }, cfg);
    const sftWeights = (runDir: string) => readFileSync(join(latestCheckpoint(join(runDir, 'sft'))!.dir, 'tabular_policy.json'), 'utf8');
    /** Run the experiment, stopping after SFT step `stopAt` (if given); SFT losses by step. */
    async function run(runDir: string, o: { stopAt?: number; resume?: boolean } = {}) {
      const ac = new AbortController();
      const losses = new Map<number, number>();
      const phases: string[] = [];
      const res = await runExperiment(cfg, {
        runDir,
        session: session(mk(), cfg),
        sink: new JsonlSink(runDir),
        signal: ac.signal,
        resume: o.resume,
        onPhase: (p) => phases.push(p),
        onStep: (p, s, m) => {
          if (p !== 'sft') return;
          losses.set(s, m['sft/loss']!);
          if (s === o.stopAt) ac.abort();
        },
      });
      return { res, losses, phases };
    }

    it('saves an incomplete SFT checkpoint and reports the job stopped; resume continues SFT from that step, as if never stopped, then runs RL', async () => {
      const clean = mkdtempSync(join(tmpdir(), 'arbor-exp-'));
      const c = await run(clean);
      expect(c.res.sft).toMatchObject({ steps: total, total, complete: true });
      expect(c.res.stopped).toBe(false);

      const dir = mkdtempSync(join(tmpdir(), 'arbor-exp-'));
      const r1 = await run(dir, { stopAt: 5 });
      expect(r1.res.stopped).toBe(true);
      expect(r1.res.rl).toBeUndefined();
      expect(r1.res.sft).toMatchObject({ steps: 5, total, complete: false });
      expect(latestCheckpoint(join(dir, 'sft'))!.state).toMatchObject({ step: 5, phase: 'sft', complete: false, total });

      const r2 = await run(dir, { resume: true });
      expect(r2.phases).toEqual(['sft', 'eval', 'rl', 'eval']);
      expect(r2.res.sft).toMatchObject({ resumedFrom: 5, steps: total, complete: true });
      expect(r2.res.sft!.skipped).toBeUndefined();
      expect([...r2.losses.keys()]).toEqual(Array.from({ length: total - 5 }, (_, i) => i + 6));
      // Same batches, learning rates and optimizer state as the uninterrupted run.
      for (const [step, loss] of r2.losses) expect(loss).toBe(c.losses.get(step));
      expect(sftWeights(dir)).toBe(sftWeights(clean));
      expect(latestCheckpoint(join(dir, 'sft'))!.state.complete).toBe(true);
      expect(r2.res.rl).toMatchObject({ firstStep: 1, lastStep: 3, stopped: false });
      expect(r2.res.stopped).toBe(false);
    });

    it('a finished SFT is loaded, not repeated, when the stop came before RL; a checkpoint without the flag counts as finished only at its last step', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'arbor-exp-'));
      const r1 = await run(dir, { stopAt: total });
      expect(r1.res.sft!.complete).toBe(true);
      expect(r1.res.stopped).toBe(true); // RL never started
      expect(r1.res.rl).toBeUndefined();
      const r2 = await run(dir, { resume: true });
      expect(r2.res.sft).toMatchObject({ skipped: 'resumed', steps: total, complete: true });
      expect(r2.losses.size).toBe(0);
      expect(r2.res.rl!.lastStep).toBe(3);

      // Checkpoints written before the `complete` flag existed.
      const legacy = mkdtempSync(join(tmpdir(), 'arbor-exp-'));
      await run(legacy, { stopAt: 7 });
      const ck = latestCheckpoint(join(legacy, 'sft'))!;
      const state = JSON.parse(readFileSync(join(ck.dir, 'trainer_state.json'), 'utf8'));
      delete state.complete;
      delete state.total;
      writeFileSync(join(ck.dir, 'trainer_state.json'), JSON.stringify(state));
      const r3 = await run(legacy, { resume: true });
      expect(r3.res.sft).toMatchObject({ resumedFrom: 7, steps: total, complete: true });
    });
  });
});
