/**
 * `arbor plan <config | model folder | --shape NAME> [--lora r] [--quantize-base int4] [--device D]
 * [--seq T] [--batch B] [--rollout-batch N] [--memory 24GiB] [--json] [--measure]`: the memory plan
 * of a run before it starts (engine/model/memory-plan.ts): weights, optimizer state, training
 * activations, the rollout KV cache and the total, what fits the device (or --memory) and which
 * key to change when it does not. `--measure` runs one training step at the planned size on
 * random weights in this process and prints its peak RSS beside the plan's figure for a step.
 * `arbor train` prints the same plan's one-line total and refuses a run that cannot fit
 * (checkRunMemory).
 */
import { Option, type Command } from 'commander';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { totalmem } from 'node:os';
import { intFlag } from '../flags';
import { DEVICES, deviceOption } from '../device-option';
import { loadConfig, validateConfig, type ExperimentConfig } from '../../config/experiment';
import type { HostTensor } from '../../tensor/host';
import { applyOverrides } from './sweep';
import { readModelConfig } from '../../model/checkpoint';
import { weightShapes, type ModelConfig } from '../../model/config';
import { baseQuantLayout, emptyQuantized, QUANT_BLOCK, quantizeRowsInto, type BaseQuantSpec, type QuantizedMatrix } from '../../model/quantize';
import { resolveLora, type LoraSpec } from '../../model/lora';
import {
  adviseFit,
  BASE_QUANT_BITS,
  type PlanAdvice,
  fmtBytes,
  memoryPlan,
  parseBytes,
  type BaseQuant,
  type MemoryPlan,
  type MemoryPlanInput,
} from '../../model/memory-plan';
import { ALL_SHAPES, shapeByName } from '../../model/shapes';
import { tinyTaskModel } from '../../tasks/multihop/kit';
import { openTaskKit, taskTokenizer, tinyVocabBound } from '../../tasks/registry';
import { policyLoss } from '../../rl/policy-losses';
import { getEstimator } from '../../rl';
import { AdamW } from '../../rl/optimizer';
import { randomTokenBatch, nllLoss } from '../../model/lora-step';
import { accumulate, clipAndStep } from '../../train/grad-accum';
import { scorePieceSize } from '../../train/loop';

const QUANT_CHOICES = Object.keys(BASE_QUANT_BITS) as BaseQuant[];

/** The model a config trains: its folder's config.json, or the task's tiny built-in model. */
export function configModel(cfg: ExperimentConfig): ModelConfig {
  if (cfg.model.path) return readModelConfig(cfg.model.path);
  // A kind whose tiny model's tokenizer is built from the environment (the sandboxed tools' schemas): the kind's estimate, at least its size.
  const bound = tinyVocabBound(cfg);
  if (bound !== undefined) return tinyTaskModel(cfg, bound, 0);
  // The task's tokenizer sizes the tiny model (its kit's tinyModel); a tokenizer that does not say its size: the kit itself.
  const tok = taskTokenizer(cfg) as { vocabSize?: number; vocab?: readonly unknown[] };
  const vocab = tok.vocabSize ?? tok.vocab?.length;
  return vocab ? tinyTaskModel(cfg, vocab, 0) : openTaskKit(cfg).tinyModel(cfg);
}

/**
 * A run's plan input from its config: the training micro-batch is the larger of an RL update's
 * (rollout.prompts_per_step × rollout.n sequences over algorithm.mini_batches × micro_batches)
 * and, with sft.warm_start, an SFT step's (sft.batch_size over micro_batches), at
 * rollout.max_total_length tokens; the rollouts decode min(64, prompts × n) sequences at once (the
 * decode backend's cap) up to max_total_length; the scoring passes (old policy, reference, teacher)
 * take the step's episodes in pieces of the update's micro-batch (engine/train/loop.ts scorePieceSize).
 */
