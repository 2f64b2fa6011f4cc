/**
 * `arbor init-model --tiny --task multihop <folder> [--seed S] [--hidden N] [--layers N]
 *  [--heads N] [--kv-heads N] [--max-length N]`: a randomly initialised tiny model as an HF
 * folder (config.json, model.safetensors, WordLevel-style tokenizer.json over the task's
 * vocabulary, tokenizer_config.json with the chat template, generation_config.json).
 */
import type { Command } from 'commander';
import { given, intFlag } from '../flags';
import { copyFileSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { initWeights, saveCheckpoint } from '../../model/checkpoint';
import { parameterCount, tinyConfig } from '../../model/config';
import { HfTokenizer, writeWordTokenizer } from '../../model/tokenizer';
import { multihopVocabulary } from '../../tasks/multihop/world';
import { loadConfig, taskKindNames, validateConfig, type ExperimentConfig } from '../../config/experiment';
import { openTaskKit } from '../../tasks/registry';
import { openUserEnvironment } from '../../tasks/user-kit';

/** Vocabulary of each built-in task (every word its prompts, observations and answers use). */
export const TASK_VOCABULARIES: Record<string, () => string[]> = {
  multihop: multihopVocabulary,
};

export interface InitModelOptions {
  task?: string;
  /** An experiment config whose task (and environment) the model is for. */
  config?: string;
  dataset?: string;
  tasks?: string;
  format?: string;
  seed?: number;
  hidden?: number;
  layers?: number;
  heads?: number;
  kvHeads?: number;
  maxLength?: number;
}

/**
 * Any other task kind: the tiny model of its training kit (the kit's tokenizer files, with its chat
 * template, and the kit's tiny config), exactly what `arbor train` with model.init tiny starts from.
 */
async function initKitModel(folder: string, o: InitModelOptions): Promise<{ parameters: number; vocabSize: number }> {
  const raw: Record<string, Record<string, unknown>> = o.config
    ? (JSON.parse(JSON.stringify((await loadConfig(o.config, undefined, { job: 'init-model' })).cfg)) as Record<string, Record<string, unknown>>)
    : { model: { init: 'tiny' }, task: { kind: o.task } };
  if (o.config && o.task && o.task !== raw.task!.kind)
    throw new Error(`--task: ${o.task} differs from the config's task.kind "${String(raw.task!.kind)}"; give one of them`);
  // The flags given override the config's model.hidden_size / model.layers / model.heads (a flag's default never does).
  const hidden = o.hidden ?? (raw.model!.path ? undefined : (raw.model!.hidden_size as number | undefined));
  const layers = o.layers ?? (raw.model!.path ? undefined : (raw.model!.layers as number | undefined));
  const heads = raw.model!.path ? undefined : (raw.model!.heads as number | undefined);
  raw.model = { init: 'tiny', ...(hidden ? { hidden_size: hidden } : {}), ...(layers ? { layers } : {}), ...(heads && !o.heads ? { heads } : {}) };
  if (o.dataset) raw.task!.dataset = o.dataset;
  const env = (raw.environment ??= {});
  if (o.tasks) env.tasks = o.tasks;
  if (o.format) env.format = o.format;
  const cfg: ExperimentConfig = validateConfig(raw, { file: o.config ?? '(command line)', job: 'init-model', warn: () => undefined });
  if (cfg.rollout.max_total_length < (o.maxLength ?? 1024)) cfg.rollout.max_total_length = o.maxLength ?? 1024;
  // The user's tools take part (a byte-level tokenizer's merges cover their names and schemas).
  const host = cfg.environment.tools.length
    ? await openUserEnvironment({ tools: cfg.environment.tools }, cfg.environment.workspace ?? process.cwd())
    : undefined;
  let kit;
  try {
    kit = openTaskKit(cfg, { host });
  } finally {
    await host?.close();
  }
  if (!kit.tokenizerFolder) throw new Error(`task "${cfg.task.kind}" has no tokenizer files to write`);
  mkdirSync(folder, { recursive: true });
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(kit.tokenizerFolder, f), join(folder, f));
  const tok = HfTokenizer.load(folder);
  const base = kit.tinyModel(cfg);
  const config = {
    ...base,
    numHeads: o.heads ?? base.numHeads,
    numKvHeads: o.kvHeads ?? (o.heads ? Math.max(1, o.heads / 2) : base.numKvHeads),
    headDim: base.hiddenSize / (o.heads ?? base.numHeads),
    maxPositionEmbeddings: o.maxLength ?? 1024,
  };
  saveCheckpoint(folder, config, initWeights(config, o.seed ?? cfg.seed));
  return { parameters: parameterCount(config), vocabSize: tok.vocabSize };
}

