/**
 * Supervised warm start (the first stage of Chain-of-Agents-style training): next-token
 * cross-entropy on demonstration trajectories, with loss only on the model's own tokens
 * (lossMask = 1); prompts, tool observations and environment text are context only.
 *
 * Demonstrations come from the scripted expert (engine/env) or from a user JSONL file
 * (`sft.demos_path`), one demonstration per line, as token ids (the source of truth; text is
 * never re-tokenised):
 *  - a trajectory as `arbor rollout` writes it: { "promptIds": number[], "turns": [{ "role":
 *    "model" | "tool" | "env", "tokenIds": number[], … }], … }; loss on the model turns' tokens;
 *  - or { "tokens": number[], "loss_mask": (0 | 1)[] }.
 * Chat-style { "messages": [...] } lines are not accepted (they would need re-tokenising with a
 * template that may not match the task's prompts and observations); the error says what to give.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { ExperimentConfig } from '../config/experiment';
import { bestCheckpoint, listCheckpoints, markBest, readBest, saveCheckpoint, type BestMark, type CheckpointInfo } from './checkpoints';
import { mulberry32, shuffled } from '../base/rng';
import { chunks, stepSeed } from './episode';
import type { SinkPort } from './loop';

/** What SFT reads of the experiment config: its section, the seed (batch order) and how many checkpoints to keep. */
export type SftSettings = Pick<ExperimentConfig, 'sft' | 'seed'> & { checkpoint: Pick<ExperimentConfig['checkpoint'], 'keep'> };

export interface Demo {
  tokens: Int32Array;
  lossMask: Uint8Array;
}

export interface SftPort {
  /** One optimizer step of masked next-token cross-entropy (token-mean over the batch). */
  sftUpdate(batch: Demo[], lr: number): Promise<{ loss: number; gradNorm: number; tokens: number; accuracy?: number }>;
  save(dir: string): Promise<void>;
}

const TURN_ROLES = ['model', 'tool', 'env'];

/** Why `v` is not a list of token ids (integers in [0, vocabSize)), or undefined if it is. */
function tokenIdsProblem(v: unknown, vocabSize?: number): string | undefined {
  if (!Array.isArray(v)) return `expected an array of token ids, got ${v === undefined ? 'nothing' : JSON.stringify(v).slice(0, 40)}`;
  for (let j = 0; j < v.length; j++) {
    const x = v[j];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0) return `[${j}] is ${JSON.stringify(x)}, not a token id (an integer ≥ 0)`;
    if (vocabSize !== undefined && x >= vocabSize)
      return `[${j}] is token id ${x}, outside the model's vocabulary (${vocabSize} ids); were these demos tokenised for another model?`;
  }
  return undefined;
}

/** One JSONL row as a demo; errors are thrown as "<field>: <problem>". */
function rowToDemo(row: unknown, vocabSize?: number): Demo {
  if (row === null || typeof row !== 'object' || Array.isArray(row)) throw new Error(`expected a JSON object, got ${JSON.stringify(row).slice(0, 40)}`);
  const r = row as Record<string, unknown>;
  const check = (field: string, v: unknown) => {
    const p = tokenIdsProblem(v, vocabSize);
    if (p) throw new Error(`${field}: ${p}`);
    return v as number[];
  };
  if ('turns' in r || 'promptIds' in r) {
    const prompt = check('promptIds', r.promptIds);
    if (!Array.isArray(r.turns))
      throw new Error(`turns: expected an array of turns ({role, tokenIds}), got ${JSON.stringify(r.turns)?.slice(0, 40) ?? 'nothing'}`);
    const tokens = prompt.slice();
    const mask: number[] = prompt.map(() => 0);
    r.turns.forEach((u: unknown, i: number) => {
      if (u === null || typeof u !== 'object') throw new Error(`turns[${i}]: expected an object {role, tokenIds}`);
      const turn = u as Record<string, unknown>;
      if (typeof turn.role !== 'string' || !TURN_ROLES.includes(turn.role))
        throw new Error(`turns[${i}].role: got ${JSON.stringify(turn.role) ?? 'nothing'}; allowed values: ${TURN_ROLES.map((x) => `"${x}"`).join(', ')}`);
      const ids = check(`turns[${i}].tokenIds`, turn.tokenIds);
      tokens.push(...ids);
      for (let k = 0; k < ids.length; k++) mask.push(turn.role === 'model' ? 1 : 0);
    });
    return { tokens: Int32Array.from(tokens), lossMask: Uint8Array.from(mask) };
  }
  if ('tokens' in r || 'loss_mask' in r) {
    const tokens = check('tokens', r.tokens);
    if (!Array.isArray(r.loss_mask)) throw new Error(`loss_mask: expected an array of 0/1, got ${JSON.stringify(r.loss_mask)?.slice(0, 40) ?? 'nothing'}`);
    const bad = r.loss_mask.findIndex((x) => x !== 0 && x !== 1);
    if (bad >= 0) throw new Error(`loss_mask: [${bad}] is ${JSON.stringify(r.loss_mask[bad])}, not 0 or 1`);
    if (tokens.length !== r.loss_mask.length) throw new Error(`loss_mask: tokens (${tokens.length}) and loss_mask (${r.loss_mask.length}) differ in length`);
    return { tokens: Int32Array.from(tokens), lossMask: Uint8Array.from(r.loss_mask as number[]) };
  }
  if ('messages' in r)
    throw new Error(
      'messages: chat-message demonstrations are not supported (they would be re-tokenised); give token ids: a trajectory written by `arbor rollout` ({"promptIds", "turns"}) or {"tokens", "loss_mask"}',
    );
  throw new Error(
    `expected a trajectory written by \`arbor rollout\` ({"promptIds", "turns"}) or {"tokens": number[], "loss_mask": number[]}; got fields ${
      Object.keys(r)
        .map((k) => `"${k}"`)
        .join(', ') || '(none)'
    }`,
  );
}

