/**
 * Checkpoint folders of a training run and the resume point.
 *
 * Layout: <runDir>/checkpoints/step-000010/ holds an HF model folder (written by the policy's
 * save) plus `trainer_state.json` (step, optimizer state file names, data cursor). A checkpoint is
 * written into `step-000010.partial/` and renamed only once complete, so a crash (kill -9) during
 * a save never leaves a folder that looks complete. Resume picks the highest complete step.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TrainerState {
  /** Last finished training step (1-based); metrics up to and including it are committed. */
  step: number;
  /** Phase that produced the checkpoint. */
  phase: 'sft' | 'rl';
  /** Seed of the run (steps derive their own seeds from it, so nothing else is needed to resume). */
  seed: number;
  /**
   * SFT checkpoints: whether the phase ran all its steps (false when a stop cut it short, so a
   * resume continues SFT from `step`). Absent in RL checkpoints and in SFT checkpoints written
   * before this flag existed.
   */
  complete?: boolean;
  /** SFT checkpoints: the phase's total number of steps. */
  total?: number;
  /** Free-form extras (e.g. optimizer step count, best eval score). */
  extra?: Record<string, unknown>;
  savedAt: string;
}

const STATE_FILE = 'trainer_state.json';
const STEP_DIR = /^step-(\d{6,})$/;

export function checkpointDirName(step: number): string {
  return `step-${String(step).padStart(6, '0')}`;
}

export interface CheckpointInfo {
  step: number;
  dir: string;
  state: TrainerState;
}

/** Complete checkpoints in a run folder, oldest first. Partial folders are ignored. */
export function listCheckpoints(runDir: string): CheckpointInfo[] {
  const root = join(runDir, 'checkpoints');
  if (!existsSync(root)) return [];
  const out: CheckpointInfo[] = [];
  for (const name of readdirSync(root)) {
    const m = STEP_DIR.exec(name);
    if (!m) continue;
    const dir = join(root, name);
    const stateFile = join(dir, STATE_FILE);
    if (!existsSync(stateFile)) continue;
    try {
      const state = JSON.parse(readFileSync(stateFile, 'utf8')) as TrainerState;
      out.push({ step: state.step, dir, state });
    } catch {
      // A truncated state file means the save did not finish: not a checkpoint.
    }
  }
  return out.sort((a, b) => a.step - b.step);
}

export function latestCheckpoint(runDir: string): CheckpointInfo | undefined {
  const all = listCheckpoints(runDir);
  return all[all.length - 1];
}

/**
 * Save a checkpoint atomically: `writeContents(dir)` fills the folder (model weights, tokenizer,
 * optimizer state), then the trainer state is written and the folder renamed into place.
 * Older checkpoints beyond `keep` are deleted afterwards.
 */
export async function saveCheckpoint(
  runDir: string,
  state: Omit<TrainerState, 'savedAt'>,
  writeContents: (dir: string) => Promise<void> | void,
  keep: number | Retention,
): Promise<CheckpointInfo> {
  const root = join(runDir, 'checkpoints');
  mkdirSync(root, { recursive: true });
  const final = join(root, checkpointDirName(state.step));
  const partial = `${final}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  await writeContents(partial);
  const full: TrainerState = { ...state, savedAt: new Date().toISOString() };
  writeFileSync(join(partial, STATE_FILE), JSON.stringify(full, null, 2));
  rmSync(final, { recursive: true, force: true });
  renameSync(partial, final);
  pruneCheckpoints(runDir, keep);
  return { step: state.step, dir: final, state: full };
}

/**
 * Which checkpoints a run keeps: the newest `keep`, the best (see markBest) and, with `keepEvery`
 * > 0, every one whose step is a multiple of it (so the replay's top-k and What-if find weights
 * near the ones that sampled any step).
 */
export interface Retention {
  keep: number;
  keepEvery: number;
}

/**
 * An RL run's retention (config `checkpoint`): `keep_every` as given (0: off), else about eight
 * checkpoints spread over the run, a multiple of `checkpoint.every` apart.
 */
export function retentionOf(cfg: { steps: number; checkpoint: { every: number; keep: number; keep_every?: number } }): Retention {
  const { every, keep, keep_every } = cfg.checkpoint;
  return { keep, keepEvery: keep_every ?? every * Math.max(1, Math.ceil(cfg.steps / every / 8)) };
}

/** How many checkpoints a run of `steps` keeps at most under `r` (the newest, the spaced ones, the best). */
export function checkpointsKept(steps: number, every: number, r: Retention, keepBest: boolean): number {
  const saved = Math.ceil(steps / every);
  const spaced = r.keepEvery > 0 ? Math.floor(steps / r.keepEvery) : 0;
  return Math.min(saved, r.keep + spaced + (keepBest ? 1 : 0));
}

/** Delete all but the checkpoints `keep` retains (a number: the newest that many), the best one, and any leftover partial folders. */
export function pruneCheckpoints(runDir: string, keep: number | Retention): void {
  const r: Retention = typeof keep === 'number' ? { keep, keepEvery: 0 } : keep;
  const root = join(runDir, 'checkpoints');
  if (!existsSync(root)) return;
  for (const name of readdirSync(root)) if (name.endsWith('.partial')) rmSync(join(root, name), { recursive: true, force: true });
  const best = readBest(runDir)?.step;
  const all = listCheckpoints(runDir);
  for (const c of all.slice(0, Math.max(0, all.length - r.keep)))
    if (c.step !== best && !(r.keepEvery > 0 && c.step % r.keepEvery === 0)) rmSync(c.dir, { recursive: true, force: true });
}

const BEST_FILE = 'best.json';

/** The best checkpoint by held-out score: which step, by which metric, with what value. */
export interface BestMark {
  step: number;
  metric: string;
  value: number;
}

export function readBest(runDir: string): BestMark | undefined {
  const f = join(runDir, 'checkpoints', BEST_FILE);
  if (!existsSync(f)) return undefined;
  try {
    return JSON.parse(readFileSync(f, 'utf8')) as BestMark;
  } catch {
    return undefined;
  }
}

/** Name the checkpoint at `mark.step` the best (it must exist); the one it replaces is pruned like any other. */
export function markBest(runDir: string, mark: BestMark, keep: number | Retention): void {
  const root = join(runDir, 'checkpoints');
  if (!existsSync(join(root, checkpointDirName(mark.step), STATE_FILE))) throw new Error(`no checkpoint at step ${mark.step} in ${root} to mark as the best`);
  writeFileSync(join(root, `${BEST_FILE}.partial`), JSON.stringify(mark, null, 2));
  renameSync(join(root, `${BEST_FILE}.partial`), join(root, BEST_FILE));
  pruneCheckpoints(runDir, keep);
}

/** The best checkpoint by held-out score, when the run kept one and its folder exists. */
export function bestCheckpoint(runDir: string): CheckpointInfo | undefined {
  const b = readBest(runDir);
  return b ? listCheckpoints(runDir).find((c) => c.step === b.step) : undefined;
}