export function planInputFromConfig(cfg: ExperimentConfig, baseline?: number): { input: MemoryPlanInput; microBatches: number } {
  const alg = cfg.algorithm;
  const prompts = alg.dynamic_sampling.enabled ? (alg.dynamic_sampling.gen_prompts ?? cfg.rollout.prompts_per_step) : cfg.rollout.prompts_per_step;
  const episodes = cfg.rollout.prompts_per_step * cfg.rollout.n;
  const piece = scorePieceSize(alg, episodes);
  let batch = piece;
  if (cfg.sft.warm_start) batch = Math.max(batch, Math.ceil(cfg.sft.batch_size / alg.micro_batches));
  const device = cfg.device === 'auto' ? 'cpu' : cfg.device;
  const input: MemoryPlanInput = {
    config: configModel(cfg),
    lora: cfg.model.lora ? resolveLora(cfg.model.lora) : undefined,
    quantizeBase: cfg.model.quantize_base === 'none' ? undefined : cfg.model.quantize_base,
    quantBlock: cfg.model.quantize_block,
    train: { batch, seq: cfg.rollout.max_total_length },
    recomputeLayers: cfg.model.recompute_layers ?? false,
    loss: policyLoss(cfg),
    rollout: { batch: Math.min(64, prompts * cfg.rollout.n), maxLength: cfg.rollout.max_total_length },
    // The old policy's logprobs (old_logprobs: recompute) and the KL reference's: every episode of a step, in pieces of the update's micro-batch.
    score: alg.old_logprobs === 'recompute' || alg.kl_coef > 0 ? { batch: piece, seq: cfg.rollout.max_total_length, sequences: episodes } : undefined,
    hostBaseCopy: !cfg.model.path,
    klReference: alg.kl_coef > 0,
    critic: getEstimator(alg.adv_estimator).needsCritic,
    // algorithm.distill: the teacher's own weights and its scoring of every episode of a step.
    ...(alg.distill
      ? { teacher: { config: readModelConfig(alg.distill.teacher), score: { batch: piece, seq: cfg.rollout.max_total_length, sequences: episodes } } }
      : {}),
    rolloutQuantize: cfg.rollout.quantize,
    device,
    baseline,
  };
  return { input, microBatches: alg.micro_batches };
}

/** The memory the plan is checked against: --memory, else the machine's RAM on the CPU; unknown for a GPU without --memory. */
export function availableMemory(device: string, memory?: number): { bytes: number; what: string } | null {
  if (memory !== undefined) return { bytes: memory, what: '--memory' };
  if (device === 'cpu') return { bytes: totalmem(), what: 'RAM' };
  return null;
}

/** "memory plan: 1.21 GiB (base 0.99 GiB, activations …) of 23.4 GiB RAM". */
export function planLine(plan: MemoryPlan, avail: { bytes: number; what: string } | null): string {
  const big = [...plan.items].sort((a, b) => b.bytes - a.bytes).slice(0, 3);
  return (
    `memory plan: ${fmtBytes(plan.total)} (${big.map((i) => `${i.label} ${fmtBytes(i.bytes)}`).join(', ')})` +
    (avail ? ` of ${fmtBytes(avail.bytes)} ${avail.what}` : ' (device memory unknown: give --memory to check it)')
  );
}

/** The refusal's text: the plan's total, the memory, and the key(s) to change. */
export function refusal(plan: MemoryPlan, input: MemoryPlanInput, avail: { bytes: number; what: string }, microBatches: number): string {
  const { advice, combination, tried } = adviseFit(input, avail.bytes, microBatches);
  const biggest = [...plan.items].sort((a, b) => b.bytes - a.bytes)[0]!;
  const say = (a: PlanAdvice) => `${a.key}: ${a.change}`;
  const fix = advice.length
    ? `change ${advice
        .slice(0, 3)
        .map((a) => `${say(a)} (plan ${fmtBytes(a.total)})`)
        .join(', or ')}`
    : combination.length
      ? `change ${combination.map(say).join(' and ')} (plan ${fmtBytes(combination.at(-1)!.total)})`
      : `no change of ${[...new Set(tried.map((t) => t.key))].join(', ')} fits it; the largest part is ${biggest.label} (${fmtBytes(biggest.bytes)}${biggest.key ? `, ${biggest.key}` : ''})`;
  return `the memory plan (${fmtBytes(plan.total)}) exceeds the ${avail.what} (${fmtBytes(avail.bytes)}): ${fix}. \`arbor plan <config>\` shows the plan`;
}