/**
 * Read demonstrations from JSONL (see the header for the accepted shapes). A bad line is reported
 * as `<file>:<line>: <field>: <problem>`. With `vocabSize`, token ids must be below it.
 */
export function readTokenDemos(file: string, opts: { vocabSize?: number } = {}): Demo[] {
  if (!existsSync(file)) throw new Error(`sft.demos_path: file not found: ${file}`);
  const out: Demo[] = [];
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (!line.trim()) return;
      let row: unknown;
      try {
        row = JSON.parse(line);
      } catch (e) {
        throw new Error(`${file}:${i + 1}: not JSON (${(e as Error).message})`);
      }
      try {
        out.push(rowToDemo(row, opts.vocabSize));
      } catch (e) {
        throw new Error(`${file}:${i + 1}: ${(e as Error).message}`);
      }
    });
  if (out.length === 0) throw new Error(`${file}: no demonstrations`);
  return out;
}

export interface SftResult {
  /** Last finished step (counting steps done before a resume). */
  steps: number;
  /** Steps of the whole phase (epochs × batches per epoch). */
  total: number;
  /** Whether every step ran (false when the signal stopped SFT early). */
  complete: boolean;
  finalLoss: number;
  /** The checkpoint of the last step (or of the stop). */
  checkpoint?: CheckpointInfo;
  /**
   * With sft.keep_best: the step with the best validation exact match, whose checkpoint the policy
   * was loaded from at the end (when it is not the last step).
   */
  best?: BestMark & { dir: string };
  /**
   * The validation split's scores (sft.eval_every) of the step SFT hands on: the best step's with
   * sft.keep_best, else the last scored step's (absent without a validation split, or on a resume
   * that scored nothing).
   */
  validation?: { step: number; metrics: Record<string, number> };
}

/** Number of SFT steps for a demo set: epochs × ceil(demos / batch_size). */
export function sftTotalSteps(cfg: { sft: Pick<ExperimentConfig['sft'], 'batch_size' | 'epochs'> }, demos: number): number {
  return Math.ceil(demos / cfg.sft.batch_size) * cfg.sft.epochs;
}

/**
 * SFT epochs over the demos in shuffled batches; lr warms up over 10% of steps then decays by cosine.
 *
 * `startStep` continues a stopped SFT (after the caller loaded the checkpoint of that step, with
 * its optimizer state): the batch order derives from (seed, epoch), so steps 1…startStep are
 * skipped and the rest run exactly as they would have. The checkpoint records `complete`.
 */
