/**
 * `arbor merge <base> <adapter> <out> [--force] [--json]`: fold a PEFT LoRA adapter folder
 * (adapter_config.json + adapter_model.safetensors, e.g. a LoRA run's checkpoint) into its base
 * HF model and write the merged model as an HF folder (W' = W + alpha/r · B·A on every adapted
 * linear layer), loadable by Arbor and transformers without PEFT. Tokenizer files come from the
 * adapter folder when it has them, else from the base.
 */
import { modelArg } from '../../hub/cache';
import type { Command } from 'commander';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadCheckpoint, saveCheckpoint } from '../../model/checkpoint';
import { adaptedModules, mergeAdapters } from '../../model/lora';
import { readPeftAdapter } from '../../model/peft';

export interface MergeResult {
  out: string;
  modules: number;
  rank: number;
  alpha: number;
}

export function mergeAdapterFolder(base: string, adapter: string, out: string, opts: { force?: boolean } = {}): MergeResult {
  const b = resolve(modelArg(base, '<base>')),
    a = resolve(modelArg(adapter, '<adapter>')),
    o = resolve(out);
  if (!existsSync(join(b, 'config.json'))) throw new Error(`<base>: not an HF model folder (no config.json): ${b}`);
  if (!existsSync(join(a, 'adapter_config.json'))) throw new Error(`<adapter>: not a PEFT adapter folder (no adapter_config.json): ${a}`);
  if (o === b || o === a) throw new Error(`<out> must differ from <base> and <adapter> (got ${o})`);
  if (existsSync(o) && readdirSync(o).length > 0 && !opts.force) throw new Error(`<out>: folder ${o} is not empty (use --force to write into it)`);
  const ck = loadCheckpoint(b);
  const ad = readPeftAdapter(a, ck.config);
  const merged = mergeAdapters(ck.config, ad.spec, ck.weights, ad.adapters);
  const tokenizerFrom = existsSync(join(a, 'tokenizer.json')) ? a : b;
  const gen = join(b, 'generation_config.json');
  const generationConfig = existsSync(gen) ? (JSON.parse(readFileSync(gen, 'utf8')) as Record<string, unknown>) : undefined;
  saveCheckpoint(o, ck.config, merged, { tokenizerFrom, generationConfig });
  return { out: o, modules: adaptedModules(ck.config, ad.spec).length, rank: ad.spec.rank, alpha: ad.spec.alpha };
}

export function register(program: Command): void {
  program
    .command('merge')
    .description('merge a LoRA adapter (PEFT folder) into its base model and write an HF model folder')
    .argument('<base>', 'base HF model folder')
    .argument('<adapter>', 'PEFT adapter folder (adapter_config.json + adapter_model.safetensors), e.g. a LoRA run checkpoint')
    .argument('<out>', 'output folder for the merged model')
    .option('--force', 'write into a non-empty output folder')
    .option('--json', 'print the result as JSON')
    .action((base: string, adapter: string, out: string, o: { force?: boolean; json?: boolean }) => {
      const r = mergeAdapterFolder(base, adapter, out, o);
      if (o.json) console.log(JSON.stringify(r));
      else console.log(`merged ${r.modules} adapted layers (r=${r.rank}, alpha=${r.alpha}) into ${r.out}`);
    });
}