/**
 * `arbor train`'s check: prints the plan's one-line total (stderr) and throws, naming the key to
 * change, when it exceeds the device's memory (CPU: RAM, or `memory`). A GPU's memory is checked
 * only when `memory` is given. A plan that cannot be made (a task whose tiny model needs its
 * environment opened, a folder the run itself will refuse) is said in one line and the run goes on.
 */
export function checkRunMemory(cfg: ExperimentConfig, o: { memory?: number; print?: (line: string) => void }): MemoryPlan | undefined {
  const print = o.print ?? ((l: string) => process.stderr.write(l + '\n'));
  let planned: { plan: MemoryPlan; input: MemoryPlanInput; microBatches: number };
  try {
    const { input, microBatches } = planInputFromConfig(cfg, process.memoryUsage().rss);
    planned = { plan: memoryPlan(input), input, microBatches };
  } catch (e) {
    print(`memory plan: not made (${e instanceof Error ? e.message : String(e)})`);
    return undefined;
  }
  const { plan, input, microBatches } = planned;
  const avail = availableMemory(input.device ?? 'cpu', o.memory);
  print(planLine(plan, avail));
  if (avail && plan.total > avail.bytes) throw new Error(refusal(plan, input, avail, microBatches));
  return plan;
}

interface PlanOpts {
  shape?: string;
  lora?: number;
  quantizeBase?: BaseQuant;
  quantizeBlock?: number;
  device?: (typeof DEVICES)[number];
  seq?: number;
  batch?: number;
  rolloutBatch?: number;
  recomputeLayers?: boolean | number;
  memory?: string;
  json?: boolean;
  measure?: boolean;
  loss?: 'nll' | 'grpo';
  microBatches?: number;
  steps: number;
  set: string[];
}

const allLinear = (rank: number): LoraSpec => resolveLora({ rank, alpha: 32, dropout: 0, target_modules: 'all-linear' });

/**
 * The process's RSS as a training run's would be before its model exists: `arbor plan` loads only
 * its own modules (cli/main.ts COMMAND_MODULES), so the run's modules that `arbor train` starts
 * with and the model runtime are loaded first, or the plan's baseline would miss their code and heap.
 */
async function runBaselineRss(): Promise<number> {
  await import('../../run/runner'); // what `arbor train` starts with (its run composition)
  await import('../../run/run-dir');
  await import('../../model/runtime');
  return process.memoryUsage().rss;
}

