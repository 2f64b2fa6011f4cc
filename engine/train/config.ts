/**
 * The experiment configuration: one schema (zod) for YAML and JSON files, the CLI, the run
 * templates registry and the UI's generated form (via `experimentJsonSchema()`).
 *
 * Every field has a default except what cannot be guessed, so a config with all defaults is short:
 *
 *   model: { init: tiny }
 *   task: { kind: multihop }
 *
 * Errors name the field (dotted path) and, for choices, the allowed values; unknown fields are
 * rejected (strict objects everywhere) so a typo never silently falls back to a default.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, isAbsolute, join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { FORMAT_NAMES } from '../env/formats';

export const ADV_ESTIMATORS = ['grpo', 'drgrpo', 'rloo', 'reinforce_pp', 'reinforce_pp_baseline', 'gae'] as const;
export const LOSS_AGG_MODES = ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum', 'seq-mean-token-sum-norm'] as const;
export const KL_TYPES = ['k1', 'k3'] as const;
export const KL_PLACEMENTS = ['loss', 'reward'] as const;
export const SCHEDULES = ['cosine', 'constant'] as const;
export const BACKENDS = ['ort', 'tfjs'] as const;
/** ONNX Runtime devices (engine/tensor/ort.ts resolveProviders). */
export const DEVICES = ['auto', 'cpu', 'cuda', 'dml', 'coreml'] as const;
/** Task kinds (engine/train/tasks.ts registry): multihop (built-in world), qa (a QA dataset + BM25 search), custom (environment.tasks + your tools), tools (the built-in lookup + calculator task). */
export const TASK_KINDS = ['multihop', 'qa', 'custom', 'tools'] as const;
/** The policy loss: PPO-clip (with clip-higher and dual clip). GSPO's sequence-level ratio is not implemented, so it is not accepted. */
export const POLICY_LOSSES = ['ppo'] as const;

const posInt = () => z.number().int().positive();
const nonNegInt = () => z.number().int().nonnegative();
const nonNeg = () => z.number().nonnegative();
const prob = () => z.number().min(0).max(1);

const modelSchema = z
  .strictObject({
    /** An HF model folder (config.json, model.safetensors, tokenizer.json). */
    path: z.string().min(1).optional().describe('HF model folder (config.json + model.safetensors + tokenizer.json)'),
    /** Build the tiny built-in model for the task instead of loading a folder. */
    init: z.enum(['tiny']).optional().describe('build the tiny built-in model for the task'),
    /** Size overrides for the tiny model. */
    hidden_size: posInt().optional(),
    layers: posInt().optional(),
  })
  .refine((m) => (m.path === undefined) !== (m.init === undefined), {
    message: 'give exactly one of model.path (an HF folder) or model.init: tiny',
  });

const taskSchema = z.strictObject({
  kind: z.enum(TASK_KINDS).default('multihop'),
  /** Seed of the world the agent trains on. */
  train_seed: nonNegInt().default(1),
  /** Seed of the held-out world used for evaluation (different entities and facts). */
  eval_seed: nonNegInt().default(1001),
  /** Question hop counts for training, demonstrations and evaluation. */
  hops: z.array(z.number().int().min(1).max(4)).min(1).default([1, 2]),
  /** Hop counts of the RL training questions, if different from `hops` (e.g. RL on the harder 2-hop questions only). */
  rl_hops: z.array(z.number().int().min(1).max(4)).min(1).optional(),
  /** task.kind "qa": a JSONL file of questions ({question, answers | answer, context?, supporting_facts?}; HotpotQA style). */
  dataset: z.string().min(1).optional(),
});

const rolloutSchema = z.strictObject({
  prompts_per_step: posInt().default(8).describe('prompts (groups) per training step'),
  n: posInt().default(8).describe('samples per prompt (group size)'),
  temperature: z.number().positive().max(10).default(1.0),
  top_p: z.number().gt(0).max(1).default(1.0),
  max_turns: posInt().default(4),
  max_new_tokens: posInt().default(32).describe('per model turn'),
  max_total_length: posInt().default(384).describe('prompt + all turns, in tokens'),
});

