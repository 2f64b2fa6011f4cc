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
import { mcpServersSchema, mcpServersSource, withServerCwds } from '../env/mcp/config';
import { ModelNotCachedError, resolveModelRef } from '../hub/cache';
import { LORA_TARGETS } from '../model/lora';
import { QUANT_BLOCK, QUANT_MODES } from '../model/quantize';
import { estimatorNames, getEstimator } from '../rl/index';
import { KL_ESTIMATORS } from '../rl/kl';
import { AGGREGATION_MODES, getPolicyLoss, policyLossNames } from '../rl/policy-losses';
import { NamedRegistry, type KeyReads } from '../base/registry';
import { BRANCHING_MODES } from '../rollout/branching';
import { ConfigError } from './errors';
import { loadPlugins, pluginLoaded, pluginPaths } from './plugins';

export { ConfigError } from './errors';
/** Load the plugins a parsed config (or a run's stored config.json) names, so validateConfig can read it (asked for, as loadConfig does). */
export { loadPlugins } from './plugins';

/** A registry's names as a zod enum's values (the config accepts exactly what is registered). */
const keysOf = <K extends string>(registry: Record<K, unknown>) => Object.keys(registry) as [K, ...K[]];

/**
 * Fixed choices. The registered ones (advantage estimators, policy losses, tool-call formats, task
 * kinds) are not listed here: configSchema below makes each a choice of its registry's names as
 * they are when a config is validated (the built-in entries and a config's `plugins:`).
 */
export const LOSS_AGG_MODES = AGGREGATION_MODES;
export const KL_TYPES = keysOf(KL_ESTIMATORS);
export const KL_PLACEMENTS = ['loss', 'reward'] as const;
export const SCHEDULES = ['cosine', 'constant'] as const;
export const BACKENDS = ['ort', 'tfjs'] as const;
/** ONNX Runtime devices (engine/tensor/ort.ts resolveProviders). */
export const DEVICES = ['auto', 'cpu', 'cuda', 'webgpu', 'dml', 'coreml'] as const;
/**
 * What the config knows of a task kind (engine/tasks/kit-registry.ts registerTaskKit declares it
 * with the kit; config/ sits below tasks/, so the kinds reach it only by registering): its own keys,
 * `task.<kind>` (a zod object whose fields all have defaults; refused with another kind), the shared
 * keys it reads, whether it reads environment.tasks, and its own checks.
 */
export interface TaskKindSpec {
  description: string;
  /** The config's default task.kind (one kind: the built-in multihop). */
  default?: boolean;
  options?: z.ZodType<unknown, Record<string, unknown>>;
  /** environment.tasks: needed, allowed, or (default) refused with this kind. */
  taskFile?: 'required' | 'optional';
  /** Shared config keys this kind reads (e.g. task.hops); a key another kind reads and this one does not is refused with it. */
  reads?: KeyReads;
  /** A user environment: a tiny model's SFT warm start gets TINY_COLD_START's defaults with it. */
  tinyColdStart?: boolean;
  /** Problems with a config of this kind (the schema has passed), each naming its field. */
  check?: (cfg: ExperimentConfig) => { field: string; message: string }[];
}

/** Every task kind the config accepts: none until engine/tasks registers them (engine/builtins.ts, a config's plugins). */
const TASK_KIND_SPECS = new NamedRegistry<TaskKindSpec>(['registerTaskKit', 'a task kind', 'task.kind', 'task kind']);

/** Declare a task kind to the config (engine/tasks/kit-registry.ts registerTaskKit calls this with the kit). A name already taken is refused. */
export function registerTaskKind(kind: string, spec: TaskKindSpec): void {
  TASK_KIND_SPECS.register(kind, spec);
}

/** Whether the registered task kind `kind` reads the shared config key (its entry's `reads`, e.g. task.dataset); false for a kind not registered. */
export function taskKindReads(kind: unknown, key: string): boolean {
  return typeof kind === 'string' && TASK_KIND_SPECS.has(kind) && !!TASK_KIND_SPECS.get(kind).reads?.[key];
}

/** Every task kind the config accepts now (registered), the default first. */
export function taskKindNames(): string[] {
  return TASK_KIND_SPECS.names();
}

const posInt = () => z.number().int().positive();
const nonNegInt = () => z.number().int().nonnegative();
const nonNeg = () => z.number().nonnegative();
const prob = () => z.number().min(0).max(1);

const modelSchema = z
  .strictObject({
    /** An HF model folder (config.json, model.safetensors, tokenizer.json). */
    path: z
      .string()
      .min(1)
      .optional()
      .describe(
        'HF model folder (config.json + model.safetensors + tokenizer.json), or org/name[@revision] from the Hugging Face cache (`arbor pull org/name`)',
      ),
    /** Build the tiny built-in model for the task instead of loading a folder. */
    init: z.enum(['tiny']).optional().describe('build the tiny built-in model for the task'),
    /** Size overrides for the tiny model. */
    hidden_size: posInt().optional(),
    layers: posInt().optional(),
    /** Attention heads of the tiny model (default 4; key/value heads half of them). */
    heads: posInt().optional().describe('attention heads of the tiny built-in model (default 4; key/value heads: half)'),
    /**
     * LoRA adapters (PEFT's format): only the adapters train, the base stays frozen. Starting
     * point: rank 16–32, alpha 32, all-linear, optim.lr about 10× the full-fine-tune rate.
     */
    lora: z
      .strictObject({
        // No zod defaults here: the launch form fills every default it sees, which would turn
        // LoRA on for every run; the defaults are applied by the transform below instead.
        rank: posInt().optional().describe('adapter rank r (default 16; 16–32 is a good start)'),
        alpha: z.number().positive().optional().describe('scaling alpha, the update is scaled by alpha/rank (default 32)'),
        dropout: z.number().min(0).lt(1).optional().describe('dropout on the adapter input, training only (default 0)'),
        target_modules: z
          .union([z.literal('all-linear'), z.array(z.enum(LORA_TARGETS)).min(1)])
          .optional()
          .describe('"all-linear" (default) or a list of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj'),
      })
      .transform((l) => ({ rank: l.rank ?? 16, alpha: l.alpha ?? 32, dropout: l.dropout ?? 0, target_modules: l.target_modules ?? ('all-linear' as const) }))
      .optional()
      .describe('LoRA adapters on the linear layers (omit for full fine-tuning)'),
    /**
     * Recompute each transformer block's activations in the backward pass instead of keeping
     * them (activation checkpointing): an update's memory no longer grows with the layer count,
     * for one more forward pass of compute. For real-size models (docs/BENCHMARKS.md bench:model).
     * A number k recomputes only the first k blocks (a memory budget: each block recomputed saves
     * its activations and costs one more forward pass of that block); more than the model has is
     * refused when the model is loaded.
     */
    recompute_layers: z
      .union([z.boolean(), z.number().int().min(0)])
      .optional()
      .describe(
        "recompute blocks' activations in the backward pass: true = all, a number k = the first k blocks (default false: less memory, ~1/3 more compute per recomputed block)",
      ),
    /**
     * The frozen base of a LoRA run stored block-quantized (QLoRA-style; engine/model/quantize.ts):
     * every layer's linear weights are int8 / int4 codes with one float scale per
     * `quantize_block` values, quantized once at load, in every phase (rollouts, scoring, the
     * training step's forward and backward, evaluation, generate, serve-model). Adapters, norms,
     * embeddings and the LM head stay float32. Only with model.lora.
     */
    quantize_base: z
      .enum(QUANT_MODES)
      .optional()
      .describe(
        'LoRA only: keep the frozen base linear weights block-quantized (int8 / int4) in every phase; adapters, norms, embeddings, LM head stay float32',
      ),
    quantize_block: z
      .number()
      .int()
      .min(16)
      .refine((b) => (b & (b - 1)) === 0, { message: 'must be a power of two ≥ 16 (MatMulNBits block_size)' })
      .optional()
      .describe(`values per scale of model.quantize_base (a power of two ≥ 16; default ${QUANT_BLOCK})`),
  })
  .refine((m) => (m.path === undefined) !== (m.init === undefined), {
    message: 'give exactly one of model.path (an HF folder) or model.init: tiny',
  })
  .refine((m) => m.heads === undefined || ((m.hidden_size ?? 64) % m.heads === 0 && ((m.hidden_size ?? 64) / m.heads) % 2 === 0), {
    path: ['heads'],
    message: 'model.hidden_size must be model.heads × an even head size (rotary embeddings rotate pairs)',
  });

