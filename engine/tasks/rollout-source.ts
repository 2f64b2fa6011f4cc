/**
 * `arbor rollout` for every task kind of the task registry (./registry.ts): a task kit built from an
 * experiment config (task, environment: format, tools, reward, task file) becomes a rollout
 * source, sampled from a model folder or written by the kit's scripted expert. The episodes are
 * the same ToolEnv episodes training runs (same format, query limits, observation budget).
 * (The multi-hop task keeps its own opener in engine/tasks/multihop/rollout.ts, with world/question seeds.)
 */
import { PolicyModel } from '../model/runtime';
import { baseQuantSpec } from '../model/quantize';
import { eosTokenIds, policyDecodeBackend } from '../rollout/model-backend';
import type { RolloutSource, RolloutSourceRequest } from './sources';
import { validateLoaded, type LoadedConfig } from '../config/experiment';
import type { TaskKit } from './kit';
import { openEnvironmentKit, type ConfigAt } from './open';

/** The experiment config `arbor rollout` options describe (validated; paths relative to the working folder, its `dir`). */
export function rolloutConfig(req: RolloutSourceRequest, loaded?: LoadedConfig): LoadedConfig {
  const o = req.options ?? {};
  const base = loaded?.cfg;
  const raw = (base ? JSON.parse(JSON.stringify(base)) : { model: { init: 'tiny' }, task: { kind: req.task } }) as Record<string, Record<string, unknown>>;
  if (o.dataset) raw.task!.dataset = String(o.dataset);
  const env = (raw.environment ??= {});
  if (o.format) env.format = String(o.format);
  if (o.tools) env.tools = o.tools as string[];
  if (o.reward) env.reward = String(o.reward);
  if (o.tasks) env.tasks = String(o.tasks);
  // --model replaces the config's model folder; --policy replaces the model with a text policy.
  if (req.model) raw.model = { ...raw.model, path: req.model, init: undefined, hidden_size: undefined, layers: undefined };
  else if (req.policy) raw.model = { init: 'tiny' };
  // The config's unused keys were named when it was loaded.
  const out = validateLoaded(raw, { file: base ? '(--config)' : '(command line)', job: 'rollout', warn: () => undefined });
  // The limits the config file left out stay sizable from the task (its validated copy sets them all).
  return loaded ? { ...out, defaults: loaded.defaults } : out;
}

/**
 * `fit`: called with the kit before its limits are read (the CLI sizes the limits the config left
 * out from the task there, as a training run does: engine/run/limits.ts).
 */
export async function openKitSource(at: ConfigAt, req: RolloutSourceRequest, fit?: (kit: TaskKit) => Promise<void>): Promise<RolloutSource> {
  const { cfg } = at;
  if (!cfg.model.path && req.policy !== 'expert') throw new Error(`--policy: unknown policy "${req.policy}" (available: expert)`);
  let model: PolicyModel | undefined;
  const { env, kit } = await openEnvironmentKit(at);
  try {
    await fit?.(kit);
    if (!cfg.model.path && !kit.expert)
      throw new Error(
        `task "${cfg.task.kind}" has no scripted expert: ${kit.noExpert ?? 'it writes no demonstrations'} (give every training task a meta.demo, or --model <folder>)`,
      );
    // The config's threads (its device is the process's default providers: engine/cli/commands/rollout.ts).
    // model.quantize_base: the base's linear weights quantized as in a training run's rollouts (engine/model/quantize.ts).
    const quantizeBase = baseQuantSpec(cfg.model.quantize_base, cfg.model.quantize_block);
    model = cfg.model.path ? PolicyModel.load(cfg.model.path, { threads: cfg.threads, quantizeBase: quantizeBase ?? null }) : undefined;
    const maxLen = model ? Math.min(cfg.rollout.max_total_length, model.config.maxPositionEmbeddings) : cfg.rollout.max_total_length;
    const m = model;
    return {
      tasks: kit.trainTasks.slice(0, req.questions),
      tokenizer: kit.tokenizer,
      stop: { strings: kit.stop.strings, tokenIds: m ? [...new Set([...kit.stop.tokenIds, ...eosTokenIds(m.config)])] : kit.stop.tokenIds },
      limits: { maxNewTokens: cfg.rollout.max_new_tokens, maxTurns: cfg.rollout.max_turns, maxTotalLength: maxLen },
      backend: m ? policyDecodeBackend(m, { maxBatch: req.maxBatch ?? 16, maxLength: maxLen }) : undefined,
      policy: m ? undefined : kit.expert,
      close: async () => {
        await m?.dispose();
        await env.close();
      },
    };
  } catch (e) {
    await model?.dispose();
    await env.close();
    throw e;
  }
}