const algorithmSchema = z.strictObject({
  adv_estimator: z.enum(ADV_ESTIMATORS).default('grpo'),
  /** GRPO: divide by the group std (false = Dr.GRPO behaviour). */
  norm_adv_by_std: z.boolean().default(true),
  policy_loss: z.enum(POLICY_LOSSES).default('ppo'),
  loss_agg_mode: z.enum(LOSS_AGG_MODES).default('token-mean'),
  clip_ratio_low: nonNeg().max(1).default(0.2),
  clip_ratio_high: nonNeg().default(0.28),
  /** Dual-clip constant c (> 1); null disables dual clip. */
  dual_clip: z.number().gt(1).nullable().default(null),
  kl_coef: nonNeg().default(0),
  kl_type: z.enum(KL_TYPES).default('k3'),
  kl_in: z.enum(KL_PLACEMENTS).default('loss'),
  entropy_coef: z.number().default(0),
  gamma: prob().default(1.0),
  lam: prob().default(1.0),
  value_clip: nonNeg().default(0.2),
  /** PPO critic: scale of the value loss whose gradient the critic's optimizer gets (before grad_clip). */
  value_coef: nonNeg().default(0.5),
  ppo_epochs: posInt().default(1),
  mini_batches: posInt().default(1),
  micro_batches: posInt().default(1),
  dynamic_sampling: z
    .strictObject({
      enabled: z.boolean().default(false),
      /** Extra rollout rounds allowed to refill the batch. */
      max_rounds: posInt().default(3),
    })
    .prefault({}),
  overlong: z
    .strictObject({
      enabled: z.boolean().default(false),
      /** Soft-penalty buffer in model tokens before the response budget, min(max_turns × max_new_tokens, max_total_length − prompt). */
      buffer: posInt().default(64),
      penalty: nonNeg().default(1),
    })
    .prefault({}),
  process_rewards: z.boolean().default(false),
});

const optimSchema = z.strictObject({
  lr: z.number().positive().default(1e-3),
  warmup_steps: nonNegInt().default(2),
  schedule: z.enum(SCHEDULES).default('constant'),
  min_lr_ratio: prob().default(0.1),
  weight_decay: nonNeg().default(0),
  beta1: prob().default(0.9),
  beta2: prob().default(0.999),
  grad_clip: nonNeg().default(1.0).describe('max global grad norm; 0 disables'),
});

const sftSchema = z.strictObject({
  /** `arbor train` / the run template: run the SFT warm start before RL (the demo always does). */
  warm_start: z.boolean().default(false),
  epochs: posInt().default(3),
  lr: z.number().positive().default(3e-3),
  batch_size: posInt().default(16),
  /** Number of scripted-expert demonstrations to generate (ignored when demos_path is set). */
  demos: posInt().default(300),
  /** Fraction of expert demos that contain a recovered mistake. */
  mistake_rate: prob().default(0.25),
  /** JSONL file of demonstrations as token ids: `arbor rollout` trajectories or {tokens, loss_mask} (engine/train/sft.ts). */
  demos_path: z.string().min(1).optional(),
});

const evalSchema = z.strictObject({
  every: nonNegInt().default(10).describe('evaluate every N steps; 0 = only at the end'),
  n_questions: posInt().default(64),
  temperature: nonNeg().default(0).describe('0 = greedy'),
});

const loggingSchema = z.strictObject({
  /** Keep full trajectories (turns, per-token arrays) for every Nth step; summaries are kept for all. */
  full_trajectories_every: posInt().default(1),
});

/**
 * The episode environment (engine/env ToolEnv): the tool-call format, the researcher's own
 * TypeScript tool and reward files (the Tool / reward API of engine/env, run in the sandbox),
 * a task file, and the limits every path (training, rollout, eval, playground) applies. Paths
 * are relative to the config file.
 */
const environmentSchema = z.strictObject({
  /** Tool-call format (engine/env/formats.ts registry): search-r1 (<search>), hermes (<tool_call> JSON, chat template), tags (<toolname>). */
  format: z.enum(FORMAT_NAMES).default('search-r1').describe('tool-call format: search-r1, hermes (Qwen <tool_call> JSON) or tags (<toolname>)'),
  /** Tool files, any number, any tool names (each exports Tool objects); they join the task's built-in tools (a same-named one replaces it). */
  tools: z.array(z.string().min(1)).default([]),
  /** Reward file: exports `reward(episode)` (or default) → a number or { reward, components?, steps? } (steps: one per tool call, used by algorithm.process_rewards). */
  reward: z.string().min(1).optional(),
  /** task.kind "custom": a JSONL task file, one {id, prompt | messages, answers?, meta?} per line (QA rows {question, answers, context?} too). */
  tasks: z.string().min(1).optional(),
  /** Folder tools may read through ctx.readFile (read-only); default: the config file's folder. */
  workspace: z.string().min(1).optional(),
  /** Most tool calls run from one model turn (search-r1: queries of one search); the rest get an error. */
  max_calls_per_turn: posInt().max(16).default(2),
  /** Per-call time limit; ctx.signal aborts when it passes. */
  tool_timeout_ms: posInt().default(5000),
  /** Tool results of one turn are cut to this many tokens in all. */
  max_observation_tokens: posInt().default(256),
});

