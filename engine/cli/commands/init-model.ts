/**
 * `arbor init-model --tiny --task multihop <folder> [--seed S] [--hidden N] [--layers N]
 *  [--heads N] [--kv-heads N] [--max-length N]`: a randomly initialised tiny model as an HF
 * folder (config.json, model.safetensors, WordLevel-style tokenizer.json over the task's
 * vocabulary, tokenizer_config.json with the chat template, generation_config.json).
 */
import type { Command } from 'commander';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { initWeights, saveCheckpoint } from '../../model/checkpoint';
import { parameterCount, tinyConfig } from '../../model/config';
import { writeWordTokenizer } from '../../model/tokenizer';
import { multihopVocabulary } from '../../env/multihop';

/** Vocabulary of each built-in task (every word its prompts, observations and answers use). */
export const TASK_VOCABULARIES: Record<string, () => string[]> = {
  multihop: multihopVocabulary,
};

const int = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer (got "${v}")`);
  return n;
};

export interface InitModelOptions {
  task: string;
  seed?: number;
  hidden?: number;
  layers?: number;
  heads?: number;
  kvHeads?: number;
  maxLength?: number;
}

/** Write a tiny model folder for a task; returns its parameter count and vocabulary size. */
export function initTinyModel(folder: string, o: InitModelOptions): { parameters: number; vocabSize: number } {
  const vocab = TASK_VOCABULARIES[o.task];
  if (!vocab) throw new Error(`--task: unknown task "${o.task}" (available: ${Object.keys(TASK_VOCABULARIES).join(', ')})`);
  mkdirSync(folder, { recursive: true });
  const tok = writeWordTokenizer(folder, vocab());
  const config = tinyConfig({
    vocabSize: tok.vocabSize, hiddenSize: o.hidden ?? 64, layers: o.layers ?? 2, heads: o.heads ?? 4, kvHeads: o.kvHeads,
    maxPositionEmbeddings: o.maxLength ?? 1024, eosTokenId: tok.eosTokenId ?? null, padTokenId: tok.padTokenId, bosTokenId: null,
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
    .requiredOption('--task <task>', `task whose vocabulary the tokenizer covers (${Object.keys(TASK_VOCABULARIES).join(', ')})`)
    .option('--seed <seed>', 'weight initialisation seed', (v) => Number(v), 0)
    .option('--hidden <n>', 'hidden size', int('hidden'), 64)
    .option('--layers <n>', 'layers', int('layers'), 2)
    .option('--heads <n>', 'attention heads', int('heads'), 4)
    .option('--kv-heads <n>', 'key/value heads (default heads / 2)', int('kv-heads'))
    .option('--max-length <n>', 'max_position_embeddings', int('max-length'), 1024)
    .option('--force', 'write into a non-empty folder')
    .option('--json', 'print the result as JSON')
    .action((folder: string, o: InitModelOptions & { force?: boolean; json?: boolean; tiny: boolean }) => {
      const dir = resolve(folder);
      if (existsSync(dir) && readdirSync(dir).length > 0 && !o.force) throw new Error(`${dir} is not empty (use --force to overwrite)`);
      const r = initTinyModel(dir, o);
      if (o.json) console.log(JSON.stringify({ folder: dir, ...r }));
      else console.log(`tiny ${o.task} model: ${(r.parameters / 1e6).toFixed(2)}M parameters, vocabulary ${r.vocabSize} → ${dir}`);
    });
}