export async function runSft(
  cfg: SftSettings,
  demos: Demo[],
  port: SftPort,
  opts: {
    runDir?: string;
    sink?: SinkPort;
    signal?: AbortSignal;
    /** Awaited before every step (Pause). */
    beforeStep?: () => Promise<void>;
    startStep?: number;
    onStep?: (step: number, total: number, m: Record<string, number>) => void;
    /**
     * The validation split's metrics for the current policy (sft.eval_every; the session's
     * `validate`). Required when sft.eval_every > 0; with sft.keep_best, `loadPolicy` and `runDir` too.
     */
    validate?: () => Promise<Record<string, number>>;
    loadPolicy?: (dir: string) => Promise<void>;
  },
): Promise<SftResult> {
  const every = cfg.sft.eval_every;
  if (every > 0 && !opts.validate) throw new Error('sft.eval_every: this job has no validation split to score (set eval.validation)');
  const keepBest = every > 0 && cfg.sft.keep_best;
  const stopAt = every > 0 ? cfg.sft.stop_at : undefined;
  let reached = false;
  if (keepBest && (!opts.runDir || !opts.loadPolicy)) throw new Error('sft.keep_best: this job keeps no SFT checkpoints to choose from');
  // On a resume the best so far is the one the stopped SFT marked.
  let best: (BestMark & { dir: string }) | undefined;
  // The validation scores of the last scored step and of the best one (the check between SFT and RL reads them).
  let lastVal: { step: number; metrics: Record<string, number> } | undefined;
  let bestVal: { step: number; metrics: Record<string, number> } | undefined;
  const marked = keepBest && opts.runDir ? readBest(opts.runDir) : undefined;
  const markedDir = marked && bestCheckpoint(opts.runDir!)?.dir;
  if (marked && markedDir) best = { ...marked, dir: markedDir };
  const perEpoch = Math.ceil(demos.length / cfg.sft.batch_size);
  const total = perEpoch * cfg.sft.epochs;
  const warm = Math.max(1, Math.round(total * 0.1));
  const start = Math.min(total, Math.max(0, opts.startStep ?? 0));
  let step = 0;
  let finalLoss = NaN;
  run: for (let epoch = 0; epoch < cfg.sft.epochs; epoch++) {
    if ((epoch + 1) * perEpoch <= start) {
      step += perEpoch;
      continue;
    }
    const order = shuffled(demos, mulberry32(stepSeed(cfg.seed, epoch, 2000)));
    for (const batch of chunks(order, perEpoch)) {
      if (step < start) {
        step++;
        continue;
      }
      await opts.beforeStep?.();
      if (opts.signal?.aborted) break run;
      step++;
      const lr =
        step <= warm
          ? (cfg.sft.lr * step) / warm
          : cfg.sft.schedule === 'constant'
            ? cfg.sft.lr
            : cfg.sft.lr * (0.1 + 0.45 * (1 + Math.cos((Math.PI * (step - warm)) / Math.max(1, total - warm))));
      const t0 = performance.now();
      const r = await port.sftUpdate(batch, lr);
      const secs = (performance.now() - t0) / 1000;
      finalLoss = r.loss;
      const m: Record<string, number> = {
        'sft/loss': r.loss,
        'sft/grad_norm': r.gradNorm,
        'sft/lr': lr,
        'sft/epoch': epoch,
        'perf/tokens_per_s': r.tokens / Math.max(1e-9, secs),
        'sft/time_s': secs,
      };
      if (r.accuracy !== undefined) m['sft/token_accuracy'] = r.accuracy;
      if (every > 0 && (step % every === 0 || step === total)) {
        const v = await opts.validate!();
        for (const [k, x] of Object.entries(v)) m[`sft/val/${k}`] = x;
        lastVal = { step, metrics: v };
        // sft.stop_at: the warm start ends here (its checkpoint below is a finished SFT).
        reached = stopAt !== undefined && (v.exact_match ?? -Infinity) >= stopAt;
        // Ties go to the later step (more trained), so a run whose scores are all 0 goes on from its last.
        if (keepBest && Number.isFinite(v.exact_match) && (best === undefined || v.exact_match! >= best.value)) {
          // Saved now (an SFT checkpoint that is not complete: a resume from it continues SFT), marked, never pruned.
          const done = step === total || reached;
          const c = await saveCheckpoint(
            opts.runDir!,
            { step, phase: 'sft', seed: cfg.seed, complete: done, total },
            (dir) => port.save(dir),
            cfg.checkpoint.keep,
          );
          const mark: BestMark = { step, metric: 'exact_match', value: v.exact_match! };
          markBest(opts.runDir!, mark, cfg.checkpoint.keep);
          best = { ...mark, dir: c.dir };
          bestVal = { step, metrics: v };
          opts.sink?.event?.('sft_best', { step, value: best.value, dir: c.dir });
        }
      }
      await opts.sink?.metrics(step, m);
      opts.onStep?.(step, total, m);
      if (reached) {
        opts.sink?.event?.('sft_stop_at', { step, value: m['sft/val/exact_match'], stopAt });
        break run;
      }
    }
  }
  const complete = step === total || reached;
  let checkpoint: CheckpointInfo | undefined;
  if (opts.runDir) {
    // The best step's checkpoint, when it is this step, is already saved.
    checkpoint =
      best?.step === step
        ? listCheckpoints(opts.runDir).find((c) => c.step === step)
        : await saveCheckpoint(opts.runDir, { step, phase: 'sft', seed: cfg.seed, complete, total }, (dir) => port.save(dir), cfg.checkpoint.keep);
    if (checkpoint) opts.sink?.event?.('checkpoint', { step, dir: checkpoint.dir });
  }
  // The run goes on from the best validation step (RL, the "SFT alone" evaluation).
  if (complete && best && best.step !== step) await opts.loadPolicy!(best.dir);
  const validation = complete && best ? (bestVal?.step === best.step ? bestVal : undefined) : lastVal?.step === step ? lastVal : undefined;
  return { steps: step, total, complete, finalLoss, checkpoint, ...(complete && best ? { best } : {}), ...(validation ? { validation } : {}) };
}