const taskSchema = z.strictObject({
  // A choice of the registered task kinds (configSchema; default: the registry's default).
  kind: z.string().default(''),
  /** Seed of the world the agent trains on. */
  train_seed: nonNegInt().default(1),
  /** Seed of the held-out world used for evaluation (different entities and facts). */
  eval_seed: nonNegInt().default(1001),
  /** Question hop counts for training, demonstrations and evaluation. */
  hops: z.array(z.number().int().min(1).max(3)).min(1).default([1, 2]),
  /** Hop counts of the RL training questions, if different from `hops` (e.g. RL on the harder 2-hop questions only). */
  rl_hops: z.array(z.number().int().min(1).max(3)).min(1).optional(),
  /**
   * Passages one search returns (the multi-hop task's BM25 top-k; Search-R1's retriever topk). With 2
   * a search whose name is wrong but whose kind is right still often returns the asked-for passage,
   * so the reward pays for a search that did not copy the name (docs/areas/train.md).
   */
  top_k: posInt().max(10).default(2).describe("passages per search call (the multi-hop task's BM25 top-k)"),
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
  /**
   * Sample the training rollouts with an int8 / int4 block-quantized copy of the policy's linear
   * weights (ONNX Runtime MatMulNBits, refreshed after every update; engine/model/quantize.ts).
   * Scoring, training and evaluation stay float32; algorithm.tis corrects the sampler/learner mismatch.
   */
  quantize: z
    .enum(QUANT_MODES)
    .default('none')
    .describe('sample training rollouts with int8/int4 quantized weights (ORT MatMulNBits; CPU); scoring and training stay float32'),
  /**
   * Branching rollouts (ARPO / AEPO; engine/rollout/branching.ts): `n` becomes the per-prompt
   * budget M; samples branch after tool responses where the entropy rises. Defaults: the ARPO
   * release's (N = M/2, beam 2, α 0.5, β 0.2, k 20); AEPO's constants are Arbor's choices.
   */
  branching: z
    .strictObject({
      mode: z.enum(BRANCHING_MODES).default('none'),
      /** ARPO's N: samples started per prompt (default ⌈n / 2⌉); the rest of the budget goes to branches and fill. */
      initial_samples: posInt().optional(),
      /** Up to beam_size − 1 branches per sample per tool step. */
      beam_size: posInt().default(2),
      /** Branch probability clip(alpha + beta·ΔH, 0, 1), ΔH in entropy normalised by log |V|. */
      alpha: prob().default(0.5),
      beta: z.number().default(0.2),
      /** k: tokens after a tool response (and of the first turn) whose mean entropy is measured. */
      entropy_window: posInt().default(20),
      /** Shared-prefix tokens: each copy with its own advantage (soft) or the mean advantage of the branches sharing them (hard). */
      attribution: z.enum(['soft', 'hard']).default('soft'),
      aepo: z
        .strictObject({
          /** β_b of the pre-monitoring split m = round(n·σ(β_b·(H_root − H_tool))) (not published; Arbor's choice). */
          budget_beta: z.number().default(10),
          /** λ: branching probability × (1 − λ)^l after l consecutive high-entropy tool steps (not published; Arbor's choice). */
          branch_penalty: prob().default(0.5),
        })
        .prefault({}),
    })
    .prefault({}),
});

const algorithmSchema = z.strictObject({
  // A choice of the registered estimators (configSchema; default: the first registered).
  adv_estimator: z.string().default(''),
  /** GRPO: divide by the group std (false = Dr.GRPO behaviour). */
  norm_adv_by_std: z.boolean().default(true),
  // A choice of the registered policy losses (configSchema; default: the first registered). Every
  // registered estimator's and loss's own section (algorithm.<name>) joins in configSchema().
  policy_loss: z.string().default(''),
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
      /** Extra rollout rounds allowed to refill the batch (when every round's groups were flat, the first prompts_per_step of them are trained on). */
      max_rounds: posInt().default(3),
      /**
       * Prompts sampled per rollout round (verl DAPO's data.gen_batch_size), ≥ rollout.prompts_per_step:
       * oversampling in one round costs little next to another round; the groups kept beyond
       * prompts_per_step are not trained on. Default: rollout.prompts_per_step.
       */
      gen_prompts: posInt().optional(),
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
  /**
   * Old-policy logprobs of the PPO ratio: 'recompute' scores the batch with the policy after the
   * rollout (one extra forward pass); 'rollout' reuses the logprobs the rollout recorded, which
   * are the same policy's (no update happens in between; both at rollout.temperature), skipping
   * that pass.
   */
  old_logprobs: z.enum(['recompute', 'rollout']).default('recompute'),
  /**
   * Truncated importance sampling (FlashRL; "Your efficient RL framework secretly brings you
   * off-policy RL training"): each token's policy-gradient term is weighted by
   * min(π_old / π_sampler, cap), detached, from the recomputed old logprobs and the rollout's own
   * (the sampler's: a quantized decode session, or float32 decoding that differs from the
   * scoring graph's numerics). null: no correction.
   */
  tis: z
    .strictObject({ cap: z.number().gt(0).describe('upper bound C of the importance weight min(π_old/π_sampler, C) (FlashRL: 2)') })
    .nullable()
    .default(null)
    .describe('truncated importance sampling on the sampler/learner ratio (needs old_logprobs: recompute)'),
  /**
   * On-policy distillation (engine/train/distill.ts): a teacher (a model folder or org/name of the
   * Hugging Face cache, with the student's tokenizer) scores every sampled token; the per-token
   * advantage −coef · (log π_student − log π_teacher) (reverse KL) replaces the estimator's, or is
   * added to it with mix_with_reward.
   */
  distill: z
    .strictObject({
      teacher: z.string().min(1).describe("the teacher: an HF model folder or org/name[@revision] from the Hugging Face cache, with the student's tokenizer"),
      coef: z.number().positive().default(1).describe('weight of the per-token reverse-KL advantage'),
      mix_with_reward: z.boolean().default(false).describe("add the task reward's advantage (the estimator's) to the teacher's; false: the teacher's alone"),
    })
    .optional(),
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
  /**
   * Whether SFT imitates the expert's deliberate mistakes too. true (default, as before): every expert
   * turn is a target. false: a mistake turn stays in its demonstration as context (the recovery after
   * it is learned) with loss mask 0, so SFT does not teach the wrong call or the uncalculated answer
   * itself (measured on the demo: docs/areas/train.md, "Levers measured").
   */
  imitate_mistakes: z.boolean().default(true),
  /** JSONL file of demonstrations as token ids: `arbor rollout` trajectories or {tokens, loss_mask} (engine/train/sft.ts). */
  demos_path: z.string().min(1).optional(),
  /** Score the validation split (eval.validation) every N SFT steps and at the last one, logged as sft/val/*; 0 = never. */
  eval_every: nonNegInt().default(0).describe('score the validation split (eval.validation) every N SFT steps; 0 = never'),
  /**
   * End SFT on its checkpoint with the best validation exact match (of the sft.eval_every scores)
   * instead of the last step: the tiny models form their copying skills suddenly and can lose one
   * again (docs/areas/train.md, "Two-tool task"). The held-out questions are not looked at.
   */
  keep_best: z.boolean().default(false).describe('continue from the SFT checkpoint with the best validation exact match, not the last one'),
  /**
   * A cold start: end SFT at the first sft.eval_every score whose validation exact match reaches
   * this (RL takes it from there); a run that never reaches it trains every epoch (and with
   * sft.keep_best continues from its best step).
   */
  stop_at: z.number().gt(0).max(1).optional().describe('end SFT at the first validation exact match ≥ this (a cold start for RL)'),
  /** Learning rate after the 10% warm-up: cosine decay to 0.1× (default), or constant. */
  schedule: z.enum(['cosine', 'constant']).default('cosine').describe('SFT learning rate after its warm-up: cosine to 0.1×, or constant'),
});

