/**
 * One experiment as a job: optional SFT warm start, then RL, in one run folder. Used by
 * `arbor train` and by the run manager's job kind (so the UI can start / stop / resume runs).
 *
 * Resume: an RL checkpoint wins (the loop resumes from it); otherwise the last SFT checkpoint in
 * <run>/sft is loaded: if SFT had finished (its trainer state says `complete`) it is not
 * repeated, and if a stop cut it short, SFT continues from that step (same batches, same
 * learning-rate schedule, the saved optimizer state) before RL starts.
 *
 * With `sftRun` (the callers that record runs in the workspace store), the SFT warm start is its own
 * run, the parent of this one: its curve (sft/* at SFT steps), checkpoints and end status are there.
 * This run keeps what RL needs of it: the checkpoint RL starts from (step 0, for the replay) and the
 * SFT model's held-out evaluation (sft/eval/*, the "before RL" column).
 *
 * The warm start itself is `warmStart` (below): the one SFT that the demo, the ablation
 * (engine/recipes) and `arbor sft` run too.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { bestCheckpoint, latestCheckpoint } from '../train/checkpoints';
import type { ExperimentConfig } from '../config/experiment';
import { runTrainingLoop, type LoopResult, type SinkPort } from '../train/loop';
import type { TaskSession } from './run-dir';
import { evalMetrics } from '../tasks/kit';
import { runSft, sftTotalSteps, type Demo, type SftResult } from '../train/sft';
import { recordedRun, type RunHandle } from './sinks';
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
  /**
   * Record the SFT warm start as its own run, linked as this run's parent (engine/run/store-sink.ts
   * openSftRun): called when SFT trains (fresh, or a stopped SFT continued: `resume`), never when a
   * resume skips a finished SFT (the link stays). Undefined (no store, or a run recorded before SFT
   * runs existed): the SFT curve goes to `sink` under sft/*.
   */
  sftRun?: (o: { dir: string; resume: boolean }) => SftRunPort | undefined;
}

/** Where the SFT warm start's own run is written (its curve, checkpoints, events) and how it ends. */
export interface SftRunPort {
  id: string;
  sink: SinkPort;
  finish(status: 'completed' | 'stopped' | 'failed', error?: string): void;
}

