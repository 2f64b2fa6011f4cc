/**
 * One experiment as a job: optional SFT warm start, then RL, in one run folder. Used by
 * `arbor train` and by the run manager's job kind (so the UI can start / stop / resume runs).
 *
 * Resume: an RL checkpoint wins (the loop resumes from it); otherwise a finished SFT checkpoint
 * in <run>/sft is loaded and SFT is not repeated.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { latestCheckpoint } from './checkpoints';
import type { ExperimentConfig } from './config';
import { runTrainingLoop, type LoopResult, type SinkPort } from './loop';
import { evalMetrics, type TaskSession } from './run';
import { runSft } from './sft';

export interface ExperimentContext {
  runDir: string;
  session: TaskSession;
  sink: SinkPort;
  resume?: boolean;
  signal?: AbortSignal;
  onPhase?: (phase: 'sft' | 'rl' | 'eval', total: number) => void;
  onStep?: (phase: 'sft' | 'rl', step: number, m: Record<string, number>) => void;
}

export interface ExperimentResult {
  sft?: { steps: number; finalLoss: number; checkpoint?: string; skipped?: 'resumed' };
  rl?: LoopResult;
  eval?: Record<string, number>;
}

export async function runExperiment(cfg: ExperimentConfig, ctx: ExperimentContext): Promise<ExperimentResult> {
  const out: ExperimentResult = {};
  const sftDir = join(ctx.runDir, 'sft');
  const hasRl = ctx.resume && latestCheckpoint(ctx.runDir)?.state.phase === 'rl';
  if (cfg.sft.warm_start && !hasRl) {
    const done = ctx.resume ? latestCheckpoint(sftDir) : undefined;
    if (done) {
      await ctx.session.loadPolicy(done.dir);
      out.sft = { steps: done.step, finalLoss: NaN, checkpoint: done.dir, skipped: 'resumed' };
    } else {
      mkdirSync(sftDir, { recursive: true });
      const demos = await ctx.session.demos();
      ctx.onPhase?.('sft', Math.ceil(demos.length / cfg.sft.batch_size) * cfg.sft.epochs);
      const r = await runSft(cfg, demos, ctx.session.sft, {
        runDir: sftDir,
        signal: ctx.signal,
        onStep: (s, _t, m) => ctx.onStep?.('sft', s, m),
      });
      out.sft = { steps: r.steps, finalLoss: r.finalLoss, checkpoint: r.checkpoint?.dir };
      ctx.sink.event?.('sft_done', { steps: r.steps, finalLoss: r.finalLoss });
    }
  }
  if (ctx.signal?.aborted) return out;
  ctx.onPhase?.('rl', cfg.steps);
  out.rl = await runTrainingLoop(cfg, { ...ctx.session.ports, sink: ctx.sink }, {
    runDir: ctx.runDir,
    resume: ctx.resume,
    signal: ctx.signal,
    onStep: (s, m) => ctx.onStep?.('rl', s, m),
  });
  if (out.rl.lastEval) out.eval = out.rl.lastEval;
  else if (!out.rl.stopped) {
    ctx.onPhase?.('eval', 1);
    out.eval = evalMetrics(await ctx.session.evaluate(cfg.eval.n_questions));
  }
  return out;
}