async function planInput(target: string | undefined, o: PlanOpts): Promise<{ input: MemoryPlanInput; microBatches: number; source: string }> {
  if ((target === undefined) === (o.shape === undefined)) throw new Error('give a config file, a model folder, or --shape NAME (one of them)');
  let r: { input: MemoryPlanInput; microBatches: number; source: string };
  const baseline = await runBaselineRss();
  if (target && existsSync(target) && statSync(target).isFile()) {
    const { cfg } = await loadConfig(target, (raw) => applyOverrides(raw, o.set), { job: 'train' });
    r = { ...planInputFromConfig(cfg, baseline), source: `config ${target}` };
  } else {
    if (o.set.length) throw new Error('--set changes a config; give a config file');
    let config: ModelConfig;
    let source: string;
    if (target) {
      if (!existsSync(join(target, 'config.json'))) throw new Error(`${target}: not a config file or a model folder (no config.json)`);
      config = readModelConfig(target);
      source = `model folder ${target}`;
    } else {
      config = shapeByName(o.shape!);
      source = `shape ${o.shape}`;
    }
    const seq = o.seq ?? 512;
    r = {
      input: {
        config,
        lora: o.lora !== undefined ? allLinear(o.lora) : undefined,
        // --loss grpo: the policy loss of a default GRPO config (PPO-clip with its entropy metric), at --seq tokens.
        loss:
          o.loss === 'grpo'
            ? policyLoss(validateConfig({ model: { init: 'tiny' }, task: { kind: 'multihop' }, rollout: { max_total_length: seq } }))
            : undefined,
        train: { batch: o.batch ?? 1, seq },
        recomputeLayers: o.recomputeLayers ?? false,
        rollout: o.rolloutBatch ? { batch: o.rolloutBatch, maxLength: seq } : undefined,
        // The rollouts' sequences scored as a run scores them: in pieces of the update's micro-batch (--batch).
        score: o.rolloutBatch ? { batch: Math.min(o.rolloutBatch, o.batch ?? 1), seq, sequences: o.rolloutBatch } : undefined,
        // --measure builds the weights in this process with no folder, and the plan says so (PolicyModel keepHostBase).
        hostBaseCopy: false,
        device: o.device === undefined || o.device === 'auto' ? 'cpu' : o.device,
        baseline,
      },
      microBatches: o.microBatches ?? 1,
      source,
    };
  }
  const i = r.input;
  if (o.lora !== undefined) i.lora = allLinear(o.lora);
  if (o.quantizeBase) i.quantizeBase = o.quantizeBase;
  if (o.quantizeBlock !== undefined) {
    if (!i.quantizeBase) throw new Error('--quantize-block: give --quantize-base (or model.quantize_base) too');
    i.quantBlock = o.quantizeBlock;
  }
  if (o.device && o.device !== 'auto') i.device = o.device;
  if (o.seq !== undefined) i.train = { ...i.train, seq: o.seq };
  if (o.batch !== undefined) {
    i.train = { ...i.train, batch: o.batch };
    // The scoring pieces are the update's micro-batch.
    const piece = <S extends { batch: number; sequences?: number }>(x: S): S => ({ ...x, batch: Math.min(x.sequences ?? x.batch, o.batch!) });
    if (i.score) i.score = piece(i.score);
    if (i.teacher) i.teacher = { ...i.teacher, score: piece(i.teacher.score) };
  }
  if (o.recomputeLayers !== undefined) i.recomputeLayers = o.recomputeLayers;
  if (target && existsSync(target) && statSync(target).isFile()) {
    if (o.loss) throw new Error("--loss: a config's plan uses its own algorithm.policy_loss; give --loss with --shape or a model folder");
    if (o.microBatches !== undefined)
      throw new Error("--micro-batches: a config's plan uses its algorithm.micro_batches; give --micro-batches with --shape or a model folder");
  }
  if (i.quantizeBase && !i.lora)
    throw new Error('--quantize-base: the quantized base is frozen and trains LoRA adapters; give --lora <rank> (or model.lora in the config)');
  return r;
}

