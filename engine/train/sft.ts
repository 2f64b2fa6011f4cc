/**
 * Supervised warm start (the first stage of Chain-of-Agents-style training): next-token
 * cross-entropy on demonstration trajectories, with loss only on the model's own tokens
 * (lossMask = 1); prompts, tool observations and environment text are context only.
 *
 * Demonstrations come from the scripted expert (engine/env) or from a user JSONL file, one
 * trajectory per line: { "tokens": number[], "loss_mask": number[] } (token ids, the source of
 * truth) or { "messages": [...] } rendered by the task's chat template through the wiring.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { ExperimentConfig } from './config';
import { saveCheckpoint, type CheckpointInfo } from './checkpoints';
import { chunks, mulberry32, shuffled, stepSeed } from './episode';
import type { SinkPort } from './loop';

export interface Demo {
  tokens: Int32Array;
  lossMask: Uint8Array;
}

export interface SftPort {
  /** One optimizer step of masked next-token cross-entropy (token-mean over the batch). */
  sftUpdate(batch: Demo[], lr: number): Promise<{ loss: number; gradNorm: number; tokens: number; accuracy?: number }>;
  save(dir: string): Promise<void>;
}

/** Read token-level demonstrations from JSONL; each bad line is reported by its line number. */
export function readTokenDemos(file: string): Demo[] {
  if (!existsSync(file)) throw new Error(`sft.demos_path: file not found: ${file}`);
  const out: Demo[] = [];
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (!line.trim()) return;
      let row: { tokens?: unknown; loss_mask?: unknown };
      try {
        row = JSON.parse(line);
      } catch (e) {
        throw new Error(`${file}:${i + 1}: not JSON (${(e as Error).message})`);
      }
      if (!Array.isArray(row.tokens) || !Array.isArray(row.loss_mask))
        throw new Error(`${file}:${i + 1}: expected {"tokens": number[], "loss_mask": number[]}`);
      if (row.tokens.length !== row.loss_mask.length)
        throw new Error(`${file}:${i + 1}: tokens (${row.tokens.length}) and loss_mask (${row.loss_mask.length}) differ in length`);
      out.push({ tokens: Int32Array.from(row.tokens as number[]), lossMask: Uint8Array.from(row.loss_mask as number[]) });
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
  checkpoint?: CheckpointInfo;
}

/** Number of SFT steps for a demo set: epochs × ceil(demos / batch_size). */
export function sftTotalSteps(cfg: ExperimentConfig, demos: number): number {
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
  cfg: ExperimentConfig,
  demos: Demo[],
  port: SftPort,
  opts: { runDir?: string; sink?: SinkPort; signal?: AbortSignal; startStep?: number; onStep?: (step: number, total: number, m: Record<string, number>) => void },
): Promise<SftResult> {
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
      if (opts.signal?.aborted) break run;
      step++;
      const lr = step <= warm ? (cfg.sft.lr * step) / warm : cfg.sft.lr * (0.1 + 0.45 * (1 + Math.cos((Math.PI * (step - warm)) / Math.max(1, total - warm))));
      const t0 = performance.now();
      const r = await port.sftUpdate(batch, lr);
      const secs = (performance.now() - t0) / 1000;
      finalLoss = r.loss;
      const m: Record<string, number> = { 'sft/loss': r.loss, 'sft/grad_norm': r.gradNorm, 'sft/lr': lr, 'sft/epoch': epoch, 'perf/tokens_per_s': r.tokens / Math.max(1e-9, secs) };
      if (r.accuracy !== undefined) m['sft/token_accuracy'] = r.accuracy;
      await opts.sink?.metrics(step, m);
      opts.onStep?.(step, total, m);
    }
  }
  const complete = step === total;
  let checkpoint: CheckpointInfo | undefined;
  if (opts.runDir) {
    checkpoint = await saveCheckpoint(opts.runDir, { step, phase: 'sft', seed: cfg.seed, complete, total }, (dir) => port.save(dir), cfg.checkpoint.keep);
    opts.sink?.event?.('checkpoint', { step, dir: checkpoint.dir });
  }
  return { steps: step, total, complete, finalLoss, checkpoint };
}