const checkpointSchema = z.strictObject({
  every: posInt().default(5),
  keep: posInt().default(2),
});

export const experimentSchema = z.strictObject({
  name: z.string().min(1).optional(),
  model: modelSchema,
  task: taskSchema.prefault({}),
  steps: posInt().default(40).describe('training steps (one rollout batch each)'),
  rollout: rolloutSchema.prefault({}),
  algorithm: algorithmSchema.prefault({}),
  optim: optimSchema.prefault({}),
  sft: sftSchema.prefault({}),
  eval: evalSchema.prefault({}),
  checkpoint: checkpointSchema.prefault({}),
  logging: loggingSchema.prefault({}),
  environment: environmentSchema.prefault({}),
  seed: nonNegInt().default(0),
  backend: z.enum(BACKENDS).default('ort'),
  /** ONNX Runtime device: auto = CUDA (or DirectML/CoreML) when its provider loads, else CPU. */
  device: z.enum(DEVICES).default('auto'),
  threads: posInt().max(256).default(2),
});

export type ExperimentConfig = z.infer<typeof experimentSchema>;
export type ExperimentInput = z.input<typeof experimentSchema>;

/** A config error: `field` is the dotted path, `message` says what is wrong and what is allowed. */
export class ConfigError extends Error {
  constructor(
    readonly issues: { field: string; message: string }[],
    readonly file?: string,
  ) {
    super(
      (file ? `invalid config ${file}:\n` : 'invalid config:\n') +
        issues.map((i) => `  ${i.field || '(root)'}: ${i.message}`).join('\n'),
    );
    this.name = 'ConfigError';
  }
}