export interface ExperimentResult {
  /**
   * `complete`: SFT ran all its steps; `resumedFrom`: the step a stopped SFT continued from;
   * `skipped: 'resumed'`: a finished SFT checkpoint was loaded instead of training.
   */
  sft?: {
    /** The run that records the SFT (ctx.sftRun), when one does. */
    runId?: string;
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
      demos ??= await ctx.session.demos();
      ctx.onPhase?.('sft', sftTotalSteps(cfg, demos.length));
      const r = await warmStart(cfg, ctx.session, {
        dir: sftDir,
        demos,
        // A stopped SFT: its checkpoint holds the weights and optimizer state at `saved.step`.
        from: saved,
        record: () => ctx.sftRun?.({ dir: sftDir, resume: !!saved }),
        // The SFT curve: on the SFT run, or (no such run) on this run under sft/* (its own step axis: the
        // store keeps sft/* out of the run's RL step and out of an RL resume's truncation). Its
        // intermediate checkpoints stay in the run folder; the one RL starts from is recorded below at step 0.
        sink: (rec) => sftCurve(rec?.sink ?? { metrics: (s, m) => ctx.sink.metrics(s, m), truncateAfter: () => {} }),
        signal: ctx.signal,
        beforeStep: ctx.beforeStep,
        onStep: (s, _t, m) => ctx.onStep?.('sft', s, m),
      });
      out.sft = {
        ...(r.runId !== undefined ? { runId: r.runId } : {}),
        steps: r.steps,
        total: r.total,
        complete: r.complete,
        finalLoss: r.finalLoss,
        checkpoint: r.start,
        ...(r.best ? { best: { step: r.best.step, exactMatch: r.best.value } } : {}),
        ...(saved ? { resumedFrom: saved.step } : {}),
      };
      // The weights RL starts from, in the run's checkpoint list at step 0: they sampled RL step 1, so the
      // replay's top-k and what-if use them for it, and they are "the SFT checkpoint" to compare any step against.
      if (r.complete && r.start) ctx.sink.event?.('checkpoint', { step: 0, dir: r.start });
      ctx.sink.event?.(r.complete ? 'sft_done' : 'sft_stopped', { ...sftEnd(r), ...(r.runId !== undefined ? { run: r.runId } : {}) });
      // SFT alone on the held-out tasks, so one run shows what RL added (logged on SFT's step axis).
      if (r.complete && !ctx.signal?.aborted) {
        ctx.onPhase?.('eval', 1);
        out.sftEval = evalMetrics(await ctx.session.evaluate(cfg.eval.n_questions));
        await ctx.sink.metrics(r.steps, beforeRlMetrics(out.sftEval));
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

/** The SFT warm start's own run, as warmStart records it (a workspace run, or `arbor demo`'s phase record). */
export interface SftRunHandle extends RunHandle {
  id?: string;
  sink: SinkPort;
}

export interface WarmStartOptions {
  /** The SFT folder: its checkpoints (and best.json with sft.keep_best); made if missing. */
  dir: string;
  /** The demonstrations, when the caller has read them (else the session's). */
  demos?: Demo[];
  /** A stopped SFT's checkpoint: loaded (weights and optimizer state), and SFT continues after its step. */
  from?: { step: number; dir: string };
  /** Opens the warm start's own run once the demonstrations are read; absent or undefined: not recorded as a run. */
  record?: () => SftRunHandle | undefined;
  /** Where the SFT curve and events go, given that run (e.g. its sink through sftCurve). */
  sink: (record: SftRunHandle | undefined) => SinkPort;
  signal?: AbortSignal;
  /** Awaited before every step (the workbench's Pause). */
  beforeStep?: () => Promise<void>;
  onStep?: (step: number, total: number, m: Record<string, number>) => void;
}

export interface WarmStart extends SftResult {
  /** The run that records this SFT (WarmStartOptions.record), when one does. */
  runId?: string;
  /** The checkpoint RL starts from: with sft.keep_best the best validation step's, else the last step's. */
  start?: string;
}

/**
 * The SFT warm start, as every job runs it (`arbor train` and the run manager through
 * runExperiment, the demo, the ablation, `arbor sft`): the session's policy trained on the
 * demonstrations in `dir` (continued from `from` when given), its curve to `sink`, scored on the
 * validation split when the session has one. When `record` opens a run, that run ends with SFT:
 * failed with the error's message on a throw, else completed or stopped, after the events
 * `sft_done` / `sft_stopped` (sftEnd) and, with sft.keep_best, the best step's checkpoint.
 * The held-out evaluation of the SFT model is the caller's (each reports it its own way).
 */
export async function warmStart(cfg: ExperimentConfig, session: TaskSession, o: WarmStartOptions): Promise<WarmStart> {
  mkdirSync(o.dir, { recursive: true });
  const demos = o.demos ?? (await session.demos());
  if (o.from) await session.loadPolicy(o.from.dir);
  const rec = o.record?.();
  const sink = o.sink(rec);
  return recordedRun(rec, async () => {
    const r = await runSft(cfg, demos, session.sft, {
      runDir: o.dir,
      sink,
      signal: o.signal,
      beforeStep: o.beforeStep,
      startStep: o.from?.step,
      onStep: o.onStep,
      validate: session.validate,
      loadPolicy: (dir) => session.loadPolicy(dir),
    });
    if (rec) {
      // sft.keep_best: the step RL starts from is a checkpoint of the SFT run too (runSft recorded its last step's).
      if (r.best && r.best.step !== r.steps) rec.sink.event?.('checkpoint', { step: r.best.step, dir: r.best.dir });
      rec.sink.event?.(r.complete ? 'sft_done' : 'sft_stopped', sftEnd(r));
      rec.finish(r.complete ? 'completed' : 'stopped');
    }
    return { ...r, ...(rec?.id !== undefined ? { runId: rec.id } : {}), start: (r.best ?? r.checkpoint)?.dir };
  });
}

/** The payload of the `sft_done` / `sft_stopped` event: how far SFT got, and the best step it kept. */
export function sftEnd(r: SftResult): Record<string, number> {
  return {
    steps: r.steps,
    total: r.total,
    finalLoss: r.finalLoss,
    ...(r.best ? { bestStep: r.best.step, bestValidationExactMatch: r.best.value } : {}),
  };
}

/** A sink for the SFT curve: `sink` with the step metrics under sft/* only (sftKeys). */
export function sftCurve(sink: SinkPort): SinkPort {
  return { ...sink, metrics: (s, m) => sink.metrics(s, sftKeys(m)) };
}

/** SFT step metrics under sft/* only (its throughput too, so it is not drawn on the RL curve). */
export function sftKeys(m: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k.startsWith('sft/') ? k : `sft/${k.replace(/^perf\//, '')}`, v]));
}

/** The SFT model's held-out metrics as an RL run records them: sft/eval/* (its "before RL" column). */
export function beforeRlMetrics(evalMetrics: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(evalMetrics).map(([k, v]) => [`sft/eval/${k}`, v]));
}