export function register(program: Command): void {
  program
    .command('plan')
    .description('the memory plan of a run before it starts: weights, optimizer state, activations, rollout KV cache, the total, and what fits')
    .argument('[target]', 'an experiment config (YAML/JSON) or an HF model folder')
    .option('--shape <name>', `a released model's shape instead (${Object.keys(ALL_SHAPES).join(', ')})`)
    .option('--lora <rank>', 'LoRA adapters of this rank on all linear layers (overrides model.lora.rank)', intFlag('lora', 1))
    .addOption(new Option('--quantize-base <bits>', 'the frozen LoRA base block-quantized (overrides model.quantize_base)').choices(QUANT_CHOICES))
    .option('--quantize-block <n>', `values per scale of the quantized base (a power of two ≥ 16; default ${QUANT_BLOCK})`, (v: string) => {
      const n = intFlag('quantize-block', 16)(v);
      if ((n & (n - 1)) !== 0) throw new Error(`--quantize-block must be a power of two ≥ 16 (got "${v}")`);
      return n;
    })
    .option('--device <device>', `where the run's sessions live (${DEVICES.join(', ')})`, deviceOption)
    .option('--seq <n>', "tokens per training sequence (default: the config's rollout.max_total_length, else 512)", intFlag('seq', 1))
    .option('--batch <n>', "sequences per training micro-batch (default: the config's, else 1)", intFlag('batch', 1))
    .option(
      '--rollout-batch <n>',
      'without a config: sequences decoded at once, each up to --seq tokens (the KV cache), then scored in calls of --batch',
      intFlag('rollout-batch', 1),
    )
    .option('--recompute-layers [k]', 'recompute block activations in the backward pass: all, or the first k blocks', (v: string) =>
      intFlag('recompute-layers', 0)(v),
    )
    .option('--memory <bytes>', 'the memory to fit (e.g. 24GiB; default: RAM on the CPU)')
    .option('--set <key=value>', 'override a config key (dotted path, YAML value); repeatable', (v: string, acc: string[]) => [...acc, v], [] as string[])
    .addOption(
      new Option('--loss <loss>', 'without a config: the training loss (nll: masked next-token; grpo: the default GRPO policy loss, with entropy)').choices([
        'nll',
        'grpo',
      ]),
    )
    .option(
      '--micro-batches <m>',
      'without a config: micro-batches of --batch sequences per update (--measure accumulates their gradients, then one AdamW step)',
      intFlag('micro-batches', 1),
    )
    .option('--measure', 'run one training step at the planned size on random weights here and print its peak RSS beside the plan')
    .option('--steps <n>', 'with --measure: steps to take (the first builds the session; the last is timed)', intFlag('steps', 1), 2)
    .option('--json', 'print JSON')
    .action(async (target: string | undefined, o: PlanOpts) => {
      const memory = o.memory !== undefined ? parseBytes(o.memory) : undefined;
      const { input, microBatches, source } = await planInput(target, o);
      const plan = memoryPlan(input);
      const avail = availableMemory(input.device ?? 'cpu', memory);
      const verdict = avail ? adviseFit(input, avail.bytes, microBatches) : null;
      const measured = o.measure ? await measureStep(input, o.steps, microBatches) : undefined;
      // What the measurement is compared with: --measure decodes nothing, so the plan without rollouts (a CPU decode
      // session's pre-packed codes are not made), its step, and its scoring call when it scored.
      const bare = input.rollout ? memoryPlan({ ...input, rollout: undefined }) : plan;
      const planned = measured ? bare.step + (measured.scored ? (bare.items.find((i) => i.id === 'score')?.bytes ?? 0) : 0) : undefined;
      if (o.json) {
        console.log(
          JSON.stringify({
            source,
            parameters: plan.parameters,
            trainable: plan.trainable,
            items: plan.items,
            total: plan.total,
            step: plan.step,
            available: avail,
            fits: verdict?.fits ?? null,
            advice: verdict?.advice ?? [],
            combination: verdict?.combination ?? [],
            measured,
            measuredPlan: planned,
          }),
        );
        return;
      }
      const c = input.config;
      console.log(
        `${source}: ${plan.parameters >= 1e9 ? `${(plan.parameters / 1e9).toFixed(3)}B` : `${(plan.parameters / 1e6).toFixed(plan.parameters >= 1e7 ? 0 : 2)}M`} parameters (${c.numLayers} layers, hidden ${c.hiddenSize}, vocabulary ${c.vocabSize}), ` +
          `${input.lora ? `LoRA r${input.lora.rank} (${(plan.trainable / 1e6).toFixed(2)}M trainable)` : 'full fine-tuning'}` +
          `${input.quantizeBase ? `, ${input.quantizeBase} base` : ''}; micro-batch ${input.train.batch} × ${input.train.seq} tokens` +
          `${input.rollout ? `; rollouts ${input.rollout.batch} × ${input.rollout.maxLength}` : ''}; device ${input.device ?? 'cpu'}`,
      );
      const w = Math.max(...plan.items.map((i) => i.label.length));
      for (const i of plan.items) console.log(`  ${i.label.padEnd(w)}  ${fmtBytes(i.bytes).padStart(10)}  ${i.detail}${i.key ? ` [${i.key}]` : ''}`);
      console.log(`  ${'total'.padEnd(w)}  ${fmtBytes(plan.total).padStart(10)}  (a training step alone: ${fmtBytes(plan.step)})`);
      if (!avail) console.log(`device ${input.device}: its memory is not known here; give --memory (e.g. --memory 24GiB) to check the plan against it`);
      else if (verdict!.fits)
        console.log(`fits: ${fmtBytes(plan.total)} of ${fmtBytes(avail.bytes)} ${avail.what} (${fmtBytes(avail.bytes - plan.total)} to spare)`);
      else console.log(`does not fit: ${refusal(plan, input, avail, microBatches)}`);
      if (measured) {
        const what = measured.scored ? 'step and scoring call' : 'step';
        console.log(
          `measured: one training step${measured.microBatches > 1 ? ` (${measured.microBatches} micro-batches)` : ''}${measured.scored ? ` after scoring ${measured.scored} sequences${measured.scored > measured.scoredPerCall ? ` in calls of ${measured.scoredPerCall}` : ''}` : ''} ${measured.stepSeconds.toFixed(2)} s (${measured.tokensPerSecond.toFixed(1)} tokens/s), peak RSS ${fmtBytes(measured.peakRss)}; the plan's ${what} ${fmtBytes(planned!)} (${((planned! / measured.peakRss - 1) * 100).toFixed(1)}%)${input.rollout ? ', no rollouts' : ''}`,
        );
      }
    });
}