const evalSchema = z.strictObject({
  every: nonNegInt().default(10).describe('evaluate every N steps; 0 = only at the end'),
  n_questions: posInt().default(64),
  temperature: nonNeg().default(0).describe('0 = greedy'),
  /**
   * Training questions held back as a validation split: drawn once (the same ones for every seed),
   * never a demonstration or an RL prompt; sft.eval_every scores them so that sft.keep_best can
   * choose a checkpoint without looking at the held-out questions.
   */
  validation: nonNegInt().default(0).describe('training questions held back from demonstrations and RL prompts as a validation split'),
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
const FORMAT_DESCRIPTION = 'tool-call format (registered: engine/env/formats.ts and plugins)';
const environmentSchema = z.strictObject({
  /** Tool-call format (engine/env/formats.ts registry): search-r1 (<search>), hermes (<tool_call> JSON, chat template), tags (<toolname>). */
  // A choice of the registered formats (configSchema; default: the registry's default).
  format: z.string().default('').describe(FORMAT_DESCRIPTION),
  /** Tool files, any number, any tool names (each exports Tool objects); they join the task's built-in tools (a same-named one replaces it). */
  tools: z.array(z.string().min(1)).default([]),
  /** Reward file: exports `reward(episode)` (or default) → a number or { reward, components?, steps? } (steps: one per tool call, used by algorithm.process_rewards). */
  reward: z.string().min(1).optional(),
  /** A reward file that throws: fail the run (default, with the file and line), or score the episode 0, log the error and count it (metric reward/reward_error). */
  reward_errors: z
    .enum(['fail', 'zero'])
    .default('fail')
    .describe('a throwing reward: fail the run, or score the episode 0 (logged, counted as reward/reward_error)'),
  /** task.kind "custom": a JSONL task file, one {id, prompt | messages, answers?, meta?} per line (QA rows {question, answers, context?} too). */
  tasks: z.string().min(1).optional(),
  /** Folder tools may read through ctx.readFile (read-only); default: the config file's folder. */
  workspace: z.string().min(1).optional(),
  /**
   * What runs the tool and reward files: `quickjs` (default: QuickJS in WebAssembly inside the
   * sandbox process, the boundary) or `process` (V8 contexts in the sandbox process: fast for
   * compute-heavy tools, not a boundary, so asked about like a plugin: code that runs as you).
   */
  sandbox: z
    .enum(['quickjs', 'process'])
    .default('quickjs')
    .describe('tool/reward engine: quickjs (isolated) or process (V8, compute-heavy tools; asked like a plugin)'),
  /** Most tool calls run from one model turn (search-r1: queries of one search); the rest get an error. */
  max_calls_per_turn: posInt().max(16).default(2),
  /** Per-call time limit; ctx.signal aborts when it passes. */
  tool_timeout_ms: posInt().default(5000),
  /** Tool results of one turn are cut to this many tokens in all. */
  max_observation_tokens: posInt().default(256),
  /**
   * MCP servers whose tools join the environment (engine/env/mcp/client.ts): the `mcpServers`
   * layout ({ name: { command, args, env, cwd, tools?, timeout_ms? } }) inline, or the path of a
   * JSON file holding { "mcpServers": { … } }. Started once per run, closed at its end.
   */
  // Checked field by field in validateConfig (a union here would only say "Invalid input").
  mcp_servers: z
    .union([z.string().min(1), z.record(z.string(), z.unknown())])
    .optional()
    .describe('MCP servers ({name: {command, args, env, cwd, tools, timeout_ms}}) or a JSON file with {"mcpServers": …}'),
  /**
   * An external agent program trained as it is (engine/openai/agent.ts). mode "process": each
   * episode starts `command` with OPENAI_BASE_URL (the episode's own base URL of the run's
   * OpenAI-compatible endpoint), OPENAI_API_KEY and ARBOR_TASK (the task row as JSON); its last
   * non-empty stdout line is the answer. mode "serve": `command` runs once (`workers` times) for
   * the run and is handed episodes as JSON lines on stdin ({id, task, base_url, api_key}), answering
   * each with a JSON line {id, answer} on stdout (engine/openai/agent-serve.ts). Either way the
   * episode's calls are its trajectories. `cwd` defaults to the config's folder.
   */
  agent: z
    .strictObject({
      command: z.array(z.string().min(1)).min(1).describe('argv of the agent program, e.g. [node, agent.ts]'),
      mode: z
        .enum(['process', 'serve'])
        .default('process')
        .describe('process: one program run per episode; serve: long-lived program(s) handed episodes as JSON lines on stdin'),
      workers: posInt().max(16).optional().describe('mode serve: how many copies of the program run (default 1); episodes go to the least busy'),
      concurrency: posInt().max(256).default(4).describe('episodes running at once (mode process: agent processes)'),
      timeout_ms: posInt().default(120_000).describe('an episode still running after this is killed (reward 0)'),
      env: z.record(z.string(), z.string()).default({}).describe('extra environment variables for the program'),
      cwd: z.string().min(1).optional(),
    })
    .optional(),
  /**
   * Rewards from a model (engine/env/judge.ts, engine/train/judge-rollout.ts): an LLM judge over any
   * OpenAI-compatible base URL scores each training trajectory against `rubric` (mode score) or
   * ranks a whole group in one request (mode rank, RULER's shape). The key is read from the
   * environment variable `api_key_env` names, never from the config.
   */
  judge: z
    .strictObject({
      base_url: z
        .url({ protocol: /^https?$/ })
        .describe('OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (arbor serve-model) or https://api.openai.com/v1'),
      model: z.string().min(1).describe('the model name sent with each request'),
      api_key_env: z
        .string()
        .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')
        .optional()
        .describe('name of the environment variable holding the API key (the key itself is never in the config)'),
      rubric: z.string().min(1).describe('what a good trajectory is: the system prompt of every request'),
      mode: z.enum(['score', 'rank']).default('rank').describe('score: one request per trajectory; rank: the whole group in one request'),
      references: z.boolean().default(false).describe("show the task's gold answers to the judge"),
      mix: prob().default(1).describe('reward = (1 − mix) · task reward + mix · judge score'),
      retries: nonNegInt()
        .max(10)
        .default(2)
        .describe('retries of a malformed answer, an HTTP error, a 429 or a timeout before the judgement is a named failure'),
      timeout_ms: posInt().default(60_000).describe('per request'),
      agreement: z.boolean().default(false).describe('rank mode: a second request in reversed order; judge/agreement and the mean of the two scores'),
      max_tokens: posInt().default(1024).describe("the judge's answer budget"),
      temperature: z.number().min(0).max(2).default(0),
      concurrency: posInt().max(64).default(4).describe('requests in flight at once'),
      price: z
        .strictObject({ input_per_mtok: z.number().min(0), output_per_mtok: z.number().min(0) })
        .optional()
        .describe('USD per million prompt / completion tokens: judge/cost per step'),
    })
    .optional(),
});

const checkpointSchema = z.strictObject({
  every: posInt().default(5),
  keep: posInt().default(2),
  /**
   * Also keep every checkpoint whose step is a multiple of this (never pruned), so the replay's
   * top-k and What-if find weights near the ones that sampled any step. Default: about eight spread
   * over the run (a multiple of `every`); 0 = only the newest `keep` and the best.
   */
  keep_every: nonNegInt().optional().describe('also keep the checkpoints at multiples of this step (for the replay); default ~8 over the run, 0 = off'),
  /**
   * Keep the checkpoint with the best held-out score (eval/<best_metric>, at every eval.every step)
   * beside the last `keep` ones: saved when an evaluation beats every earlier one, never pruned,
   * named in <run>/checkpoints/best.json (engine/train/checkpoints.ts).
   */
  keep_best: z.boolean().default(true).describe('keep the best checkpoint by held-out score beside the last ones'),
  best_metric: z.string().min(1).default('exact_match').describe('held-out metric (higher is better) that picks the best checkpoint'),
});

export const experimentSchema = z.strictObject({
  name: z.string().min(1).optional(),
  /** Module files loaded before the config is validated, adding estimators, policy losses, tool-call formats or task kinds (engine/config/plugins.ts; asked for like an MCP server). */
  plugins: z
    .array(z.string().min(1))
    .default([])
    .describe("module files that register estimators, policy losses, tool-call formats or task kinds (run in Arbor's process)"),
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
  /** ONNX Runtime device: auto = CUDA when its provider loads, else WebGPU on a hardware adapter (DirectML/CoreML when they load), else CPU; webgpu = any WebGPU adapter, SwiftShader included. */
  device: z.enum(DEVICES).default('auto'),
  threads: posInt().max(256).default(2),
});

export type ExperimentConfig = z.infer<typeof experimentSchema>;
export type ExperimentInput = z.input<typeof experimentSchema>;

/** A registry entry's own section: `<section>.<name>` with the entry's option schema, refused unless `<section>.<selector>` is `name`. */
interface OptionSection {
  section: 'algorithm' | 'task';
  name: string;
  selector: string;
  schema: z.ZodType<unknown, Record<string, unknown>>;
}

/** The option sections of every registered estimator, policy loss and task kind (the built-in ones are in the static schema too). */
function optionSections(): OptionSection[] {
  const out: OptionSection[] = [];
  for (const name of estimatorNames()) {
    const o = getEstimator(name).options;
    if (o) out.push({ section: 'algorithm', name, selector: 'adv_estimator', schema: o });
  }
  for (const name of policyLossNames()) {
    const o = getPolicyLoss(name).options;
    if (o) out.push({ section: 'algorithm', name, selector: 'policy_loss', schema: o });
  }
  for (const [name, spec] of TASK_KIND_SPECS.entriesList()) if (spec.options) out.push({ section: 'task', name, selector: 'kind', schema: spec.options });
  return out;
}

let composed: { key: string; schema: typeof experimentSchema } | undefined;

/**
 * A registered choice: one of the registry's names, by default the first registered (each
 * builtins list registers the default first). With none registered (engine/builtins.ts not
 * imported in this process) the field is refused, saying so.
 */
function choice(values: string[], what: string) {
  if (values.length) return z.enum(values as [string, ...string[]]).default(values[0]!);
  // z.unknown(): the refinement runs on an absent value too (an optional one would skip it).
  return z.unknown().refine(() => false, {
    message: `no ${what} is registered in this process (the built-in ones register when engine/builtins.ts is imported)`,
  }) as unknown as z.ZodDefault<z.ZodEnum<Record<string, string>>>;
}

/**
 * The schema a config is validated with: the static one, its choices (estimators, policy losses,
 * tool-call formats, task kinds) the registries' names as they are now, and every registered
 * entry's own option section composed in (`algorithm.<estimator or loss>`, `task.<kind>`).
 */
export function configSchema(): typeof experimentSchema {
  const sections = optionSections();
  const names = { est: estimatorNames(), loss: policyLossNames(), fmt: [...FORMAT_NAMES], kind: taskKindNames() };
  const key = JSON.stringify(names);
  if (composed?.key === key) return composed.schema;
  const extra = (section: 'algorithm' | 'task', base: Record<string, unknown>) => {
    const shape: Record<string, z.ZodType> = {};
    for (const s of sections.filter((x) => x.section === section && !(x.name in base))) {
      if (shape[s.name]) throw new Error(`${section}.${s.name}: two registered entries named "${s.name}" have options; rename one`);
      shape[s.name] = s.schema.prefault({});
    }
    return shape;
  };
  const clash = sections.find((s) => s.name in (s.section === 'algorithm' ? algorithmSchema.shape : taskSchema.shape));
  if (clash)
    throw new Error(`${clash.section}.${clash.name}: a registered ${clash.selector} named "${clash.name}" would shadow the config key of that name; rename it`);
  const schema = experimentSchema.extend({
    algorithm: algorithmSchema
      .extend({
        adv_estimator: choice(names.est, 'advantage estimator'),
        policy_loss: choice(names.loss, 'policy loss'),
        ...extra('algorithm', algorithmSchema.shape),
      })
      .prefault({}),
    task: taskSchema.extend({ kind: choice(names.kind, 'task kind'), ...extra('task', taskSchema.shape) }).prefault({}),
    environment: environmentSchema.extend({ format: choice(names.fmt, 'tool-call format').describe(FORMAT_DESCRIPTION) }).prefault({}),
  }) as unknown as typeof experimentSchema;
  composed = { key, schema };
  return schema;
}

/** The generated INERT rules of the option sections: `algorithm.gspo` without policy_loss gspo, `task.<kind>` with another kind, … */
function sectionRules(): InertRule[] {
  return optionSections().map((s) => ({
    keys: [`${s.section}.${s.name}`],
    when: (c: ExperimentConfig) => (c[s.section] as Record<string, unknown>)[s.selector] !== s.name,
    why: `unless ${s.section}.${s.selector} is "${s.name}" (its own options)`,
  }));
}

/** A registry whose entries say which shared keys they read, and the dotted config field that chooses one. */
interface ReadsSource {
  selector: string;
  entries: () => [name: string, reads: KeyReads | undefined][];
}

const READS_SOURCES: ReadsSource[] = [
  { selector: 'algorithm.adv_estimator', entries: () => estimatorNames().map((n) => [n, getEstimator(n).reads]) },
  { selector: 'algorithm.policy_loss', entries: () => policyLossNames().map((n) => [n, getPolicyLoss(n).reads]) },
  { selector: 'task.kind', entries: () => taskKindNames().map((n) => [n, TASK_KIND_SPECS.get(n).reads]) },
];

/**
 * The generated INERT rules of the shared keys registered entries read (their `reads`): a key some
 * entry reads is refused under an entry that does not (algorithm.gamma under grpo, task.hops under
 * another kind than the one that reads it), naming the entries that do.
 */
function readsRules(): InertRule[] {
  const rules: InertRule[] = [];
  for (const src of READS_SOURCES) {
    const readers = new Map<string, { names: string[]; why: string }>();
    for (const [name, reads] of src.entries())
      for (const [key, why] of Object.entries(reads ?? {})) {
        const r = readers.get(key) ?? { names: [], why };
        r.names.push(name);
        readers.set(key, r);
      }
    const chosen = (c: ExperimentConfig) => String(valueAtPath(c, src.selector));
    for (const [key, r] of readers)
      rules.push({
        keys: [key],
        when: (c) => !r.names.includes(chosen(c)),
        why: (c) => `with ${src.selector} "${chosen(c)}" (read by ${r.names.map((n) => `"${n}"`).join(', ')}: ${r.why})`,
      });
  }
  return rules;
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
export interface ValidateOptions {
  baseDir?: string;
  file?: string;
  checkFiles?: boolean;
  /** What reads the config: decides which keys are refused or named as unused (none: a library caller; only the job-independent rules apply). */
  job?: ConfigJob;
  /** Where the one "not used by this command" line goes (default: stderr). */
  warn?: (line: string) => void;
}

/**
 * The SFT warm start's defaults for a model built from scratch (`model.init: tiny`, no
 * `model.path`) on a user environment (`task.kind: custom`, no `environment.agent`), when the config
 * says only `sft: { warm_start: true }` (README's "Write your own environment"): the cold start that
 * made the two-tool task learn (resources/configs/tools.yaml; docs/areas/train.md, "Cold start").
 * SFT at a constant learning rate until 50% of a validation split (50 training tasks held back,
 * scored every 25 steps) is right, at most 80 epochs of 800 demonstrations (the two-tool task's
 * 40 doubled: a custom task's tiny prompts are short, ~0.06 s a step on 2 cores, and on the
 * invented-names task the jump came as late as step 2950, past the old cap of 2000 steps),
 * then RL from the best scored step. A tiny model learns to copy names and numbers suddenly, at a
 * step that depends on the seed; the old defaults (3 epochs, cosine) stopped long before it (57
 * steps, format rate 0).
 * Setting any of these keys (or eval.validation) turns the block off: the config is taken as written.
 */
export const TINY_COLD_START = {
  sft: { epochs: 80, demos: 800, lr: 0.005, schedule: 'constant', eval_every: 25, keep_best: true, stop_at: 0.5 },
  eval: { validation: 50 },
} as const;

function withTinyColdStart(input: unknown): unknown {
  if (!input || typeof input !== 'object' || Array.isArray(input)) return input;
  const raw = input as Record<string, unknown>;
  const obj = (v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
  const model = obj(raw.model);
  const sft = obj(raw.sft);
  const task = obj(raw.task);
  const ev = obj(raw.eval);
  const kind = typeof task?.kind === 'string' && TASK_KIND_SPECS.has(task.kind) ? TASK_KIND_SPECS.get(task.kind) : undefined;
  if (model?.init !== 'tiny' || model.path !== undefined || sft?.warm_start !== true || !kind?.tinyColdStart) return input;
  if (obj(raw.environment)?.agent !== undefined || sft.demos_path !== undefined) return input;
  if (Object.keys(TINY_COLD_START.sft).some((k) => sft[k] !== undefined) || ev?.validation !== undefined) return input;
  return { ...raw, sft: { ...TINY_COLD_START.sft, ...sft }, eval: { ...ev, ...TINY_COLD_START.eval } };
}

/**
 * A validated config and what its input said beside it, passed explicitly to whatever reads them
 * (none of it travels inside the config: a copy of `cfg` carries nothing else).
 */
export interface LoadedConfig {
  cfg: ExperimentConfig;
  /** The folder its relative paths resolved against: the config file's (consent's "inside the config's folder", a run folder's base.json). */
  dir: string;
  /** The rollout limits the input left to their defaults: a run may size them from its task (engine/run/limits.ts). */
  defaults: ReadonlySet<RolloutLimitKey>;
}

/** validateConfig's config alone (for callers that open nothing: no consent asked, no limits sized). */
export function validateConfig(input: unknown, opts: ValidateOptions = {}): ExperimentConfig {
  return validateLoaded(input, opts).cfg;
}

/** Validate a config, keeping the folder it resolved against (`opts.baseDir`, else the working folder) and its defaulted limits. */
export function validateLoaded(input: unknown, opts: ValidateOptions = {}): LoadedConfig {
  // What the user wrote (the inert-key and scope checks read it), and the input with the tiny cold start's defaults.
  const written = input;
  input = withTinyColdStart(input);
  const baseDir = opts.baseDir ?? process.cwd();
  const cfg = parseConfig(input, baseDir, opts.file);
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));
  const refErrors = resolvePaths(cfg, baseDir, abs);
  const job = opts.job;
  const issues: Issue[] = inertKeys(written, cfg, job);
  const unused = job ? keysOutsideScope(written, job) : [];
  if (unused.length)
    (opts.warn ?? ((l: string) => process.stderr.write(`${l}\n`)))(
      `warning: ${opts.file ?? 'config'}: not used by this command (it reads ${JOB_SCOPE[job!]!.join(', ')}): ${unused.join(', ')}`,
    );
  issues.push(
    ...checkpointIssues(cfg),
    ...readMcpServers(cfg.environment, abs),
    ...agentIssues(cfg, opts.checkFiles !== false),
    ...distillAndJudgeIssues(cfg),
    ...taskKindIssues(cfg),
    ...batchAndLimitIssues(cfg),
  );
  if (opts.checkFiles !== false) issues.push(...missingFiles(cfg, refErrors));
  if (issues.length) throw new ConfigError(issues, opts.file);
  const given = (input as { rollout?: Record<string, unknown> } | null)?.rollout ?? {};
  return { cfg, dir: baseDir, defaults: new Set(ROLLOUT_LIMIT_KEYS.filter((k) => given[k] === undefined)) };
}

type Issue = { field: string; message: string };

/** The schema's parse of a config (its plugins loaded first: the names they register are choices of the schema); refused naming each field. */
function parseConfig(input: unknown, baseDir: string, file: string | undefined): ExperimentConfig {
  const notLoaded = pluginPaths(input, baseDir).filter((p) => !pluginLoaded(p.path));
  if (notLoaded.length)
    throw new ConfigError(
      notLoaded.map((p) => ({
        field: p.field,
        message: `${p.path} is not loaded in this process (\`arbor train\`, \`sft\`, \`eval\`, \`rollout\`, … load a config's plugins after asking; the workbench does not load plugins yet)`,
      })),
      file,
    );
  const res = configSchema().safeParse(input);
  if (!res.success)
    throw new ConfigError(
      res.error.issues.map((i) => ({ field: fieldName(i.path, i), message: describeIssue(i, input) })),
      file,
    );
  return res.data;
}

/**
 * Make the config's paths absolute against its folder (in place). model.path and
 * algorithm.distill.teacher may be `org/name[@revision]` from the Hugging Face cache (an existing
 * folder wins; no network): a name not cached is kept as a path and its error returned, for
 * missingFiles to report.
 */
function resolvePaths(cfg: ExperimentConfig, baseDir: string, abs: (p: string) => string): { model?: string; teacher?: string } {
  const errors: { model?: string; teacher?: string } = {};
  const modelRef = (ref: string, slot: 'model' | 'teacher') => {
    try {
      return resolveModelRef(ref, baseDir);
    } catch (e) {
      if (!(e instanceof ModelNotCachedError)) throw e;
      errors[slot] = e.message;
      return abs(ref);
    }
  };
  cfg.plugins = cfg.plugins.map(abs);
  if (cfg.model.path) cfg.model.path = modelRef(cfg.model.path, 'model');
  if (cfg.algorithm.distill) cfg.algorithm.distill.teacher = modelRef(cfg.algorithm.distill.teacher, 'teacher');
  if (cfg.task.dataset) cfg.task.dataset = abs(cfg.task.dataset);
  if (cfg.sft.demos_path) cfg.sft.demos_path = abs(cfg.sft.demos_path);
  const env = cfg.environment;
  env.tools = env.tools.map(abs);
  if (env.reward) env.reward = abs(env.reward);
  if (env.tasks) env.tasks = abs(env.tasks);
  env.workspace = abs(env.workspace ?? '.');
  if (env.agent) env.agent.cwd = abs(env.agent.cwd ?? '.');
  return errors;
}

function checkpointIssues(cfg: ExperimentConfig): Issue[] {
  const { keep_every: keepEvery, every } = cfg.checkpoint;
  if (keepEvery === undefined || keepEvery === 0 || keepEvery % every === 0) return [];
  return [
    {
      field: 'checkpoint.keep_every',
      message: `${keepEvery} is not a multiple of checkpoint.every (${every}): checkpoints are saved every ${every} steps, so no saved one would be kept at the others`,
    },
  ];
}

/**
 * environment.mcp_servers checked field by field and stored in one shape: a file in the mcpServers
 * layout is read here, and a server's cwd resolves against the config file's folder (its default too).
 */
function readMcpServers(env: ExperimentConfig['environment'], abs: (p: string) => string): Issue[] {
  if (env.mcp_servers === undefined) return [];
  const issues: Issue[] = [];
  let source: { servers: unknown; field: string };
  try {
    source = mcpServersSource(env.mcp_servers, abs);
  } catch (e) {
    issues.push({ field: 'environment.mcp_servers', message: (e as Error).message });
    source = { servers: {}, field: 'environment.mcp_servers' };
  }
  const { servers, field } = source;
  const r = mcpServersSchema.safeParse(servers);
  if (!r.success)
    for (const i of r.error.issues) issues.push({ field: [field, fieldName(i.path, i)].filter(Boolean).join('.'), message: describeIssue(i, servers) });
  else env.mcp_servers = withServerCwds(r.data, abs);
  return issues;
}

/** An external agent program (environment.agent): what it cannot be combined with, and its own limits. */
function agentIssues(cfg: ExperimentConfig, checkFiles: boolean): Issue[] {
  const agent = cfg.environment.agent;
  if (!agent) return [];
  const issues: Issue[] = [];
  if (cfg.rollout.branching.mode !== 'none')
    issues.push({
      field: 'rollout.branching.mode',
      message: 'branching rollouts fork the engine\'s own episodes; an external agent (environment.agent) runs its own loop: use "none"',
    });
  if (checkFiles && !existsSync(agent.cwd!)) issues.push({ field: 'environment.agent.cwd', message: `folder not found: ${agent.cwd}` });
  if (agent.mode === 'process' && agent.workers !== undefined)
    issues.push({ field: 'environment.agent.workers', message: 'is for mode "serve" (mode "process" starts one program per episode: use concurrency)' });
  if (agent.mode === 'process' && agent.concurrency > 64)
    issues.push({
      field: 'environment.agent.concurrency',
      message: `${agent.concurrency} agent processes at once: at most 64 in mode "process" (mode "serve" takes up to 256)`,
    });
  return issues;
}

/**
 * algorithm.distill without mix_with_reward: the teacher's advantage replaces the estimator's, so
 * what only shapes the reward's is refused; and the judge's agreement check, which mode "score" cannot make.
 */
function distillAndJudgeIssues(cfg: ExperimentConfig): Issue[] {
  const issues: Issue[] = [];
  const { distill: d, dynamic_sampling, process_rewards, kl_in, kl_coef } = cfg.algorithm;
  const judge = cfg.environment.judge;
  if (d && !d.mix_with_reward) {
    const why =
      "with algorithm.distill and mix_with_reward false the teacher's per-token advantage replaces the reward's (set mix_with_reward: true to use both)";
    if (dynamic_sampling.enabled) issues.push({ field: 'algorithm.dynamic_sampling.enabled', message: `drops groups by their rewards: ${why}` });
    if (process_rewards) issues.push({ field: 'algorithm.process_rewards', message: `has no effect ${why}` });
    if (kl_in === 'reward' && kl_coef > 0) issues.push({ field: 'algorithm.kl_in', message: `"reward" has no effect ${why} (use "loss")` });
    if (judge) issues.push({ field: 'environment.judge', message: `has no effect ${why}` });
  }
  if (judge?.agreement && judge.mode === 'score')
    issues.push({
      field: 'environment.judge.agreement',
      message: 'is for mode "rank" (mode "score" shows one trajectory per request: there is no order to reverse)',
    });
  return issues;
}

/** The chosen task kind's own checks (its registry entry): environment.tasks where it needs or refuses one, then its `check`. */
function taskKindIssues(cfg: ExperimentConfig): Issue[] {
  const issues: Issue[] = [];
  const kind = TASK_KIND_SPECS.get(cfg.task.kind);
  const tasks = cfg.environment.tasks;
  if (kind.taskFile === 'required' && !tasks)
    issues.push({
      field: 'environment.tasks',
      message: `required for task.kind "${cfg.task.kind}" (a JSONL file of {id, prompt | messages, answers?, meta?})`,
    });
  if (!kind.taskFile && tasks) {
    const readers = TASK_KIND_SPECS.entriesList()
      .filter(([, k]) => k.taskFile)
      .map(([n]) => `"${n}"`);
    issues.push({ field: 'environment.tasks', message: `a task file is read by task.kind ${readers.join(' or ')} (got task.kind "${cfg.task.kind}")` });
  }
  issues.push(...(kind.check?.(cfg) ?? []));
  return issues;
}

/** Settings that bound one another: mini-batches and the batch, dynamic sampling's rounds, branching, the rollout limits. */
function batchAndLimitIssues(cfg: ExperimentConfig): Issue[] {
  const issues: Issue[] = [];
  const { algorithm: a, rollout: r } = cfg;
  if (a.mini_batches > r.prompts_per_step * r.n)
    issues.push({ field: 'algorithm.mini_batches', message: `must be ≤ rollout.prompts_per_step × rollout.n = ${r.prompts_per_step * r.n}` });
  const gen = a.dynamic_sampling.gen_prompts;
  if (gen !== undefined && gen < r.prompts_per_step)
    issues.push({
      field: 'algorithm.dynamic_sampling.gen_prompts',
      message: `${gen} is below rollout.prompts_per_step (${r.prompts_per_step}): a round samples at least the prompts a step trains on`,
    });
  if (r.branching.initial_samples !== undefined && r.branching.initial_samples > r.n)
    issues.push({ field: 'rollout.branching.initial_samples', message: `must be ≤ rollout.n = ${r.n} (the per-prompt budget)` });
  if (r.max_new_tokens >= r.max_total_length)
    issues.push({ field: 'rollout.max_new_tokens', message: `must be < rollout.max_total_length (${r.max_total_length})` });
  const responseMax = Math.min(r.max_turns * r.max_new_tokens, r.max_total_length);
  if (a.overlong.enabled && a.overlong.buffer >= responseMax)
    issues.push({
      field: 'algorithm.overlong.buffer',
      message: `must be < the response budget min(rollout.max_turns × rollout.max_new_tokens, rollout.max_total_length) = ${responseMax}`,
    });
  return issues;
}

/** Folders and files the config names that are not there (model.path and the teacher: also not a model folder, or not in the HF cache). */
function missingFiles(cfg: ExperimentConfig, refErrors: { model?: string; teacher?: string }): Issue[] {
  const issues: Issue[] = [];
  const distill = cfg.algorithm.distill;
  if (refErrors.teacher) issues.push({ field: 'algorithm.distill.teacher', message: refErrors.teacher });
  else if (distill && !existsSync(join(distill.teacher, 'config.json')))
    issues.push({ field: 'algorithm.distill.teacher', message: `not a model folder (no config.json): ${distill.teacher}` });
  const model = cfg.model.path;
  if (refErrors.model) issues.push({ field: 'model.path', message: refErrors.model });
  else if (model) {
    if (!existsSync(model) || !statSync(model).isDirectory()) issues.push({ field: 'model.path', message: `model folder not found: ${model}` });
    else if (!existsSync(join(model, 'config.json')) && !existsSync(join(model, 'adapter_config.json')))
      issues.push({
        field: 'model.path',
        message: `not an HF model folder (no config.json) nor a PEFT LoRA adapter folder (no adapter_config.json): ${model}`,
      });
  }
  const env = cfg.environment;
  if (cfg.task.dataset && !existsSync(cfg.task.dataset)) issues.push({ field: 'task.dataset', message: `file not found: ${cfg.task.dataset}` });
  if (cfg.sft.demos_path && !existsSync(cfg.sft.demos_path)) issues.push({ field: 'sft.demos_path', message: `file not found: ${cfg.sft.demos_path}` });
  env.tools.forEach((f, i) => existsSync(f) || issues.push({ field: `environment.tools[${i}]`, message: `file not found: ${f}` }));
  if (env.reward && !existsSync(env.reward)) issues.push({ field: 'environment.reward', message: `file not found: ${env.reward}` });
  if (env.tasks && !existsSync(env.tasks)) issues.push({ field: 'environment.tasks', message: `file not found: ${env.tasks}` });
  return issues;
}

/** The rollout limits that may be sized from the task when the config leaves them out (engine/run/limits.ts). */
export const ROLLOUT_LIMIT_KEYS = ['max_new_tokens', 'max_total_length', 'max_turns'] as const;
export type RolloutLimitKey = (typeof ROLLOUT_LIMIT_KEYS)[number];

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

/**
 * What reads a config: `train` (arbor train, the workbench's runs: every key), `sft` (arbor sft:
 * SFT only), `demo` (arbor demo: SFT warm start always, then RL), and the commands that use part
 * of one (`eval`, `rollout`, `init-model`, `environment`: arbor mcp serve). A config file is shared
 * between them, so keys a command does not read are named in one warning (JOB_SCOPE), while keys
 * a command reads but whose feature is switched off are refused (INERT_RULES). `stored`: a run's
 * own config.json, checked when the run started (only its shape is checked again).
 */
export type ConfigJob = 'train' | 'sft' | 'demo' | 'eval' | 'rollout' | 'init-model' | 'environment' | 'stored';

/** The keys (dotted prefixes) each partial command reads; the rest of a config is not used by it. */
export const JOB_SCOPE: Partial<Record<ConfigJob, string[]>> = {
  eval: [
    'name',
    'plugins',
    'model',
    'task',
    'environment',
    'eval.n_questions',
    'eval.temperature',
    'rollout.max_turns',
    'rollout.max_new_tokens',
    'rollout.max_total_length',
    'seed',
    'backend',
    'device',
    'threads',
  ],
  rollout: ['name', 'plugins', 'model', 'task', 'environment', 'rollout', 'seed', 'backend', 'device', 'threads'],
  'init-model': [
    'name',
    'plugins',
    'model.init',
    'model.hidden_size',
    'model.layers',
    'model.heads',
    'task',
    'environment',
    'seed',
    'rollout.max_total_length',
  ],
  environment: ['name', 'plugins', 'model', 'task', 'environment'],
};

/** Keys under a JOB_SCOPE prefix that the job still does not read (the judge scores training rollouts only). */
const JOB_UNREAD: Partial<Record<ConfigJob, string[]>> = {
  eval: ['environment.judge'],
  rollout: ['environment.judge'],
  'init-model': ['environment.judge'],
  environment: ['environment.judge'],
};

/**
 * A key that does nothing in some configurations: refused there, naming the key and why (one
 * mechanism for every switched-off feature). `keys` are dotted paths (a section name covers its
 * fields); a key counts as set when the file gives it a value other than its default. Add a
 * rule here with the feature that reads the key (other modules: push onto INERT_RULES).
 */
export interface InertRule {
  keys: string[];
  /** When the keys have no effect. */
  when: (cfg: ExperimentConfig, job: ConfigJob | undefined) => boolean;
  /** Completes "has no effect …". */
  why: string | ((cfg: ExperimentConfig) => string);
}

export const INERT_RULES: InertRule[] = [
  { keys: ['environment.reward_errors'], when: (c) => !c.environment.reward, why: 'without environment.reward (it applies to a reward file that throws)' },
  {
    keys: ['environment.sandbox'],
    when: (c) => c.environment.tools.length === 0 && !c.environment.reward,
    why: 'without environment.tools or environment.reward (it picks what runs those files)',
  },
  { keys: ['sft.imitate_mistakes'], when: (c) => c.sft.mistake_rate === 0, why: 'with sft.mistake_rate 0 (the expert makes no mistakes)' },
  {
    keys: ['sft.demos', 'sft.mistake_rate', 'sft.imitate_mistakes'],
    when: (c) => !!c.sft.demos_path,
    why: 'with sft.demos_path (the demonstrations come from that file)',
  },
  {
    keys: [
      'sft.epochs',
      'sft.lr',
      'sft.batch_size',
      'sft.demos',
      'sft.mistake_rate',
      'sft.imitate_mistakes',
      'sft.demos_path',
      'sft.eval_every',
      'sft.keep_best',
      'sft.stop_at',
      'sft.schedule',
    ],
    when: (c, job) => job === 'train' && !c.sft.warm_start,
    why: 'with sft.warm_start false (`arbor train` runs SFT before RL only with sft.warm_start: true; `arbor demo` always does)',
  },
  { keys: ['sft.warm_start'], when: (_c, job) => job === 'sft', why: 'in `arbor sft` (SFT only)' },
  { keys: ['sft.eval_every'], when: (c) => c.eval.validation === 0, why: 'with eval.validation 0 (there is no validation split to score)' },
  { keys: ['sft.keep_best', 'sft.stop_at'], when: (c) => c.sft.eval_every === 0, why: 'with sft.eval_every 0 (no validation scores to choose by)' },
  {
    keys: ['eval.validation'],
    when: (c) => c.sft.eval_every === 0,
    why: 'unless sft.eval_every scores it (a held-back split nothing reads would only shrink the training questions)',
  },
  {
    keys: ['model.recompute_layers'],
    when: (c) => c.backend === 'tfjs',
    why: 'with backend "tfjs" (tfjs runs eagerly with its own autodiff; recompute is an ORT train-graph feature)',
  },
  {
    keys: ['model.hidden_size', 'model.layers', 'model.heads'],
    when: (c) => !!c.model.path,
    why: 'with model.path (it sizes the tiny built-in model; a loaded model keeps its own size)',
  },
  // Every registered entry's own section (algorithm.<name>, task.<kind>): sectionRules(); the
  // shared keys only some entries read (algorithm.gamma, algorithm.dual_clip, …): readsRules().
  { keys: ['algorithm.kl_type', 'algorithm.kl_in'], when: (c) => c.algorithm.kl_coef === 0, why: 'at algorithm.kl_coef 0 (no KL term)' },
  {
    keys: ['model.quantize_base', 'model.quantize_block'],
    when: (c) => !c.model.lora,
    why: 'without model.lora (the frozen base of a LoRA run is what is quantized)',
  },
  { keys: ['model.quantize_block'], when: (c) => (c.model.quantize_base ?? 'none') === 'none', why: 'with model.quantize_base "none"' },
  {
    keys: ['model.quantize_base'],
    when: (c) => c.backend === 'tfjs',
    why: 'with backend "tfjs" (the quantized base runs on ONNX Runtime: MatMulNBits)',
  },
  {
    keys: ['rollout.quantize'],
    when: (c) => !!c.model.lora,
    why: 'with model.lora: use model.quantize_base (the frozen base quantized in every phase, so sampler and learner are one model); rollout.quantize quantizes the sampler of a full fine-tune',
  },
  {
    keys: ['rollout.quantize'],
    when: (c, job) => c.backend === 'tfjs' || c.device === 'webgpu' || !!c.environment.agent || job === 'rollout',
    why: (c) =>
      c.backend === 'tfjs'
        ? 'with backend "tfjs" (quantized decoding is an ONNX Runtime session: MatMulNBits)'
        : c.device === 'webgpu'
          ? 'with device "webgpu" (the quantized decode session runs on the CPU provider)'
          : c.environment.agent
            ? "with environment.agent (the agent program's calls are served by the float32 model)"
            : 'in `arbor rollout` (it samples with the float32 model; quantized sampling is for training rollouts)',
  },
  {
    keys: ['algorithm.tis'],
    when: (c) => c.algorithm.old_logprobs === 'rollout',
    why: 'with algorithm.old_logprobs "rollout" (the old logprobs are then the sampler\'s own, so π_old / π_sampler is 1 on every token; use "recompute")',
  },
  {
    keys: ['algorithm.dynamic_sampling.max_rounds', 'algorithm.dynamic_sampling.gen_prompts'],
    when: (c) => !c.algorithm.dynamic_sampling.enabled,
    why: 'with algorithm.dynamic_sampling.enabled false',
  },
  {
    keys: ['algorithm.overlong.buffer', 'algorithm.overlong.penalty'],
    when: (c) => !c.algorithm.overlong.enabled,
    why: 'with algorithm.overlong.enabled false',
  },
  { keys: ['optim.min_lr_ratio'], when: (c) => c.optim.schedule === 'constant', why: 'with optim.schedule "constant" (the floor of the cosine decay)' },
  {
    keys: [
      'rollout.branching.initial_samples',
      'rollout.branching.beam_size',
      'rollout.branching.alpha',
      'rollout.branching.beta',
      'rollout.branching.entropy_window',
      'rollout.branching.attribution',
      'rollout.branching.aepo',
    ],
    when: (c) => c.rollout.branching.mode === 'none',
    why: 'with rollout.branching.mode "none" (no branching rollouts)',
  },
  {
    keys: ['rollout.branching.aepo'],
    when: (c) => c.rollout.branching.mode === 'arpo',
    why: 'with rollout.branching.mode "arpo" (AEPO\'s budget split and penalty)',
  },
  {
    keys: ['rollout.branching.initial_samples'],
    when: (c) => c.rollout.branching.mode === 'aepo',
    why: 'with rollout.branching.mode "aepo" (pre-monitoring sets the global samples)',
  },
  {
    keys: ['optim.lr', 'optim.warmup_steps', 'optim.schedule', 'optim.min_lr_ratio'],
    when: (_c, job) => job === 'sft',
    why: 'in `arbor sft` (SFT uses sft.lr with its own warm-up and cosine decay; optim.* schedules RL)',
  },
  {
    keys: ['environment.max_calls_per_turn', 'environment.tool_timeout_ms', 'environment.max_observation_tokens'],
    when: (c, job) => !!c.environment.agent && !c.sft.warm_start && job !== 'sft',
    why: 'with environment.agent and no SFT warm start (the agent program runs its own tools; these limits apply to the episodes Arbor runs, the scripted demonstrations)',
  },
  { keys: ['checkpoint.every'], when: (_c, job) => job === 'sft', why: 'in `arbor sft` (SFT saves one checkpoint when it ends or is stopped)' },
];

const valueAtPath = (o: unknown, path: string) =>
  path.split('.').reduce<unknown>((x, k) => (x && typeof x === 'object' ? (x as Record<string, unknown>)[k] : undefined), o);
let defaultsCache: { schema: unknown; cfg: ExperimentConfig } | undefined;
/** Whether the raw config gives `path` a value other than its default. */
function isSet(raw: unknown, path: string): boolean {
  const schema = configSchema();
  if (defaultsCache?.schema !== schema) defaultsCache = { schema, cfg: schema.parse({ model: { init: 'tiny' } }) };
  const v = valueAtPath(raw, path);
  return v !== undefined && JSON.stringify(v) !== JSON.stringify(valueAtPath(defaultsCache.cfg, path));
}

/** Keys set that would do nothing in this configuration (INERT_RULES): refused, naming the key. */
function inertKeys(raw: unknown, cfg: ExperimentConfig, job: ConfigJob | undefined): { field: string; message: string }[] {
  const out: { field: string; message: string }[] = [];
  if (job === 'stored') return out;
  for (const r of [...readsRules(), ...INERT_RULES, ...sectionRules()])
    if (r.when(cfg, job))
      for (const k of r.keys)
        if (isSet(raw, k) && !out.some((o) => o.field === k))
          out.push({ field: k, message: `has no effect ${typeof r.why === 'string' ? r.why : r.why(cfg)}; remove it` });
  return out;
}

/** Leaf keys the raw config sets (to other than the default) that `job` does not read (JOB_SCOPE). */
export function keysOutsideScope(raw: unknown, job: ConfigJob): string[] {
  const scope = JOB_SCOPE[job];
  if (!scope || !raw || typeof raw !== 'object') return [];
  const leaves: string[] = [];
  const walk = (o: unknown, prefix: string) => {
    if (o && typeof o === 'object' && !Array.isArray(o) && prefix !== 'environment.mcp_servers')
      for (const [k, v] of Object.entries(o)) walk(v, prefix ? `${prefix}.${k}` : k);
    else leaves.push(prefix);
  };
  walk(raw, '');
  const out = (k: string) => (JOB_UNREAD[job] ?? []).some((s) => k === s || k.startsWith(`${s}.`));
  return leaves.filter((k) => (out(k) || !scope.some((s) => k === s || k.startsWith(`${s}.`))) && isSet(raw, k));
}

/**
 * Load, parse and validate a config file; relative paths inside resolve against its folder (the
 * result's `dir`). Its `plugins:` are loaded first (asked for, engine/config/plugins.ts).
 */
export async function loadConfig(
  file: string,
  overrides?: (raw: Record<string, unknown>) => void,
  opts: Pick<ValidateOptions, 'job' | 'warn'> = {},
): Promise<LoadedConfig> {
  if (!existsSync(file)) throw new ConfigError([{ field: '', message: `config file not found: ${file}` }], file);
  const raw = parseConfigText(readFileSync(file, 'utf8'), file);
  if (overrides && raw && typeof raw === 'object') overrides(raw as Record<string, unknown>);
  const baseDir = dirname(resolve(file));
  await loadPlugins(raw, baseDir, `the config ${file}`, file);
  return validateLoaded(raw, { baseDir, file, ...opts });
}

/** JSON Schema (draft 2020-12) of the experiment config, for the run templates registry and UI form. */
export function experimentJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(configSchema(), { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}
