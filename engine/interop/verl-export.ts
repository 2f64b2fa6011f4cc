/**
 * `arbor export verl`: hand an experiment to verl (Ray + FSDP/Megatron + vLLM/SGLang) when one
 * machine is not enough. The output folder holds
 *
 *   data/train.parquet, data/val.parquet   the RL and held-out tasks as verl agent-loop rows
 *                                          (data_source, agent_name, prompt, ability, reward_model,
 *                                          extra_info with index, tools_kwargs, interaction_kwargs)
 *   arbor-experiment.json                  the experiment config (model.path = the checkpoint)
 *   tool_config.yaml                       verl tools: arbor_tool.ArborMcpTool entries that call
 *                                          `arbor mcp serve --http` (per-sample tools_kwargs as
 *                                          MCP _meta, so per-question tools such as the multi-hop
 *                                          world's search work)
 *   tool_config.mcp.yaml, mcp_servers.json verl's own `type: mcp` entries over stdio (for
 *                                          environments without per-question state)
 *   arbor_tool.py, reward.py               the tool class; the reward (verl's custom_reward_function
 *                                          signature) scoring through `arbor verl-reward`
 *   run_verl.sh                            starts `arbor mcp serve`, then verl.trainer.main_ppo with
 *                                          the Hydra overrides equivalent to the Arbor settings
 *   README.md                              every Arbor setting and what it became (or why none)
 */
import { chmodSync, copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify as yamlStringify } from 'yaml';
import type { RolloutTask } from '../rollout/ports';
import type { ExperimentConfig } from '../config/experiment';
import type { TaskKit } from '../tasks/kit';
import { isAdapterFolder, readPeftConfig } from '../model/peft';
import type { VerlRow } from '../base/registry';
import { formatEntry, FORMAT_NAMES } from '../env/formats';
import { getEstimator } from '../rl/index';
import { getPolicyLoss, lossOptions } from '../rl/policy-losses';
import { openConfigEnvironment, taskPromptMessages, VERL_TOOL_PARSER } from './environment';
import { inferStruct, writeParquet, type PqType } from './parquet';

const HERE = fileURLToPath(new URL('.', import.meta.url));

export interface VerlExportSource {
  cfg: ExperimentConfig;
  /** The folder the config was read from (LoadedConfig.dir; consent: a workspace inside it is the config's own), when known. */
  dir?: string;
  /** The model verl starts from: the run's last checkpoint (HF folder, or a PEFT adapter folder). */
  modelPath?: string;
  /** What was exported (a run id or a config file), for the README. */
  source: string;
}

export interface MappingRow {
  arbor: string;
  value: unknown;
  /** Hydra override(s) it became, or undefined when there is no verl equivalent. */
  verl?: string[];
  note?: string;
}

export interface VerlExportResult {
  dir: string;
  files: string[];
  train: number;
  val: number;
  overrides: string[];
  mapping: MappingRow[];
}

type Loose = Record<string, unknown>;
const get = (o: unknown, path: string): unknown => path.split('.').reduce<unknown>((a, k) => (a && typeof a === 'object' ? (a as Loose)[k] : undefined), o);

/** Every leaf key of the config (dotted), so the README accounts for each setting. */
function leaves(o: unknown, prefix = ''): string[] {
  if (!o || typeof o !== 'object' || Array.isArray(o)) return [prefix];
  return Object.entries(o as Loose).flatMap(([k, v]) => leaves(v, prefix ? `${prefix}.${k}` : k));
}

/** One line: control characters (newlines included) become spaces, for comments and single-line fields. */
export const oneLine = (s: string): string => s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ');

/**
 * A value in Hydra's override grammar: plain when it is a simple token, else single-quoted with
 * Hydra's escapes (\' for a quote, backslashes before a quote doubled, \${ so OmegaConf does not
 * interpolate), on one line.
 */