/**
 * Values for a measurement's weight `name`: uniform with N(0, 0.02)'s spread (norms 1) from a fast
 * generator seeded by the name; the numbers do not matter, their bytes do. A stream: each call fills
 * `out` with the next values (the same sequence however it is cut).
 */
function randomStream(name: string): (out: Float32Array) => Float32Array {
  const norm = /norm\.weight$/.test(name);
  let s = 0x9e3779b9;
  for (let i = 0; i < name.length; i++) s = Math.imul(s ^ name.charCodeAt(i), 0x01000193);
  s |= 1;
  const a = 0.04 * Math.sqrt(3);
  return (x) => {
    if (norm) return x.fill(1);
    for (let i = 0; i < x.length; i++) {
      s ^= s << 13;
      s ^= s >>> 17;
      s ^= s << 5;
      x[i] = ((s >>> 0) / 4294967296 - 0.5) * a;
    }
    return x;
  };
}

/** Random weights for a measurement: the float32 ones (every weight but those quantized). */
function randomWeights(c: ModelConfig, quantized: Set<string>): Map<string, Float32Array> {
  const w = new Map<string, Float32Array>();
  for (const [name, shape] of Object.entries(weightShapes(c)))
    if (!quantized.has(name)) w.set(name, randomStream(name)(new Float32Array(shape.reduce((p, q) => p * q, 1))));
  return w;
}

/**
 * The quantized base of a measurement, made and quantized a few rows at a time (as a folder is
 * read, loadCheckpoint): no float32 copy of a weight exists whole (Qwen3-8B's head: 2.5 GB).
 */
function randomQuantizedBase(c: ModelConfig, spec: BaseQuantSpec): Map<string, QuantizedMatrix> {
  const shapes = weightShapes(c);
  const out = new Map<string, QuantizedMatrix>();
  for (const [name, q] of baseQuantLayout(c, spec)) {
    const [N, K] = shapes[name] as [number, number];
    const m = emptyQuantized(N, K, q.bits, q.blockSize);
    const next = randomStream(name);
    const rows = Math.max(1, Math.floor(2 ** 22 / K));
    const buf = new Float32Array(rows * K);
    for (let r = 0; r < N; r += rows) quantizeRowsInto(m, next(buf.subarray(0, Math.min(rows, N - r) * K)), r);
    out.set(name, m);
  }
  return out;
}

export interface MeasuredStep {
  /** The process's peak RSS after the steps (bytes). */
  peakRss: number;
  /** RSS when the plan was made (the plan's baseline). */
  baselineRss: number;
  /** The last step: forward + backward + AdamW (seconds). */
  stepSeconds: number;
  tokensPerSecond: number;
  loss: number;
  steps: number;
  /** Micro-batches per step (gradients accumulated, then one AdamW step). */
  microBatches: number;
  /** Sequences scored (old logprobs and entropy) before each step; 0 when the plan has no scoring call. */
  scored: number;
  /** Sequences per scoring call (the plan's score.batch: the update's micro-batch, as the loop scores). */
  scoredPerCall: number;
}

/**
 * Training steps at the plan's micro-batch on random weights, in this process, as a run takes
 * them: the train graph (LoRA adapters or every weight), gradients accumulated, clipped, AdamW;
 * the weights built here have no folder, so under LoRA the frozen base is moved to the ORT worker
 * as a loaded model's is (the plan's "held once"). The first step builds the session; the last is timed.
 */
