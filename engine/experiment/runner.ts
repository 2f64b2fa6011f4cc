/**
 * One experiment as a job: optional SFT warm start, then RL, in one run folder. Used by
 * `arbor train` and by the run manager's job kind (so the UI can start / stop / resume runs).
 *
 * Resume: an RL checkpoint wins (the loop resumes from it); otherwise the last SFT checkpoint in
 * <run>/sft is loaded: if SFT had finished (its trainer state says `complete`) it is not
 * repeated, and if a stop cut it short, SFT continues from that step (same batches, same
 * learning-rate schedule, the saved optimizer state) before RL starts.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { bestCheckpoint, latestCheckpoint } from '../train/checkpoints';
import type { ExperimentConfig } from '../config/experiment';
import { runTrainingLoop, type LoopResult, type SinkPort } from '../train/loop';
import type { TaskSession } from './run-dir';
import { evalMetrics } from '../tasks/kit';
import { runSft, sftTotalSteps, type Demo } from '../train/sft';
import { sftFormatWarning } from '../train/diagnostics';

export interface ExperimentContext {
  runDir: string;
  session: TaskSession;
  sink: SinkPort;
  resume?: boolean;
  signal?: AbortSignal;
  /** Awaited before every SFT and RL step (the workbench's Pause). */
  beforeStep?: () => Promise<void>;
  onPhase?: (phase: 'sft' | 'rl' | 'eval', total: number) => void;
  onStep?: (phase: 'sft' | 'rl', step: number, m: Record<string, number>) => void;
}

export interface ExperimentResult {
  /**
   * `complete`: SFT ran all its steps; `resumedFrom`: the step a stopped SFT continued from;
   * `skipped: 'resumed'`: a finished SFT checkpoint was loaded instead of training.
   */
  sft?: {
    steps: number;
    total?: number;
    complete: boolean;
    finalLoss: number;
    /** The checkpoint RL started from: the last step's, or with sft.keep_best the best validation step's. */
    checkpoint?: string;
    /** sft.keep_best: the step chosen and its validation exact match. */
    best?: { step: number; exactMatch: number };
    skipped?: 'resumed';
    resumedFrom?: number;
  };
  rl?: LoopResult;
  /** The SFT-without-format check's warning (engine/train/diagnostics.ts sftFormatWarning), said before RL. */
  sftWarning?: string;
  /** Held-out metrics of the SFT model, right after a finished warm start (the "SFT alone" row). */
  sftEval?: Record<string, number>;
  eval?: Record<string, number>;
  /** The signal stopped the job before its end (during SFT, between SFT and RL, or during RL). */
  stopped: boolean;
}