export const hv = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(hv).join(',')}]`;
  if (typeof v !== 'string') return String(v);
  if (/^[A-Za-z0-9_./-]+$/.test(v)) return v;
  const q = oneLine(v)
    .replace(/(\\+)(?='|$)/g, '$1$1')
    .replace(/'/g, "\\'")
    .replace(/\$\{/g, '\\${');
  return `'${q}'`;
};

/** A word for bash: single-quoted, a quote inside written '\'' (nothing in it expands). */
/**
 * Every string of a YAML file verl reads with OmegaConf, escaped so that no `${…}` in it is an
 * interpolation (`${oc.env:HF_TOKEN}` in a tool's description must stay text): `\${` is
 * OmegaConf's literal `${`, and backslashes right before it are doubled first (`\\${` would be a
 * literal backslash and then an interpolation). Keys are not interpolated.
 */
export function omegaLiteral<T>(v: T): T {
  if (typeof v === 'string') return v.replace(/(\\*)\$\{/g, (_m, bs: string) => `${bs}${bs}\\\${`) as T;
  if (Array.isArray(v)) return v.map(omegaLiteral) as T;
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, omegaLiteral(x)])) as T;
  return v;
}

export const shq = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** A Python string literal (JSON's string syntax is a subset of Python's). */
const pyStr = (s: string): string => JSON.stringify(s);

/**
 * The mapping as it is written: `map` accounts for Arbor keys and records the verl overrides they
 * become (or why there are none); `entry` writes a registry entry's own rows (the chosen estimator,
 * policy loss or format: engine/base/registry.ts VerlRow), or one row saying verl has no counterpart.
 */
class VerlRows {
  readonly rows: MappingRow[] = [];
  readonly overrides: string[] = [];
  readonly covered = new Set<string>();

  constructor(private readonly cfg: ExperimentConfig) {}

  map(keys: string | string[], verl: Record<string, unknown> | undefined, note?: string): void {
    const ks = Array.isArray(keys) ? keys : [keys];
    for (const k of ks) this.covered.add(k);
    // a path under the export folder stays $HERE/… for run_verl.sh to expand (HERE is its own folder)
    const o = verl ? Object.entries(verl).map(([k, v]) => `${k}=${typeof v === 'string' && v.startsWith('$HERE/') ? v : hv(v)}`) : undefined;
    if (o) this.overrides.push(...o);
    this.rows.push({ arbor: ks.join(', '), value: ks.length === 1 ? get(this.cfg, ks[0]!) : ks.map((k) => get(this.cfg, k)), verl: o, note });
  }

  entry(selector: string, none: string, own: VerlRow[] | undefined): void {
    for (const row of own ?? [{ keys: selector, note: none }]) this.map(row.keys, row.verl, row.note);
  }

  /** Every leaf of the config not yet accounted for (keys added to the config later) is listed, never silently dropped. */
  rest(): void {
    for (const k of leaves(this.cfg)) {
      if (this.covered.has(k) || [...this.covered].some((c) => k.startsWith(`${c}.`))) continue;
      this.rows.push({ arbor: k, value: get(this.cfg, k), note: 'not mapped by this exporter' });
    }
  }
}

/** How run_verl.sh's batch sizes are computed, for the notes of the keys it sizes. */
const COMPUTED = "computed by run_verl.sh from trainer.n_gpus_per_node × trainer.nnodes on its command line (verl's divisibility checks, see README)";

/**
 * The Hydra overrides equivalent to an Arbor config, and a row for every Arbor setting.
 * `promptTokens` is the longest prompt of the exported tasks (for data.max_prompt_length).
 */
export function verlMapping(
  cfg: ExperimentConfig,
  ctx: { modelPath: string; promptTokens: number; toolFormat: string; adapter?: AdapterExport },
): { overrides: string[]; mapping: MappingRow[]; batch: BatchPlan } {
  const m = new VerlRows(cfg);
  const basePath = mapModel(m, cfg, ctx);
  const batch = mapAlgorithm(m, cfg, basePath);
  mapRolloutAndLoop(m, cfg, ctx.promptTokens);
  mapTaskAndEnvironment(m, cfg);
  m.rest();
  return { overrides: m.overrides, mapping: m.rows, batch };
}

/** model.*: the checkpoint (an HF folder, or a PEFT adapter on its base) and LoRA; returns the base model's path (a critic starts from it). */
function mapModel(m: VerlRows, cfg: ExperimentConfig, ctx: { modelPath: string; adapter?: AdapterExport }): string {
  const ad = ctx.adapter;
  const basePath = ad ? ad.base : ctx.modelPath;
  if (ad)
    m.map(
      ['model.path', 'model.init'],
      { 'actor_rollout_ref.model.path': ad.base, 'actor_rollout_ref.model.lora_adapter_path': ad.path },
      "the run's last checkpoint is a PEFT LoRA adapter: verl loads its base model and puts the adapter on it (PeftModel.from_pretrained, trainable)",
    );
  else m.map(['model.path', 'model.init'], { 'actor_rollout_ref.model.path': ctx.modelPath }, 'the last checkpoint of the run (an HF folder)');
  m.map(['model.hidden_size', 'model.layers', 'model.heads'], undefined, 'sizes of the built-in tiny model; verl loads the checkpoint folder as it is');
  const lora = get(cfg, 'model.lora') as Loose | undefined;
  if (ad)
    m.map(
      ['model.lora.rank', 'model.lora.alpha', 'model.lora.target_modules', 'model.lora.dropout'],
      {
        'actor_rollout_ref.model.lora_rank': ad.rank,
        'actor_rollout_ref.model.lora_alpha': ad.alpha,
        'actor_rollout_ref.model.target_modules': ad.targets,
      },
      "the adapter's own adapter_config.json (verl has no LoRA dropout setting)",
    );
  else if (lora) {
    const tm = lora.target_modules;
    m.map(['model.lora.rank', 'model.lora.alpha', 'model.lora.target_modules'], {
      'actor_rollout_ref.model.lora_rank': lora.rank,
      'actor_rollout_ref.model.lora_alpha': lora.alpha,
      'actor_rollout_ref.model.target_modules': Array.isArray(tm) ? tm : 'all-linear',
    });
    m.map('model.lora.dropout', undefined, 'verl has no LoRA dropout setting (PEFT default 0 is used)');
  } else m.overrides.push('actor_rollout_ref.model.lora_rank=0');
  return basePath;
}

/** algorithm.*: the chosen estimator's and loss's own rows (their registry entries), then the shared keys; returns the batch plan run_verl.sh sizes. */
function mapAlgorithm(m: VerlRows, cfg: ExperimentConfig, basePath: string): BatchPlan {
  const a = cfg.algorithm as unknown as Loose;
  const r = cfg.rollout;
  const o = cfg.optim;
  const est = String(a.adv_estimator);
  const estimator = getEstimator(est);
  const estOptions = estimator.options ? a[est] : undefined;
  m.entry('algorithm.adv_estimator', `"${est}" has no verl estimator of that name`, estimator.verl?.(cfg.algorithm, estOptions));
  if (!m.covered.has('algorithm.norm_adv_by_std')) m.map('algorithm.norm_adv_by_std', { 'algorithm.norm_adv_by_std_in_grpo': a.norm_adv_by_std });
  const pl = String(a.policy_loss);
  m.entry('algorithm.policy_loss', `"${pl}" has no verl policy loss of that name`, getPolicyLoss(pl).verl?.(cfg, lossOptions(cfg)));
  m.map('algorithm.loss_agg_mode', { 'actor_rollout_ref.actor.loss_agg_mode': a.loss_agg_mode });
  const klType: Record<string, string> = { k1: 'kl', k2: 'mse', k3: 'low_var_kl' };
  const kc = Number(a.kl_coef ?? 0);
  if (kc === 0)
    m.map(
      ['algorithm.kl_coef', 'algorithm.kl_type', 'algorithm.kl_in'],
      { 'actor_rollout_ref.actor.use_kl_loss': false, 'algorithm.use_kl_in_reward': false },
      'KL off',
    );
  else if (a.kl_in === 'reward')
    m.map(['algorithm.kl_coef', 'algorithm.kl_type', 'algorithm.kl_in'], {
      'algorithm.use_kl_in_reward': true,
      'algorithm.kl_ctrl.type': 'fixed',
      'algorithm.kl_ctrl.kl_coef': kc,
      'algorithm.kl_penalty': klType[String(a.kl_type)] ?? a.kl_type,
      'actor_rollout_ref.actor.use_kl_loss': false,
    });
  else
    m.map(['algorithm.kl_coef', 'algorithm.kl_type', 'algorithm.kl_in'], {
      'actor_rollout_ref.actor.use_kl_loss': true,
      'actor_rollout_ref.actor.kl_loss_coef': kc,
      'actor_rollout_ref.actor.kl_loss_type': klType[String(a.kl_type)] ?? a.kl_type,
      'algorithm.use_kl_in_reward': false,
    });
  m.map('algorithm.entropy_coef', { 'actor_rollout_ref.actor.entropy_coeff': a.entropy_coef });
  m.map(['algorithm.gamma', 'algorithm.lam'], { 'algorithm.gamma': a.gamma, 'algorithm.lam': a.lam });
  if (estimator.needsCritic) {
    m.map('algorithm.value_clip', { 'critic.cliprange_value': a.value_clip });
    m.overrides.push(`critic.model.path=${hv(basePath)}`, `critic.optim.lr=${hv(o.lr)}`);
  } else m.map('algorithm.value_clip', undefined, `no critic: algorithm.adv_estimator "${est}" needs none`);
  m.map('algorithm.value_coef', undefined, "verl's critic has its own loss and optimizer and no value-loss coefficient");
  m.map('algorithm.ppo_epochs', { 'actor_rollout_ref.actor.ppo_epochs': a.ppo_epochs });
  const batch: BatchPlan = {
    prompts: r.prompts_per_step,
    n: r.n,
    miniBatches: Number(a.mini_batches ?? 1),
    microBatches: Number(a.micro_batches ?? 1),
    critic: estimator.needsCritic,
    ref: kc !== 0,
  };
  m.map('algorithm.mini_batches', undefined, `actor_rollout_ref.actor.ppo_mini_batch_size (prompts per mini-batch): ${COMPUTED}`);
  m.map('algorithm.micro_batches', undefined, `actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu and the log-prob micro-batches: ${COMPUTED}`);
  // Arbor blocks that only verl's DAPO recipe has (not verl.trainer.main_ppo): the note says
  // whether this run uses the block and where the recipe keeps it.
  const dapoOnly: [block: string, keys: string[], ifOn: string, ifOff: string][] = [
    [
      'dynamic_sampling',
      ['enabled', 'max_rounds', 'gen_prompts'],
      "use verl's DAPO recipe (algorithm.filter_groups; gen_prompts is its data.gen_batch_size) to keep it",
      "verl's equivalent lives in the DAPO recipe (algorithm.filter_groups)",
    ],
    [
      'overlong',
      ['enabled', 'buffer', 'penalty'],
      "use the DAPO recipe's reward_model.overlong_buffer.{enable,len,penalty_factor}",
      "verl's equivalent is the DAPO recipe's overlong_buffer",
    ],
  ];
  for (const [block, keys, ifOn, ifOff] of dapoOnly)
    m.map(
      keys.map((k) => `algorithm.${block}.${k}`),
      undefined,
      (a[block] as Loose | undefined)?.enabled ? `ENABLED in Arbor but not in verl.trainer.main_ppo: ${ifOn}` : `off; ${ifOff}`,
    );
  m.map(
    'algorithm.process_rewards',
    undefined,
    a.process_rewards ? "ENABLED in Arbor; verl's tool agent loop ignores tool step rewards, so only the outcome reward trains" : 'off',
  );

  return batch;
}

/** rollout.*, optim.*, the loop (steps, eval, checkpoint, seed, name). */
function mapRolloutAndLoop(m: VerlRows, cfg: ExperimentConfig, promptTokens: number): void {
  const r = cfg.rollout;
  const o = cfg.optim;
  const response = Math.max(1, Math.min(r.max_turns * r.max_new_tokens, r.max_total_length - promptTokens));
  m.map('rollout.prompts_per_step', undefined, `data.train_batch_size: ${COMPUTED} (rounded up to a multiple the GPUs divide, with a notice)`);
  m.map('rollout.n', { 'actor_rollout_ref.rollout.n': r.n });
  m.map(['rollout.temperature', 'rollout.top_p'], { 'actor_rollout_ref.rollout.temperature': r.temperature, 'actor_rollout_ref.rollout.top_p': r.top_p });
  m.map('rollout.max_turns', { 'actor_rollout_ref.rollout.multi_turn.max_assistant_turns': r.max_turns });
  m.map(
    ['rollout.max_new_tokens', 'rollout.max_total_length'],
    { 'data.max_prompt_length': promptTokens, 'data.max_response_length': response },
    `verl bounds the whole response, not each turn: response = min(max_turns × max_new_tokens, max_total_length − longest prompt ${promptTokens}) = ${response}`,
  );
  // optim
  m.map('optim.lr', { 'actor_rollout_ref.actor.optim.lr': o.lr });
  m.map('optim.warmup_steps', { 'actor_rollout_ref.actor.optim.lr_warmup_steps': o.warmup_steps });
  m.map(['optim.schedule', 'optim.min_lr_ratio'], {
    'actor_rollout_ref.actor.optim.warmup_style': o.schedule,
    'actor_rollout_ref.actor.optim.min_lr_ratio': o.min_lr_ratio,
  });
  m.map('optim.weight_decay', { 'actor_rollout_ref.actor.optim.weight_decay': o.weight_decay });
  m.map(['optim.beta1', 'optim.beta2'], { 'actor_rollout_ref.actor.optim.betas': [o.beta1, o.beta2] });
  m.map('optim.grad_clip', { 'actor_rollout_ref.actor.grad_clip': o.grad_clip });
  // loop
  m.map('steps', { 'trainer.total_training_steps': cfg.steps });
  m.map('eval.every', { 'trainer.test_freq': cfg.eval.every === 0 ? -1 : cfg.eval.every });
  m.map(['eval.n_questions'], undefined, 'the held-out parquet holds that many questions (data/val.parquet)');
  m.map(
    ['eval.validation'],
    undefined,
    "the SFT warm start's validation split (sft.eval_every), already used; data/train.parquet holds every training row, those too",
  );
  m.map('eval.temperature', {
    'actor_rollout_ref.rollout.val_kwargs.temperature': cfg.eval.temperature,
    'actor_rollout_ref.rollout.val_kwargs.do_sample': cfg.eval.temperature > 0,
  });
  m.map(['checkpoint.every', 'checkpoint.keep'], { 'trainer.save_freq': cfg.checkpoint.every, 'trainer.max_actor_ckpt_to_keep': cfg.checkpoint.keep });
  m.map('seed', { 'data.seed': cfg.seed });
  m.map('name', { 'trainer.experiment_name': oneLine(cfg.name ?? 'arbor-export') });
}

/** What verl does not have (sft.*, task.*: the parquet rows), the environment (format, limits, files), logging and the single-machine settings. */
function mapTaskAndEnvironment(m: VerlRows, cfg: ExperimentConfig): void {
  for (const k of leaves(cfg.sft, 'sft')) m.covered.add(k);
  m.rows.push({
    arbor: 'sft.*',
    value: cfg.sft.warm_start,
    note: "the SFT warm start already happened: the exported model is the checkpoint after it (verl's SFT trainer is a separate program)",
  });
  for (const k of leaves(cfg.task, 'task')) m.covered.add(k);
  m.rows.push({ arbor: 'task.*', value: cfg.task.kind, note: "the tasks themselves are the parquet rows; the reward is the environment's (reward.py)" });
  const e = (cfg.environment ?? {}) as Loose;
  const formatRows = formatEntry(String(e.format)).verl?.rows;
  if (formatRows) m.entry('environment.format', '', formatRows);
  else
    m.map(
      'environment.format',
      { 'actor_rollout_ref.rollout.multi_turn.format': VERL_TOOL_PARSER },
      `verl's tool agent loop parses Hermes <tool_call> JSON only; the "${String(e.format)}" format has no verl parser`,
    );
  m.map('environment.max_calls_per_turn', { 'actor_rollout_ref.rollout.multi_turn.max_parallel_calls': e.max_calls_per_turn });
  const obsChars = Number(e.max_observation_tokens ?? 256) * 4;
  m.map(
    'environment.max_observation_tokens',
    { 'actor_rollout_ref.rollout.multi_turn.max_tool_response_length': obsChars, 'actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side': 'left' },
    'verl cuts tool responses in characters: about 4 per token',
  );
  m.map(
    'environment.tool_timeout_ms',
    undefined,
    `tool_config.yaml: timeout ${Math.ceil(Number(e.tool_timeout_ms ?? 5000) / 1000)} s per call (ArborMcpTool), and arbor mcp serve applies the same limit`,
  );
  for (const k of leaves(e, 'environment')) m.covered.add(k);
  m.rows.push({
    arbor: 'environment.tools, .reward, .tasks, .workspace, .mcp_servers',
    value: '(files)',
    note: 'served by `arbor mcp serve --config arbor-experiment.json` (tools) and scored by reward.py (reward); tasks are the parquet rows',
  });
  m.map(
    ['logging.full_trajectories_every'],
    { 'trainer.rollout_data_dir': '$HERE/rollouts' },
    'verl dumps decoded rollouts each step; import them with `arbor import-verl rollouts`',
  );
  m.map(['backend', 'device', 'threads'], undefined, 'single-machine execution settings; verl places work with Ray (trainer.n_gpus_per_node, trainer.nnodes)');
}

/** A PEFT LoRA adapter handed to verl: its base model and its settings (adapter_config.json). */
export interface AdapterExport {
  path: string;
  base: string;
  rank: number;
  alpha: number;
  targets: string[];
}

/** What run_verl.sh needs to size verl's batches for the GPUs it is given (Arbor's settings). */
export interface BatchPlan {
  /** rollout.prompts_per_step */
  prompts: number;
  /** rollout.n */
  n: number;
  /** algorithm.mini_batches (updates per step) */
  miniBatches: number;
  /** algorithm.micro_batches (gradient accumulation per update) */
  microBatches: number;
  /** a critic (gae): its batch sizes too */
  critic: boolean;
  /** a reference policy (KL): its log-prob micro-batch too */
  ref: boolean;
}

/**
 * The batch-size overrides run_verl.sh computes for `gpus` GPUs in all (n_gpus_per_node ×
 * nnodes): the same arithmetic as the script's bash (batchScript), for tests and the README.
 * verl (FSDP, no dynamic batch size) requires: train_batch_size × n divisible by the GPU count;
 * ppo_mini_batch_size ≤ train_batch_size; ppo_mini_batch_size × n ÷ GPUs > 0 and divisible by
 * ppo_micro_batch_size_per_gpu. So the prompts per step are rounded up to a multiple of
 * GPUs ÷ gcd(n, GPUs), a mini-batch is a multiple of that too, and the micro-batch per GPU is the
 * largest divisor of the per-GPU mini-batch not above its share (÷ algorithm.micro_batches).
 */
export function batchOverrides(b: BatchPlan, gpus: number): Record<string, number> {
  const gcd = (x: number, y: number): number => (y === 0 ? x : gcd(y, x % y));
  const step = gpus / gcd(b.n, gpus);
  const train = Math.ceil(b.prompts / step) * step;
  const mini = Math.max(step, Math.floor(Math.floor(b.prompts / b.miniBatches) / step) * step);
  const perGpu = (mini * b.n) / gpus;
  let micro = Math.max(1, Math.floor(perGpu / b.microBatches));
  while (perGpu % micro !== 0) micro--;
  return {
    'data.train_batch_size': train,
    'actor_rollout_ref.actor.ppo_mini_batch_size': mini,
    'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu': micro,
    'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu': micro,
    ...(b.ref ? { 'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu': micro } : {}),
    ...(b.critic ? { 'critic.ppo_mini_batch_size': mini, 'critic.ppo_micro_batch_size_per_gpu': micro } : {}),
  };
}

/** The bash of run_verl.sh that does batchOverrides for the GPUs on its command line, into the array BATCH. */
function batchScript(b: BatchPlan): string {
  const keys = Object.keys(batchOverrides(b, 1));
  const value: Record<string, string> = {
    'data.train_batch_size': '$TRAIN_BS',
    'actor_rollout_ref.actor.ppo_mini_batch_size': '$MINI',
    'critic.ppo_mini_batch_size': '$MINI',
  };
  return `# Batch sizes for the GPUs on the command line (trainer.n_gpus_per_node × trainer.nnodes; verl's
# defaults 8 × 1), so that verl's checks pass: train_batch_size × n divisible by the GPU count,
# ppo_mini_batch_size × n ÷ GPUs a positive multiple of ppo_micro_batch_size_per_gpu. A key you give
# yourself on the command line is left to you.
NGPUS=8
NNODES=1
for a in "$@"; do
  case "$a" in
    trainer.n_gpus_per_node=*) NGPUS="\${a#*=}" ;;
    trainer.nnodes=*) NNODES="\${a#*=}" ;;
  esac
done
case "$NGPUS" in '' | *[!0-9]* | 0) echo "run_verl.sh: trainer.n_gpus_per_node must be a positive whole number, got '$NGPUS'" >&2; exit 2 ;; esac
case "$NNODES" in '' | *[!0-9]* | 0) echo "run_verl.sh: trainer.nnodes must be a positive whole number, got '$NNODES'" >&2; exit 2 ;; esac
GPUS=$((NGPUS * NNODES))
N=${b.n}             # rollout.n
PROMPTS=${b.prompts}       # rollout.prompts_per_step
MINI_BATCHES=${b.miniBatches}  # algorithm.mini_batches
MICRO_BATCHES=${b.microBatches} # algorithm.micro_batches
x=$N y=$GPUS
while [ "$y" -ne 0 ]; do t=$((x % y)); x=$y; y=$t; done
STEP=$((GPUS / x))
TRAIN_BS=$(((PROMPTS + STEP - 1) / STEP * STEP))
MINI=$((PROMPTS / MINI_BATCHES / STEP * STEP))
if [ "$MINI" -lt "$STEP" ]; then MINI=$STEP; fi
PER_GPU=$((MINI * N / GPUS))
MICRO=$((PER_GPU / MICRO_BATCHES))
if [ "$MICRO" -lt 1 ]; then MICRO=1; fi
while [ $((PER_GPU % MICRO)) -ne 0 ]; do MICRO=$((MICRO - 1)); done
if [ "$TRAIN_BS" -ne "$PROMPTS" ]; then
  echo "run_verl.sh: data.train_batch_size $TRAIN_BS (Arbor: $PROMPTS prompts per step), so that $N samples each split evenly over $GPUS GPUs" >&2
fi
BATCH=()
for kv in ${keys.map((k) => `"${k}=${value[k] ?? '$MICRO'}"`).join(' ')}; do
  given=0
  for a in "$@"; do
    if [ "\${a%%=*}" = "\${kv%%=*}" ]; then given=1; fi
  done
  if [ "$given" = 0 ]; then BATCH+=("$kv"); fi
done
`;
}

interface TaskRow {
  id: string;
  question: string;
  answers: string[];
  hops?: number;
}

function taskRow(t: RolloutTask, messages: { role: string; content: string }[] | undefined): TaskRow {
  const m = t.meta ?? {};
  const question = typeof m.question === 'string' ? m.question : messages?.filter((x) => x.role === 'user').at(-1)?.content;
  if (typeof question !== 'string') throw new Error(`task ${t.id}: no prompt in its metadata; cannot export it`);
  return {
    id: t.id,
    question,
    answers: Array.isArray(m.answers) ? m.answers.map(String) : [],
    ...(typeof m.hops === 'number' ? { hops: m.hops } : {}),
  };
}

export async function exportVerl(
  src: VerlExportSource,
  outDir: string,
  opts: { arborCmd?: string[]; onProgress?: (what: string) => void } = {},
): Promise<VerlExportResult> {
  const { cfg } = src;
  const { modelPath, adapter } = exportedModel(src);
  const progress = opts.onProgress ?? (() => undefined);
  mkdirSync(join(outDir, 'data'), { recursive: true });
  const files: string[] = [];
  const write = (rel: string, content: string | Uint8Array) => {
    writeFileSync(join(outDir, rel), content);
    files.push(rel);
  };

  progress('tasks');
  const env = await openConfigEnvironment({ cfg, dir: src.dir });
  const { openTaskKit } = await import('../tasks/registry');
  let kit: TaskKit;
  try {
    kit = openTaskKit(cfg, env.kitExtras);
  } catch (e) {
    await env.close();
    throw e;
  }
  const toolNames = env.tools.map((t) => t.name);
  const { train, val, promptTokens } = await taskRows(cfg.task.kind, kit, toolNames);
  progress('parquet');
  write('data/train.parquet', taskParquet(train, val, train));
  write('data/val.parquet', taskParquet(train, val, val));

  // the experiment, as `arbor mcp serve --config` and `arbor verl-reward` read it
  write('arbor-experiment.json', JSON.stringify({ ...cfg, model: { ...cfg.model, path: modelPath, init: undefined } }, null, 2) + '\n');

  const arborCmd = opts.arborCmd ?? [process.execPath, join(HERE, '../../bin/arbor.mjs')];
  const schemas = env.tools.map((t) => ({
    type: 'function',
    function: { name: t.name, description: t.description, parameters: { type: 'object', ...t.parameters } },
  }));
  await env.close();
  writeToolConfigs(write, schemas, toolNames, arborCmd, cfg.environment.tool_timeout_ms);
  copyFileSync(join(HERE, 'verl/arbor_tool.py'), join(outDir, 'arbor_tool.py'));
  files.push('arbor_tool.py');
  write(
    'reward.py',
    `# Generated by \`arbor export verl\` from ${oneLine(src.source)}.\nARBOR_CMD_DEFAULT = [${arborCmd.map(pyStr).join(', ')}]\n` +
      (await import('node:fs')).readFileSync(join(HERE, 'verl/reward.py'), 'utf8'),
  );

  const { overrides, mapping, batch } = verlMapping(cfg, { modelPath, promptTokens, toolFormat: env.format.name, adapter });
  // Each override one shell word: the $HERE paths in double quotes (only $HERE expands), every
  // other one single-quoted (nothing in it expands, whatever the config's strings hold).
  const all = [
    '"data.train_files=$HERE/data/train.parquet"',
    '"data.val_files=$HERE/data/val.parquet"',
    'data.return_raw_chat=True',
    'actor_rollout_ref.rollout.mode=async',
    'actor_rollout_ref.rollout.multi_turn.enable=True',
    '"actor_rollout_ref.rollout.multi_turn.tool_config_path=$HERE/tool_config.yaml"',
    '"custom_reward_function.path=$HERE/reward.py"',
    'custom_reward_function.name=compute_score',
    ...overrides.map((x) => (x.endsWith('=$HERE/rollouts') ? `"${x}"` : /^[A-Za-z0-9_.=/-]+$/.test(x) ? x : shq(x))),
  ];
  write('run_verl.sh', launchScript(src, arborCmd, all, batch));
  chmodSync(join(outDir, 'run_verl.sh'), 0o755);
  write('README.md', readme(src, modelPath, mapping, { train: train.length, val: val.length, tools: toolNames, format: env.format.name, adapter, batch }));
  return { dir: outDir, files, train: train.length, val: val.length, overrides: all, mapping };
}

/** The model verl starts from: the run's last checkpoint, and for a LoRA run (a PEFT adapter folder) its base model and the adapter's settings. */
function exportedModel(src: VerlExportSource): { modelPath: string; adapter?: AdapterExport } {
  const modelPath = src.modelPath ?? src.cfg.model.path;
  if (!modelPath)
    throw new Error('the config has model.init: tiny and no checkpoint: export a finished run (`arbor export verl <run> <dir>`) or a config with model.path');
  if (!isAdapterFolder(modelPath)) return { modelPath };
  const { spec, baseModel } = readPeftConfig(modelPath);
  if (!baseModel)
    throw new Error(
      `${join(modelPath, 'adapter_config.json')}: no base_model_name_or_path; merge the adapter onto its base (\`arbor merge\`) and export the merged folder`,
    );
  return { modelPath, adapter: { path: modelPath, base: baseModel, rank: spec.rank, alpha: spec.alpha, targets: [...spec.targets] } };
}

/** One parquet row (verl's agent-loop dataset layout). */
type ParquetRow = ReturnType<typeof taskRowOf>;

/**
 * One verl agent-loop row of a task. Its prompt is the conversation the task's episodes start from
 * in Arbor (its ToolEnv's messages: a system message, the format's instruction and the task's
 * prompt); verl renders it with the model's chat template and the tool schemas, as Arbor does.
 */
function taskRowOf(kind: string, t: RolloutTask, split: 'train' | 'test', index: number, toolNames: string[]) {
  const messages = taskPromptMessages(t);
  const q = taskRow(t, messages);
  return {
    data_source: `arbor/${kind}`,
    agent_name: 'tool_agent',
    prompt: messages ?? [{ role: 'user', content: q.question }],
    ability: 'tool-use',
    reward_model: { style: 'rule', ground_truth: { target: q.answers } },
    extra_info: {
      split,
      index,
      task_id: q.id,
      question: q.question,
      ...(q.hops !== undefined ? { hops: q.hops } : {}),
      need_tools_kwargs: toolNames.length > 0,
      tools_kwargs: Object.fromEntries(toolNames.map((n) => [n, { create_kwargs: { task: q.id } }])),
      interaction_kwargs: { query: q.question },
    },
  };
}

/** The kit's RL tasks and held-out tasks as verl rows, and the longest prompt in tokens (data.max_prompt_length). */
async function taskRows(kind: string, kit: TaskKit, toolNames: string[]): Promise<{ train: ParquetRow[]; val: ParquetRow[]; promptTokens: number }> {
  const trainTasks = kit.rlTasks ?? kit.trainTasks;
  let promptTokens = 0;
  for (const t of [...trainTasks, ...kit.evalTasks]) promptTokens = Math.max(promptTokens, (await t.createEnv().prompt()).ids.length);
  return {
    train: trainTasks.map((t, i) => taskRowOf(kind, t, 'train', i, toolNames)),
    val: kit.evalTasks.map((t, i) => taskRowOf(kind, t, 'test', i, toolNames)),
    promptTokens,
  };
}

/** A parquet file of `rows`, with the columns of every exported row (train and val share one extra_info struct). */
function taskParquet(train: ParquetRow[], val: ParquetRow[], rows: ParquetRow[]): Uint8Array {
  const extraType = inferStruct([...train, ...val].map((r) => r.extra_info as Record<string, unknown>));
  const columns: Record<string, PqType> = {
    data_source: 'string',
    agent_name: 'string',
    prompt: { list: { struct: { content: 'string', role: 'string' } } },
    ability: 'string',
    reward_model: { struct: { ground_truth: { struct: { target: { list: 'string' } } }, style: 'string' } },
    extra_info: extraType,
  };
  return new Uint8Array(writeParquet(columns, rows, ['data_source', 'agent_name', 'ability']));
}

/** verl's tool configs: ArborMcpTool entries over `arbor mcp serve --http` (tool_config.yaml), and verl's own MCP client over stdio (tool_config.mcp.yaml, mcp_servers.json). */
function writeToolConfigs(
  write: (rel: string, content: string) => void,
  schemas: { type: string; function: Record<string, unknown> }[],
  toolNames: string[],
  arborCmd: string[],
  toolTimeoutMs: number,
): void {
  write(
    'tool_config.yaml',
    `# verl tools for this environment, served by \`arbor mcp serve\` (run_verl.sh starts it).\n# Per-sample tools_kwargs.create_kwargs travel as MCP _meta["arbor/episode"].\n` +
      yamlStringify(
        omegaLiteral({
          tools: schemas.map((s) => ({
            class_name: 'arbor_tool.ArborMcpTool',
            config: { type: 'native', timeout: Math.ceil(toolTimeoutMs / 1000) },
            tool_schema: s,
          })),
        }),
      ),
  );
  write(
    'mcp_servers.json',
    JSON.stringify(
      { mcpServers: { arbor: { command: arborCmd[0], args: [...arborCmd.slice(1), 'mcp', 'serve', '--config', 'arbor-experiment.json'] } } },
      null,
      2,
    ) + '\n',
  );
  write(
    'tool_config.mcp.yaml',
    `# verl's own MCP client (type: mcp, stdio). It sends no per-sample state, so tools that need the\n# question (the multi-hop search) answer with an error there: use tool_config.yaml for those.\n` +
      yamlStringify(
        omegaLiteral({
          tools: [
            {
              class_name: 'verl.tools.mcp_base_tool.MCPBaseTool',
              config: { type: 'mcp', rate_limit: 120, timeout: 60 },
              mcp: { mcp_servers_config_path: './mcp_servers.json', tool_selected_list: toolNames },
            },
          ],
        }),
      ),
  );
}

function launchScript(src: VerlExportSource, arborCmd: string[], overrides: string[], batch: BatchPlan): string {
  return `#!/usr/bin/env bash
# Generated by \`arbor export verl\` from ${oneLine(src.source)}.
# Runs verl (python3 -m verl.trainer.main_ppo) on this folder. Extra Hydra overrides go after the
# script's name, e.g. ./run_verl.sh trainer.n_gpus_per_node=8 trainer.nnodes=1
set -euo pipefail
HERE="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
# How to start arbor on this machine (set ARBOR_CMD="arbor" once it is installed on the cluster:
# a command and its arguments separated by spaces).
if [ -n "\${ARBOR_CMD:-}" ]; then
  read -r -a ARBOR <<<"$ARBOR_CMD"
else
  ARBOR=(${arborCmd.map(shq).join(' ')})
fi
# The MCP server's token reaches it through the environment (a command-line flag would show in ps).
export ARBOR_MCP_TOKEN="\${ARBOR_MCP_TOKEN:-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')}"
ARBOR_MCP_PORT="\${ARBOR_MCP_PORT:-8765}"
export ARBOR_MCP_URL="http://127.0.0.1:\${ARBOR_MCP_PORT}/mcp"
export PYTHONPATH="$HERE\${PYTHONPATH:+:$PYTHONPATH}"

${batchScript(batch)}
# The environment's programs (tool and reward files, MCP servers) run only once approved: arbor
# lists them and asks on this terminal (remembered per content hash), or set ARBOR_YES=1 after
# reading them. The processes started below (arbor mcp serve, and reward.py's arbor verl-reward on
# every node) then run with that approval.
if [ "\${ARBOR_YES:-}" != 1 ]; then
  "\${ARBOR[@]}" verl-reward "$HERE/arbor-experiment.json" --check
  export ARBOR_YES=1
fi

# The environment's tools over MCP (streamable HTTP on 127.0.0.1, bearer token). On several
# nodes, start one per node (the rollout workers call 127.0.0.1).
"\${ARBOR[@]}" mcp serve --config "$HERE/arbor-experiment.json" --http --port "$ARBOR_MCP_PORT" >"$HERE/mcp-serve.log" 2>&1 &
MCP_PID=$!
trap 'kill "$MCP_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  if grep -q "^http://" "$HERE/mcp-serve.log" 2>/dev/null; then break; fi
  if ! kill -0 "$MCP_PID" 2>/dev/null; then echo "arbor mcp serve exited:"; cat "$HERE/mcp-serve.log"; exit 1; fi
  sleep 1
done

python3 -m verl.trainer.main_ppo \\
${overrides.map((x) => `    ${x} \\`).join('\n')}
    \${BATCH[@]+"\${BATCH[@]}"} \\
    "$@"
`;
}

/** Text in a Markdown table cell: one line, pipes escaped, no HTML. */
const cell = (s: string) => oneLine(s).replace(/\|/g, '\\|').replace(/</g, '&lt;');
/** A Markdown code span that holds any text (a fence longer than its longest backtick run). */
const code = (s: string) => {
  const t = cell(s);
  const fence = '`'.repeat(Math.max(0, ...[...t.matchAll(/`+/g)].map((m) => m[0].length)) + 1);
  return `${fence}${/^`|`$/.test(t) ? ` ${t} ` : t}${fence}`;
};

function readme(
  src: VerlExportSource,
  modelPath: string,
  mapping: MappingRow[],
  info: { train: number; val: number; tools: string[]; format: string; adapter?: AdapterExport; batch: BatchPlan },
): string {
  const table = mapping
    .map((m) => `| ${code(m.arbor)} | ${cell(JSON.stringify(m.value) ?? '')} | ${m.verl ? m.verl.map(code).join('<br>') : '—'} | ${cell(m.note ?? '')} |`)
    .join('\n');
  const sizes = [1, 2, 4, 8, 16]
    .map((g) => {
      const o = batchOverrides(info.batch, g);
      return `| ${g} | ${o['data.train_batch_size']} | ${o['actor_rollout_ref.actor.ppo_mini_batch_size']} | ${o['actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu']} |`;
    })
    .join('\n');
  return `# verl export of ${cell(src.source)}

Written by \`arbor export verl\`. Run on a machine with verl installed (and Node ≥ 20 with Arbor, for the
environment's tools and reward):

\`\`\`bash
./run_verl.sh trainer.n_gpus_per_node=8 trainer.nnodes=1
\`\`\`

| file | what |
|---|---|
| \`data/train.parquet\` | ${info.train} RL tasks as verl agent-loop rows (\`agent_name: tool_agent\`) |
| \`data/val.parquet\` | ${info.val} held-out tasks |
| \`tool_config.yaml\` | tools ${info.tools.map(code).join(', ') || '(none)'} as \`arbor_tool.ArborMcpTool\`, calling \`arbor mcp serve --http\` (started by run_verl.sh); each sample's \`extra_info.tools_kwargs.<tool>.create_kwargs\` reaches the tool as MCP \`_meta["arbor/episode"]\` |
| \`tool_config.mcp.yaml\`, \`mcp_servers.json\` | the same tools through verl's own \`type: mcp\` client (stdio); it sends no per-sample state, so only for tools that do not need the question |
| \`reward.py\` | \`compute_score(data_source, solution_str, ground_truth, extra_info)\`: the environment's reward, computed by a long-lived \`arbor verl-reward\` process (set \`ARBOR_CMD\` if arbor is installed elsewhere) |
| \`arbor-experiment.json\` | the Arbor experiment (\`model.path\` = the exported checkpoint) |
| \`run_verl.sh\` | the launch script with the Hydra overrides below; it first asks you to approve the environment's tool/reward files and MCP servers on its terminal (\`arbor verl-reward … --check\`; or set \`ARBOR_YES=1\` after reading them) |

${
  info.adapter
    ? `Model: the run's last checkpoint is a PEFT LoRA adapter, ${code(info.adapter.path)} (rank ${info.adapter.rank}, alpha ${info.adapter.alpha}, ${info.adapter.targets.join(', ')}), on the base model ${code(info.adapter.base)}: verl loads the base (\`actor_rollout_ref.model.path\`) and the adapter (\`actor_rollout_ref.model.lora_adapter_path\`, verl ≥ 0.6.1) and trains the adapter with the same rank, alpha and target modules.`
    : `Model: ${code(modelPath)} (the run's last checkpoint, an HF folder).`
}

Prompts: each row's \`prompt\` is the conversation the task's episodes start from in Arbor (the
format's instruction and the task's prompt, a system message when the task has one); verl renders
it with the model's chat template and the tool schemas of \`tool_config.yaml\`, as Arbor does.

Reward: \`reward.py\` asks \`arbor verl-reward\` for the reward of each sample, computed by the
sample's own task (\`extra_info.task_id\`, with its \`meta\`) through the same episode environment
and reward function as Arbor's training. Each tool call's success reaches it as verl's
\`extra_info.tool_rewards\` (the tool class returns +1 or −1 per call; it adds nothing to the
score; verl ≥ 0.6.1 with its reward loop, the default, passes them); a call without one (older
verl, the legacy reward manager, the last turn's calls) is run through the task's tools.

Batch sizes: \`run_verl.sh\` computes them from \`trainer.n_gpus_per_node\` × \`trainer.nnodes\` on
its command line (verl's defaults 8 × 1) so verl's checks pass: \`data.train_batch_size\` × n
divisible by the GPU count (rounded up with a notice when Arbor's ${info.batch.prompts} prompts per step are not),
\`ppo_mini_batch_size\` × n ÷ GPUs a positive multiple of \`ppo_micro_batch_size_per_gpu\`. With
n = ${info.batch.n}, ${info.batch.miniBatches} mini-batch(es) and ${info.batch.microBatches} micro-batch(es) per update:

| GPUs in all | train_batch_size | ppo_mini_batch_size | ppo_micro_batch_size_per_gpu |
|---|---|---|---|
${sizes}

Tool-call format: the environment uses **${info.format}**; verl's tool agent loop parses Hermes
\`<tool_call>\` JSON (\`multi_turn.format=${VERL_TOOL_PARSER}\`).${FORMAT_NAMES.includes(info.format) ? ` ${formatEntry(info.format).verl?.advice ?? ''}`.trimEnd() : ''}

After the run, \`arbor import-verl ./rollouts\` (decoded text) or \`arbor import-verl <agent-loop outputs>\`
(token ids, masks, logprobs) brings its trajectories back into the workbench.

## Every Arbor setting and what it became

| Arbor | value | verl override | note |
|---|---|---|---|
${table}
`;
}
