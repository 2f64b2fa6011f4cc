/**
 * Rollout sources: what `arbor rollout` (and benchmarks, baselines) need for a named task —
 * the task list, stop strings/tokens, the tokenizer, and either a model (DecodeBackend) or a
 * text policy (the scripted expert). Tasks register an opener here, so this module knows no task.
 */
import type { DecodeBackend, RolloutTask, TextPolicy, TokenizerPort } from '../rollout/ports';
import type { RolloutLimits, StopConfig } from '../rollout/engine';

export interface RolloutSourceRequest {
  task: string;
  /** HF model folder to sample from (exclusive with policy). */
  model?: string;
  /** A built-in text policy, e.g. 'expert'. */
  policy?: string;
  /** Number of questions/prompts. */
  questions: number;
  seed: number;
  /** 'tools' (default): the model with the task's tools; 'naive-rag': retrieve once with the question, answer directly. */
  mode?: 'tools' | 'naive-rag';
  /** Task options (hops, world seed, ...). */
  options?: Record<string, unknown>;
  maxBatch?: number;
}

export interface RolloutSource {
  tasks: RolloutTask[];
  stop: StopConfig;
  tokenizer: TokenizerPort;
  /** Default limits for the task (the CLI can override them). */
  limits: RolloutLimits;
  backend?: DecodeBackend;
  policy?: TextPolicy;
  close(): Promise<void>;
}

export type RolloutSourceOpener = (req: RolloutSourceRequest) => Promise<RolloutSource>;

const openers = new Map<string, RolloutSourceOpener>();

export function registerRolloutTask(name: string, open: RolloutSourceOpener): void {
  openers.set(name, open);
}

export function rolloutTaskNames(): string[] {
  return [...openers.keys()].sort();
}

export async function openRolloutSource(req: RolloutSourceRequest): Promise<RolloutSource> {
  const open = openers.get(req.task);
  if (!open) throw new Error(`unknown task "${req.task}" (available: ${rolloutTaskNames().join(', ') || 'none'})`);
  if (!!req.model === !!req.policy) throw new Error('give exactly one of --model <folder> or --policy <name>');
  return open(req);
}
