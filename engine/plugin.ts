/**
 * What a plugin (a config's `plugins:` file, engine/config/plugins.ts) imports: the four
 * `register…` functions and the helpers their entries are written with (the built-in entries are
 * written with the same functions, one module each; engine/builtins.ts lists them). One module, outside the
 * layers (nothing in engine/ imports it), so a plugin's imports name one file of the checkout.
 * README "Write your own …" shows one plugin of each kind (tests/engine/config/fixtures/plugins/).
 */
export { z } from 'zod';
// Advantage estimators (algorithm.adv_estimator).
export { broadcast, klPenalised, registerEstimator, type Estimator, type EstimatorEpisode, type EstimatorOptions } from './rl/index';
// Policy losses (algorithm.policy_loss).
export {
  aggregateLoss,
  finish,
  lossInputs,
  lossKey,
  registerPolicyLoss,
  type LossInputs,
  type LossSignals,
  type PolicyLoss,
  type PolicyLossConfig,
} from './rl/policy-losses';
// What an entry says of itself beside its numerics: the export's rows, the shared keys it reads.
export type { KeyReads, VerlRow } from './base/registry';
export type { Ops } from './tensor/ops';
// Tool-call formats (environment.format).
export { registerFormat, type FormatEntry, type FormatOptions, type ToolCallFormat } from './env/formats';
export { capCalls, DEFAULT_MAX_CALLS, lastTag, safeJson, settle } from './env/format-common';
export type { ParsedCall } from './env/tool';
// Task kinds (task.kind).
export { registerTaskKit, type BuiltinTools, type TaskKindEntry } from './tasks/registry';
export type { KitExtras, TaskKit } from './tasks/kit';
export type { ExperimentConfig, TaskKindSpec } from './config/experiment';
export type { EnvTask } from './env/task';
export { envSetup, formatExpert, taskTools, toolEnvTask } from './tasks/env-setup';
export { tinyTaskModel } from './tasks/multihop/kit';
export { calculatorTool } from './env/calculator';
export { buildByteBpeTokenizer, HfTokenizer } from './model/tokenizer';
export { mulberry32 } from './base/rng';
