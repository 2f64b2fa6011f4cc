/**
 * `npx tsx scripts/bench/lora.ts [--layers 4] [--batch 1] [--seq 128] [--rank 16] [--steps 3] [--threads 2] [--json]`
 *
 * LoRA against full fine-tuning in the same run, on a random model at Qwen2.5-0.5B's widths
 * (hidden 896, FFN 4864, 14 heads / 2 KV heads, vocab 151,936, tied embeddings) with `--layers`
 * blocks: one training step (forward + backward on the ORT train graph, then AdamW) for
 * (a) rank-`--rank` adapters on all linear layers (gradients and AdamW state for the adapters
 * only) and (b) every weight; what each update sends to the ORT worker (the adapters vs every
 * weight: the bytes that would cross PCIe per update with a GPU, where frozen weights can stay
 * resident); and peak RSS after each phase (LoRA runs first, so its figure is its own).
 * Times are medians of `--steps` steps after one untimed warm-up step.
 */
import '../../engine/builtins'; // the built-in estimators, losses, formats and task kinds register themselves
import { Command } from 'commander';
import { PolicyModel } from '../../engine/model/runtime';
import { parameterCount, type ModelConfig } from '../../engine/model/config';
import { initWeights } from '../../engine/model/checkpoint';
import { adapterShapes, resolveLora } from '../../engine/model/lora';
import { loraTrainStep, nllLoss, randomTokenBatch } from '../../engine/model/lora-step';
import { AdamW } from '../../engine/rl/optimizer';
import { SHAPES } from './shapes';

const o = new Command()
  .option('--layers <n>', 'transformer blocks', Number, 4)
  .option('--batch <n>', 'sequences per step', Number, 1)
  .option('--seq <n>', 'tokens per sequence', Number, 128)
  .option('--rank <n>', 'LoRA rank', Number, 16)
  .option('--steps <n>', 'timed steps', Number, 3)
  .option('--threads <n>', 'ORT intra-op threads', Number, 2)
  .option('--json', 'print JSON')
  .parse()
  .opts<{ layers: number; batch: number; seq: number; rank: number; steps: number; threads: number; json?: boolean }>();

// Qwen2.5-0.5B widths with --layers blocks.
const config: ModelConfig = { ...SHAPES['qwen2.5-0.5b']!, numLayers: o.layers };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const rssGiB = () => process.resourceUsage().maxRSS / 1024 / 1024;
const batch = randomTokenBatch(config.vocabSize, o.batch, o.seq, 7);
const adam = () => new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: 0 });
const log = (s: string) => !o.json && process.stderr.write(s + '\n');

const spec = resolveLora({ rank: o.rank, alpha: 32, dropout: 0, target_modules: 'all-linear' });
const base = initWeights(config, 1);
const params = parameterCount(config);
const adapterParams = Object.values(adapterShapes(config, spec)).reduce((a, s) => a + s[0]! * s[1]!, 0);

log(
  `model: ${o.layers} layers at Qwen2.5-0.5B widths, ${(params / 1e6).toFixed(1)}M parameters; LoRA r=${o.rank} all-linear: ${(adapterParams / 1e6).toFixed(2)}M; batch ${o.batch} × ${o.seq}`,
);
const lora = new PolicyModel(config, new Map(base), { threads: o.threads, lora: spec, loraSeed: 1 });
const lt: { grad: number; opt: number }[] = [];
const la = adam();
for (let i = 0; i <= o.steps; i++) {
  const r = await loraTrainStep(lora, batch, la, 1e-4);
  if (i > 0) lt.push({ grad: r.gradSeconds, opt: r.optimizerSeconds });
  log(`  lora step ${i}${i ? '' : ' (warm-up)'}: ${(r.gradSeconds + r.optimizerSeconds).toFixed(2)} s, loss ${r.loss.toFixed(4)}`);
}
await lora.dispose();
const loraRss = rssGiB();

const full = new PolicyModel(config, base, { threads: o.threads });
const ft: { grad: number; opt: number }[] = [];
const fa = adam();
for (let i = 0; i <= o.steps; i++) {
  const t0 = performance.now();
  const r = await full.trainStep(batch, nllLoss, batch.valid);
  const t1 = performance.now();
  fa.step(full.weights, r.grads, 1e-5);
  full.markWeightsUpdated();
  const t2 = performance.now();
  if (i > 0) ft.push({ grad: (t1 - t0) / 1000, opt: (t2 - t1) / 1000 });
  log(`  full step ${i}${i ? '' : ' (warm-up)'}: ${((t2 - t0) / 1000).toFixed(2)} s, loss ${r.loss.toFixed(4)}`);
}
await full.dispose();
const fullRss = rssGiB();

const row = (name: string, t: { grad: number; opt: number }[], trainable: number, rss: number) => ({
  name,
  gradSeconds: median(t.map((x) => x.grad)),
  optimizerSeconds: median(t.map((x) => x.opt)),
  stepSeconds: median(t.map((x) => x.grad + x.opt)),
  trainable,
  sentPerUpdateMiB: (trainable * 4) / 2 ** 20,
  adamStateMiB: (trainable * 8) / 2 ** 20,
  peakRssGiB: rss,
});
const rows = [row('lora', lt, adapterParams, loraRss), row('full', ft, params, fullRss)];
if (o.json) console.log(JSON.stringify({ layers: o.layers, batch: o.batch, seq: o.seq, rank: o.rank, threads: o.threads, rows }));
else {
  console.log('| step | fwd+bwd s | AdamW s | step s | trainable | sent to worker / update | AdamW state | peak RSS after |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows)
    console.log(
      `| ${r.name} | ${r.gradSeconds.toFixed(2)} | ${r.optimizerSeconds.toFixed(3)} | ${r.stepSeconds.toFixed(2)} | ${(r.trainable / 1e6).toFixed(2)}M | ${r.sentPerUpdateMiB.toFixed(1)} MiB | ${r.adamStateMiB.toFixed(1)} MiB | ${r.peakRssGiB.toFixed(2)} GiB |`,
    );
  console.log(`LoRA / full step time: ${(rows[0]!.stepSeconds / rows[1]!.stepSeconds).toFixed(2)}`);
}