/** A tiny model folder for any task kind (the multi-hop one, or a training kit's). */
export async function initModelFolder(folder: string, o: InitModelOptions): Promise<{ parameters: number; vocabSize: number }> {
  if (o.config || (o.task && o.task !== 'multihop')) {
    if (o.task && !taskKindNames().includes(o.task)) throw new Error(`--task: unknown task "${o.task}" (available: ${taskKindNames().join(', ')})`);
    return initKitModel(folder, o);
  }
  return initTinyModel(folder, o);
}

/** Write a tiny model folder for the multi-hop task; returns its parameter count and vocabulary size. */
export function initTinyModel(folder: string, o: InitModelOptions): { parameters: number; vocabSize: number } {
  const vocab = TASK_VOCABULARIES[o.task ?? ''];
  if (!vocab) throw new Error(`--task: unknown task "${o.task}" (available: ${taskKindNames().join(', ')})`);
  mkdirSync(folder, { recursive: true });
  const tok = writeWordTokenizer(folder, vocab());
  const config = tinyConfig({
    vocabSize: tok.vocabSize,
    hiddenSize: o.hidden ?? 64,
    layers: o.layers ?? 2,
    heads: o.heads ?? 4,
    kvHeads: o.kvHeads,
    maxPositionEmbeddings: o.maxLength ?? 1024,
    eosTokenId: tok.eosTokenId ?? null,
    padTokenId: tok.padTokenId,
    bosTokenId: null,
  });
  saveCheckpoint(folder, config, initWeights(config, o.seed ?? 0));
  return { parameters: parameterCount(config), vocabSize: tok.vocabSize };
}

export function register(program: Command): void {
  program
    .command('init-model')
    .description('write a randomly initialised tiny model folder (HF format) for a built-in task')
    .argument('<folder>', 'output folder')
    .requiredOption('--tiny', 'a tiny model (the only kind this command makes)')
    .option('--task <task>', `task whose vocabulary the tokenizer covers (${taskKindNames().join(', ')})`)
    .option('--config <file>', 'an experiment config: the model for its task (and environment format / task file)')
    .option('--dataset <file>', 'task qa: the JSONL dataset')
    .option('--tasks <file>', 'task custom: the JSONL task file')
    .option('--format <name>', 'tool-call format the tokenizer must write (search-r1, hermes, tags)')
    .option('--seed <seed>', "weight initialisation seed (default: the config's seed, else 0)", intFlag('seed'), 0)
    .option('--hidden <n>', "hidden size (default: the config's model.hidden_size, else the task's)", intFlag('hidden', 1), 64)
    .option('--layers <n>', "layers (default: the config's model.layers, else the task's)", intFlag('layers', 1), 2)
    .option('--heads <n>', 'attention heads', intFlag('heads', 1), 4)
    .option('--kv-heads <n>', 'key/value heads (default heads / 2)', intFlag('kv-heads', 1))
    .option('--max-length <n>', 'max_position_embeddings', intFlag('max-length', 1), 1024)
    .option('--force', 'write into a non-empty folder')
    .option('--json', 'print the result as JSON')
    .action(async (folder: string, o: InitModelOptions & { force?: boolean; json?: boolean; tiny: boolean }, cmd: Command) => {
      if (!o.task && !o.config) throw new Error('give --task <kind> or --config <experiment config>');
      // Defaults of flags not given stay unset, so a config's keys apply (initTinyModel has the same defaults).
      for (const k of ['seed', 'hidden', 'layers', 'heads', 'maxLength'] as const) if (!given(cmd, k)) delete o[k];
      const dir = resolve(folder);
      if (existsSync(dir) && readdirSync(dir).length > 0 && !o.force) throw new Error(`${dir} is not empty (use --force to overwrite)`);
      const r = await initModelFolder(dir, o);
      if (o.json) console.log(JSON.stringify({ folder: dir, ...r }));
      else console.log(`tiny ${o.task ?? 'config'} model: ${(r.parameters / 1e6).toFixed(2)}M parameters, vocabulary ${r.vocabSize} → ${dir}`);
    });
}
