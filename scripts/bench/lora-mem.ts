/**
 * `npx tsx scripts/bench/lora-mem.ts --layers 1 --batch 2 --seq 512 --head-chunks 10 [--recompute-layers [k]]`
 *
 * Peak RSS of LoRA training steps (rank 16, all linear layers) at Qwen2.5-0.5B's widths (hidden
 * 896, FFN 4864, 14/2 heads, vocab 151,936, tied) with `--layers` blocks and random weights, for
 * the memory options of the train graph: the LM head in `--head-chunks` row chunks (1 = in one
 * piece) and `--recompute-layers` (activation checkpointing per block). Prints the RSS after
 * building the weights, after each of two steps (loss, seconds) and after a scoring call. The
 * weights are held by the model's ORT worker as for a model without a folder (host copy kept).
 */
import '../../engine/builtins'; // the built-in estimators, losses, formats and task kinds register themselves
import { Command } from 'commander';
import { PolicyModel } from '../../engine/model/runtime';
import type { ModelConfig } from '../../engine/model/config';
import { initWeights } from '../../engine/model/checkpoint';
import { resolveLora } from '../../engine/model/lora';
import { loraTrainStep, randomTokenBatch } from '../../engine/model/lora-step';
import { AdamW } from '../../engine/rl/optimizer';
import { SHAPES } from './shapes';

const o = new Command()
  .option('--layers <n>', 'transformer blocks', Number, 1)
  .option('--batch <n>', 'sequences per step', Number, 2)
  .option('--seq <n>', 'tokens per sequence', Number, 512)
  .option('--head-chunks <n>', 'row chunks of the LM head (1 = one piece)', Number, 10)
  .option('--recompute-layers [k]', 'recompute block activations in the backward pass (all blocks, or the first k)', (v: string) => Number(v))
  .option('--threads <n>', 'ORT intra-op threads', Number, 2)
  .parse()
  .opts<{ layers: number; batch: number; seq: number; headChunks: number; recomputeLayers?: boolean | number; threads: number }>();

// Qwen2.5-0.5B widths with --layers blocks.
const config: ModelConfig = { ...SHAPES['qwen2.5-0.5b']!, numLayers: o.layers };
const mb = () => Math.round(process.resourceUsage().maxRSS / 1024);
const m = new PolicyModel(config, initWeights(config, 1), {
  threads: o.threads,
  lora: resolveLora({ rank: 16, alpha: 32, dropout: 0, target_modules: 'all-linear' }),
  headChunks: o.headChunks,
  recomputeLayers: o.recomputeLayers ?? false,
});
console.log(`layers ${o.layers}, batch ${o.batch} × ${o.seq}, head chunks ${o.headChunks}, recompute layers ${o.recomputeLayers ?? false}`);
console.log(`weights built: peak RSS ${mb()} MB`);
const opt = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: 0 });
const batch = randomTokenBatch(config.vocabSize, o.batch, o.seq);
for (let s = 0; s < 2; s++) {
  const t0 = performance.now();
  const r = await loraTrainStep(m, batch, opt);
  console.log(`step ${s}: loss ${r.loss.toFixed(6)}, ${((performance.now() - t0) / 1000).toFixed(2)} s, peak RSS ${mb()} MB`);
}
await m.score(batch);
console.log(`after scoring: peak RSS ${mb()} MB`);
await m.dispose();