export async function measureStep(input: MemoryPlanInput, steps = 2, microBatches = 1): Promise<MeasuredStep> {
  const baselineRss = input.baseline ?? process.memoryUsage().rss;
  const { PolicyModel } = await import('../../model/runtime');
  const c = input.config;
  const spec = input.quantizeBase ? { bits: BASE_QUANT_BITS[input.quantizeBase], blockSize: input.quantBlock ?? QUANT_BLOCK } : undefined;
  const mats = spec && input.lora ? randomQuantizedBase(c, spec) : undefined;
  const model = new PolicyModel(c, randomWeights(c, new Set(mats?.keys())), {
    lora: input.lora,
    loraSeed: 1,
    quantizeBase: spec,
    quantizedBaseMats: mats,
    recomputeLayers: input.recomputeLayers ?? false,
    headChunks: input.headChunks,
    providers: input.device && input.device !== 'cpu' ? [input.device, 'cpu'] : undefined,
    // The plan's "held once": the base moves to the worker (a quantized base drops its float32 linear weights) as a
    // folder's would; nothing reads the folder back in a training step.
    ...(input.lora && !input.hostBaseCopy ? { baseFolder: '(random weights, not on disk)' } : {}),
  });
  const opt = new AdamW({ beta1: 0.9, beta2: 0.999, weight_decay: 0 });
  const batch = randomTokenBatch(c.vocabSize, input.train.batch, input.train.seq, 7);
  const lossSpec = input.loss ?? nllLoss;
  // The loss's own inputs (advantages, old logprobs, …): seeded values of their shape; their bytes matter, not their numbers.
  const lossFeeds: Record<string, HostTensor> = {};
  for (const s of lossSpec.inputs) {
    const n = batch.batch * batch.length;
    lossFeeds[s.name] = {
      dtype: 'float32',
      shape: [batch.batch, batch.length],
      data: Float32Array.from({ length: n }, (_, k) => (s.name === 'advantages' ? Math.sin(k) : -1 - (k % 7) / 7)),
    };
  }
  // The step's sequences scored as the loop scores them (engine/train/loop.ts scoreBatch): in calls of the update's micro-batch.
  const scoredPieces: ReturnType<typeof randomTokenBatch>[] = [];
  if (input.score) {
    const { batch: per, seq } = input.score;
    const total = input.score.sequences ?? per;
    for (let k = 0; k < total; k += per) scoredPieces.push(randomTokenBatch(c.vocabSize, Math.min(per, total - k), seq, 11 + k));
  }
  let seconds = 0,
    loss = 0;
  try {
    for (let i = 0; i < steps; i++) {
      const t0 = performance.now();
      for (const piece of scoredPieces) await model.score(piece, { entropy: true }); // the old policy's logprobs of the update's sequences
      const acc = new Map<string, Float32Array>();
      for (let k = 0; k < microBatches; k++) {
        const r = await model.trainStep(batch, lossSpec, batch.valid, lossFeeds);
        accumulate(acc, r.grads, 1 / microBatches);
        loss = r.loss;
      }
      clipAndStep(model, opt, acc, 1, 1e-4);
      seconds = (performance.now() - t0) / 1000;
      process.stderr.write(
        `measure: step ${i + 1}/${steps} ${seconds.toFixed(1)} s${i === 0 ? ' (with the sessions built)' : ''}, peak RSS so far ${fmtBytes(process.resourceUsage().maxRSS * 1024)}\n`,
      );
    }
  } finally {
    await model.dispose();
  }
  return {
    peakRss: process.resourceUsage().maxRSS * 1024,
    baselineRss,
    stepSeconds: seconds,
    tokensPerSecond: (input.train.batch * input.train.seq * microBatches) / seconds,
    loss,
    steps,
    microBatches,
    scored: scoredPieces.reduce((a, p) => a + p.batch, 0),
    scoredPerCall: input.score ? Math.min(input.score.batch, input.score.sequences ?? input.score.batch) : 0,
  };
}