function describeIssue(issue: z.core.$ZodIssue, input: unknown): string {
  const got = valueAt(input, issue.path);
  const gotText = got === undefined ? 'nothing' : JSON.stringify(got);
  switch (issue.code) {
    case 'unrecognized_keys':
      return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
    case 'invalid_value':
      return `got ${gotText}; allowed values: ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_type':
      return got === undefined ? `required (${issue.expected})` : `expected ${issue.expected}, got ${gotText}`;
    case 'too_small': {
      const min = Number(issue.minimum);
      if (issue.origin === 'number' && min === 0 && !issue.inclusive) return `must be positive, got ${gotText}`;
      if (issue.origin === 'number') return `must be ${issue.inclusive ? '≥' : '>'} ${min}, got ${gotText}`;
      return `must have at least ${min} ${issue.origin === 'string' ? 'characters' : 'items'}`;
    }
    case 'too_big':
      return `must be ${issue.inclusive ? '≤' : '<'} ${String(issue.maximum)}, got ${gotText}`;
    default:
      return `${issue.message}${got !== undefined ? ` (got ${gotText})` : ''}`;
  }
}

function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let cur: unknown = input;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[p];
  }
  return cur;
}

function fieldName(path: PropertyKey[], issue: z.core.$ZodIssue): string {
  const base = path.map(String).join('.');
  if (issue.code === 'unrecognized_keys' && issue.keys.length === 1) return base ? `${base}.${issue.keys[0]}` : issue.keys[0]!;
  return base;
}

/**
 * Validate a parsed object. Relative paths (model.path, task.dataset, sft.demos_path) are resolved
 * against `baseDir`; folders and files named by the config must exist (checked here, so a missing
 * model folder fails before any work starts).
 */
export function validateConfig(input: unknown, opts: { baseDir?: string; file?: string; checkFiles?: boolean } = {}): ExperimentConfig {
  const res = experimentSchema.safeParse(input);
  if (!res.success) {
    throw new ConfigError(
      res.error.issues.map((i) => ({ field: fieldName(i.path, i), message: describeIssue(i, input) })),
      opts.file,
    );
  }
  const cfg = res.data;
  const baseDir = opts.baseDir ?? process.cwd();
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));
  if (cfg.model.path) cfg.model.path = abs(cfg.model.path);
  if (cfg.task.dataset) cfg.task.dataset = abs(cfg.task.dataset);
  if (cfg.sft.demos_path) cfg.sft.demos_path = abs(cfg.sft.demos_path);
  const env = cfg.environment;
  env.tools = env.tools.map(abs);
  if (env.reward) env.reward = abs(env.reward);
  if (env.tasks) env.tasks = abs(env.tasks);
  env.workspace = abs(env.workspace ?? '.');
  const issues: { field: string; message: string }[] = [];
  if (cfg.task.kind === 'custom' && !env.tasks) issues.push({ field: 'environment.tasks', message: 'required for task.kind "custom" (a JSONL file of {id, prompt | messages, answers?, meta?})' });
  if (cfg.task.kind !== 'custom' && cfg.task.kind !== 'tools' && env.tasks) issues.push({ field: 'environment.tasks', message: `a task file is read by task.kind "custom" or "tools" (got task.kind "${cfg.task.kind}")` });
  if (cfg.algorithm.mini_batches > cfg.rollout.prompts_per_step * cfg.rollout.n)
    issues.push({ field: 'algorithm.mini_batches', message: `must be ≤ rollout.prompts_per_step × rollout.n = ${cfg.rollout.prompts_per_step * cfg.rollout.n}` });
  if (cfg.task.kind === 'qa' && !cfg.task.dataset) issues.push({ field: 'task.dataset', message: 'required for task.kind "qa" (a JSONL file of questions)' });
  for (const h of cfg.task.rl_hops ?? [])
    if (!cfg.task.hops.includes(h)) issues.push({ field: 'task.rl_hops', message: `${h} is not one of task.hops (${cfg.task.hops.join(', ')}); RL questions are drawn from the training questions` });
  if (cfg.rollout.max_new_tokens >= cfg.rollout.max_total_length)
    issues.push({ field: 'rollout.max_new_tokens', message: `must be < rollout.max_total_length (${cfg.rollout.max_total_length})` });
  const responseMax = Math.min(cfg.rollout.max_turns * cfg.rollout.max_new_tokens, cfg.rollout.max_total_length);
  if (cfg.algorithm.overlong.enabled && cfg.algorithm.overlong.buffer >= responseMax)
    issues.push({
      field: 'algorithm.overlong.buffer',
      message: `must be < the response budget min(rollout.max_turns × rollout.max_new_tokens, rollout.max_total_length) = ${responseMax}`,
    });
  if (opts.checkFiles !== false) {
    if (cfg.model.path) {
      if (!existsSync(cfg.model.path) || !statSync(cfg.model.path).isDirectory())
        issues.push({ field: 'model.path', message: `model folder not found: ${cfg.model.path}` });
      else if (!existsSync(join(cfg.model.path, 'config.json')))
        issues.push({ field: 'model.path', message: `not an HF model folder (no config.json): ${cfg.model.path}` });
    }
    if (cfg.task.dataset && !existsSync(cfg.task.dataset))
      issues.push({ field: 'task.dataset', message: `file not found: ${cfg.task.dataset}` });
    if (cfg.sft.demos_path && !existsSync(cfg.sft.demos_path))
      issues.push({ field: 'sft.demos_path', message: `file not found: ${cfg.sft.demos_path}` });
    env.tools.forEach((f, i) => existsSync(f) || issues.push({ field: `environment.tools[${i}]`, message: `file not found: ${f}` }));
    if (env.reward && !existsSync(env.reward)) issues.push({ field: 'environment.reward', message: `file not found: ${env.reward}` });
    if (env.tasks && !existsSync(env.tasks)) issues.push({ field: 'environment.tasks', message: `file not found: ${env.tasks}` });
  }
  if (issues.length) throw new ConfigError(issues, opts.file);
  return cfg;
}

/** Whether the config names user files (tools or a reward) that run in the sandbox. */
export function hasUserFiles(cfg: ExperimentConfig): boolean {
  return cfg.environment.tools.length > 0 || cfg.environment.reward !== undefined;
}

/** Parse YAML or JSON text (JSON is YAML, but a .json file gets JSON's stricter parser). */
export function parseConfigText(text: string, file = '<config>'): unknown {
  try {
    return extname(file).toLowerCase() === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new ConfigError([{ field: '', message: `cannot parse ${extname(file) === '.json' ? 'JSON' : 'YAML'}: ${(err as Error).message}` }], file);
  }
}

/** Load, parse and validate a config file; relative paths inside resolve against its folder. */
export function loadConfig(file: string, overrides?: (raw: Record<string, unknown>) => void): ExperimentConfig {
  if (!existsSync(file)) throw new ConfigError([{ field: '', message: `config file not found: ${file}` }], file);
  const raw = parseConfigText(readFileSync(file, 'utf8'), file);
  if (overrides && raw && typeof raw === 'object') overrides(raw as Record<string, unknown>);
  return validateConfig(raw, { baseDir: dirname(resolve(file)), file });
}

/** JSON Schema (draft 2020-12) of the experiment config, for the run templates registry and UI form. */
export function experimentJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(experimentSchema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}