export async function runExperiment(cfg: ExperimentConfig, ctx: ExperimentContext): Promise<ExperimentResult> {
  const out: ExperimentResult = { stopped: false };
  const sftDir = join(ctx.runDir, 'sft');
  const hasRl = ctx.resume && latestCheckpoint(ctx.runDir)?.state.phase === 'rl';
  if (cfg.sft.warm_start && !hasRl) {
    const saved = ctx.resume ? latestCheckpoint(sftDir) : undefined;
    let demos: Demo[] | undefined;
    // Checkpoints from before the `complete` flag: finished when they reached the last step.
    const finished = saved && (saved.state.complete ?? saved.step >= sftTotalSteps(cfg, (demos ??= await ctx.session.demos()).length));
    if (saved && finished) {
      // sft.keep_best: the run went on from the best validation step, not the last.
      const chosen = (cfg.sft.keep_best && bestCheckpoint(sftDir)) || saved;
      await ctx.session.loadPolicy(chosen.dir);
      out.sft = { steps: saved.step, total: saved.state.total, complete: true, finalLoss: NaN, checkpoint: chosen.dir, skipped: 'resumed' };
    } else {
      mkdirSync(sftDir, { recursive: true });
      demos ??= await ctx.session.demos();
      // A stopped SFT: its checkpoint holds the weights and optimizer state at `saved.step`.
      if (saved) await ctx.session.loadPolicy(saved.dir);
      ctx.onPhase?.('sft', sftTotalSteps(cfg, demos.length));
      const r = await runSft(cfg, demos, ctx.session.sft, {
        runDir: sftDir,
        signal: ctx.signal,
        beforeStep: ctx.beforeStep,
        startStep: saved?.step,
        // The SFT curve goes to the run's metrics under sft/* (its own step axis: the store keeps
        // sft/* out of the run's RL step and out of an RL resume's truncation). Its intermediate
        // checkpoints stay in the run folder; the one RL starts from is recorded below at step 0.
        sink: { metrics: (s, m) => ctx.sink.metrics(s, sftKeys(m)), truncateAfter: () => {} },
        onStep: (s, _t, m) => ctx.onStep?.('sft', s, m),
        validate: ctx.session.validate,
        loadPolicy: (dir) => ctx.session.loadPolicy(dir),
      });
      out.sft = {
        steps: r.steps,
        total: r.total,
        complete: r.complete,
        finalLoss: r.finalLoss,
        checkpoint: (r.best ?? r.checkpoint)?.dir,
        ...(r.best ? { best: { step: r.best.step, exactMatch: r.best.value } } : {}),
        ...(saved ? { resumedFrom: saved.step } : {}),
      };
      // The weights RL starts from, in the run's checkpoint list at step 0: they sampled RL step 1, so the
      // replay's top-k and what-if use them for it, and they are "the SFT checkpoint" to compare any step against.
      if (r.complete && out.sft.checkpoint) ctx.sink.event?.('checkpoint', { step: 0, dir: out.sft.checkpoint });
      ctx.sink.event?.(r.complete ? 'sft_done' : 'sft_stopped', {
        steps: r.steps,
        total: r.total,
        finalLoss: r.finalLoss,
        ...(r.best ? { bestStep: r.best.step, bestValidationExactMatch: r.best.value } : {}),
      });
      // SFT alone on the held-out tasks, so one run shows what RL added (logged on SFT's step axis).
      if (r.complete && !ctx.signal?.aborted) {
        ctx.onPhase?.('eval', 1);
        out.sftEval = evalMetrics(await ctx.session.evaluate(cfg.eval.n_questions));
        await ctx.sink.metrics(r.steps, Object.fromEntries(Object.entries(out.sftEval).map(([k, v]) => [`sft/eval/${k}`, v])));
        // SFT without the format: said before RL starts, with the keys to change.
        const val = r.validation;
        const warning = val
          ? sftFormatWarning(cfg, val.metrics, `the validation split's (SFT step ${val.step})`, r.steps)
          : sftFormatWarning(cfg, out.sftEval, 'the held-out', r.steps);
        if (warning) {
          out.sftWarning = warning;
          ctx.sink.event?.('warning', { step: 0, message: warning });
        }
      }
    }
  }
  if (ctx.signal?.aborted) {
    out.stopped = true;
    return out;
  }
  if (cfg.sft.warm_start && ctx.session.setReference) {
    // KL is measured against the SFT model: the policy's weights now, or, on an RL resume (the
    // policy will be the RL checkpoint's), SFT's final checkpoint.
    const sft = hasRl ? (cfg.sft.keep_best && bestCheckpoint(sftDir)) || latestCheckpoint(sftDir) : undefined;
    if (!hasRl || sft) await ctx.session.setReference(sft?.dir);
  }
  ctx.onPhase?.('rl', cfg.steps);
  out.rl = await runTrainingLoop(
    cfg,
    { ...ctx.session.ports, sink: ctx.sink },
    {
      runDir: ctx.runDir,
      resume: ctx.resume,
      signal: ctx.signal,
      beforeStep: ctx.beforeStep,
      onStep: (s, m) => ctx.onStep?.('rl', s, m),
    },
  );
  out.stopped = out.rl.stopped;
  if (out.rl.lastEval) out.eval = out.rl.lastEval;
  else if (!out.rl.stopped) {
    ctx.onPhase?.('eval', 1);
    out.eval = evalMetrics(await ctx.session.evaluate(cfg.eval.n_questions));
  }
  return out;
}

/** SFT step metrics under sft/* only (its throughput too, so it is not drawn on the RL curve). */
function sftKeys(m: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k.startsWith('sft/') ? k : `sft/${k.replace(/^perf\//, '')}`, v]));
}
