/**
 * `arbor generate <model folder | checkpoint> --prompt <text> [--chat] [--max-new N] [--greedy]
 *  [--config <experiment>] [--json]`: a one-line check of a folder before training it. Loads the HF folder (refusing what
 * Arbor cannot run), encodes the prompt (as transformers' tokenizer(text) does, or through the
 * chat template with --chat), decodes with the KV cache until an EOS id (config.json ∪
 * generation_config.json) or N new tokens, and prints the continuation; --json adds the prompt
 * ids, the generated ids and the top logits at the last prompt position (comparable with
 * transformers' model(ids).logits[0, -1], before any repetition penalty). Sampling and the
 * repetition penalty follow generation_config.json unless overridden by flags.
 *
 * `--quantize-base int4|int8` (default: what an adapter folder was trained with, else none) runs
 * the model with its base's linear weights block-quantized (model.quantize_base); --json then
 * adds `quantization`: its next-token logits against the float32 base's over a fixed prompt set
 * (engine/model/quant-quality.ts) plus this prompt.
 */
import { modelArg } from '../../hub/cache';
import { mulberry32 } from '../../base/rng';
import type { Command } from 'commander';
import { intFlag, numberFlag } from '../flags';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { readGenerationConfig } from '../../model/checkpoint';
import { PolicyModel, savedBaseQuant } from '../../model/runtime';
import { QUALITY_PROMPTS, quantizationQuality, type QuantQuality } from '../../model/quant-quality';
import { baseQuantSpec, QUANT_BLOCK, QUANT_MODES, type QuantMode } from '../../model/quantize';
import { policyDecodeBackend } from '../../rollout/model-backend';
import type { WorkerKvBackend } from '../../rollout/worker-kv';
import { resolveProviders } from '../../tensor/ort';
import { DEVICES, deviceOption } from '../device-option';
import { HfTokenizer } from '../../model/tokenizer';

export interface GenerateOptions {
  prompt: string;
  chat?: boolean;
  /**
   * An experiment config: the prompt is rendered as its episodes are (the environment's system
   * prompt and instruction, its tools in its tool-call format, the chat template), the prompt
   * text being the user message.
   */
  config?: string;
  maxNew?: number;
  greedy?: boolean;
  temperature?: number;
  topK?: number;
  topP?: number;
  repetitionPenalty?: number;
  seed?: number;
  top?: number;
  threads?: number;
  /** ONNX Runtime device (engine/tensor/ort.ts resolveProviders): cpu (default), webgpu, cuda, auto. */
  device?: string;
  /** The base's linear weights block-quantized (model.quantize_base); default: what the adapter folder records, else none. */
  quantizeBase?: QuantMode;
  /** Values per scale with quantizeBase (default: the folder's, else 32). */
  quantizeBlock?: number;
  /** With a quantized base: compare its next-token logits with the float32 base's (QUALITY_PROMPTS and this prompt). */
  quality?: boolean;
}

export interface GenerateResult {
  folder: string;
  prompt: string;
  promptText: string;
  promptIds: number[];
  generatedIds: number[];
  text: string;
  stop: 'eos' | 'max_new' | 'max_length';
  /** With --config: the environment's tools and tool-call format the prompt shows. */
  environment?: { format: string; tools: string[] };
  sampling: { greedy: boolean; temperature?: number; topK?: number; topP?: number; seed?: number; repetitionPenalty: number };
  topLogits: { id: number; token: string; logit: number; logprob: number }[];
  /** The quantized base (model.quantize_base) the model ran with, and its logits against the float32 base's (with `quality`). */
  quantization?: { mode: QuantMode; block: number; quality?: QuantQuality };
  /** On the WebGPU device: bytes that crossed host ↔ device while decoding, and of those the KV cache (0: it stayed on the device). */
  deviceBytes?: { toDevice: number; toHost: number; kvCache: number };
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** Sample as transformers' generate does: temperature, then top-k, then top-p (nucleus). */
function sample(logits: Float32Array, temperature: number, topK: number, topP: number, rand: () => number): number {
  const idx = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a]);
  const k = topK > 0 ? Math.min(topK, idx.length) : idx.length;
  const kept = idx.slice(0, k);
  const m = logits[kept[0]] / temperature;
  let probs = kept.map((i) => Math.exp(logits[i] / temperature - m));
  const z = probs.reduce((a, b) => a + b, 0);
  probs = probs.map((p) => p / z);
  let n = probs.length;
  if (topP < 1) {
    let c = 0;
    for (n = 0; n < probs.length;) {
      c += probs[n++];
      if (c >= topP) break;
    }
  }
  const total = probs.slice(0, n).reduce((a, b) => a + b, 0);
  let r = rand() * total;
  for (let i = 0; i < n; i++) {
    r -= probs[i];
    if (r <= 0) return kept[i];
  }
  return kept[n - 1];
}

function topLogits(logits: Float32Array, n: number, tok: HfTokenizer): GenerateResult['topLogits'] {
  let m = -Infinity;
  for (const x of logits) m = Math.max(m, x);
  let z = 0;
  for (const x of logits) z += Math.exp(x - m);
  const lse = m + Math.log(z);
  return Array.from(logits.keys())
    .sort((a, b) => logits[b] - logits[a])
    .slice(0, n)
    .map((id) => ({ id, token: tok.decode([id]), logit: logits[id], logprob: logits[id] - lse }));
}

/** The prompt as a config's episodes render it (ToolEnv with the config's task kit, tools and format). */
async function environmentPrompt(folder: string, file: string, prompt: string): Promise<{ text: string; ids: number[]; format: string; tools: string[] }> {
  const { loadConfig, validateLoaded } = await import('../../config/experiment');
  const { openEnvironmentKit } = await import('../../tasks/open');
  const { ToolEnv } = await import('../../env/toolenv');
  const { cfg: base } = await loadConfig(file, undefined, { job: 'environment', warn: (l) => process.stderr.write(`${l}\n`) });
  const loaded = validateLoaded({ ...structuredClone(base), model: { path: folder } }, { file, job: 'environment', warn: () => undefined });
  const { cfg } = loaded;
  const { env, kit } = await openEnvironmentKit(loaded);
  try {
    const sample = kit.trainTasks[0]?.createEnv();
    if (!(sample instanceof ToolEnv)) throw new Error(`--config: task "${cfg.task.kind}" has no tool environment to render`);
    const ep = new ToolEnv({ ...sample.opts, task: { id: 'generate', prompt } });
    const r = await ep.prompt();
    return { text: r.text, ids: r.ids, format: ep.opts.format.name, tools: ep.opts.tools.map((t) => t.name) };
  } finally {
    await env.close();
  }
}

export async function generate(folderArg: string, o: GenerateOptions): Promise<GenerateResult> {
  const folder = resolve(modelArg(folderArg, '<folder>'));
  if (!existsSync(folder)) throw new Error(`model folder ${folder} does not exist`);
  if (o.config && o.chat)
    throw new Error("--chat: with --config the prompt is rendered as the config's episodes are (chat template included); give one of them");
  const rendered = o.config ? await environmentPrompt(folder, o.config, o.prompt) : undefined;
  const providers = await resolveProviders(o.device ?? 'cpu');
  const saved = savedBaseQuant(folder);
  if (o.quantizeBlock !== undefined && (o.quantizeBase ?? (saved ? 'x' : 'none')) === 'none')
    throw new Error('--quantize-block: applies with a quantized base; give --quantize-base int4 or int8');
  const quantizeBase =
    o.quantizeBase !== undefined
      ? (baseQuantSpec(o.quantizeBase, o.quantizeBlock ?? saved?.blockSize ?? QUANT_BLOCK) ?? null)
      : saved && { ...saved, blockSize: o.quantizeBlock ?? saved.blockSize };
  const model = PolicyModel.load(folder, { threads: o.threads, providers, quantizeBase });
  try {
    const tok = HfTokenizer.load(folder);
    const c = model.config;
    const promptText = rendered ? rendered.text : o.chat ? tok.renderChat([{ role: 'user', content: o.prompt }], { addGenerationPrompt: true }) : o.prompt;
    const promptIds = rendered ? rendered.ids : o.chat ? tok.encode(promptText) : tok.encodeWithSpecialTokens(promptText);
    if (promptIds.length === 0) throw new Error('--prompt: the prompt encodes to no tokens');
    for (const id of promptIds)
      if (id >= c.vocabSize) throw new Error(`--prompt: token id ${id} is outside the model's vocabulary (${c.vocabSize}); tokenizer and model do not match`);
    const gen = readGenerationConfig(folder) ?? {};
    const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
    const greedy = !!o.greedy;
    const temperature = o.temperature ?? num(gen.temperature) ?? 1;
    const topK = o.topK ?? num(gen.top_k) ?? 50;
    const topP = o.topP ?? num(gen.top_p) ?? 1;
    // As transformers' RepetitionPenaltyLogitsProcessor (greedy or sampled): seen tokens' logits ÷ p if > 0, × p otherwise.
    const repetitionPenalty = o.repetitionPenalty ?? num(gen.repetition_penalty) ?? 1;
    if (!(repetitionPenalty > 0)) throw new Error(`repetition penalty must be > 0 (got ${repetitionPenalty})`);
    if (!greedy && !(temperature > 0)) throw new Error(`--temperature must be > 0 (got ${temperature}); use --greedy for argmax decoding`);
    const seed = o.seed ?? 0;
    const rand = mulberry32(seed);
    const eos = new Set(c.eosTokenId === null ? [] : Array.isArray(c.eosTokenId) ? c.eosTokenId : [c.eosTokenId]);
    const maxNew = o.maxNew ?? 64;
    const generatedIds: number[] = [];
    let past: { k: Float32Array; v: Float32Array }[] = Array.from({ length: c.numLayers }, () => ({ k: new Float32Array(0), v: new Float32Array(0) }));
    // On the WebGPU device the KV cache stays there between steps (the rollout engine's worker
    // cache, engine/rollout/worker-kv.ts): only the ids go in and the logits row comes out. On
    // the CPU the host cache as before.
    const device = model.onDevice
      ? (policyDecodeBackend(model, {
          maxBatch: 1,
          maxLength: Math.min(c.maxPositionEmbeddings, promptIds.length + maxNew),
          shards: 1,
        }) as WorkerKvBackend)
      : undefined;
    let P = 0;
    let input = promptIds;
    let first: Float32Array | undefined;
    let stop: GenerateResult['stop'] = 'max_new';
    try {
      while (generatedIds.length < maxNew) {
        if (P + input.length > c.maxPositionEmbeddings) {
          stop = 'max_length';
          break;
        }
        const T = input.length;
        let row: Float32Array;
        if (device) row = (await device.extend([{ slot: 0, tokens: input }]))[0]!;
        else {
          const out = await model.decode({
            batch: 1,
            newLength: T,
            pastLength: P,
            inputIds: Int32Array.from(input),
            attentionMask: new Int32Array(P + T).fill(1),
            positionIds: Int32Array.from({ length: T }, (_, i) => P + i),
            past,
          });
          past = out.present;
          row = out.logits;
        }
        P += T;
        first ??= row.slice();
        const logits = row.slice();
        if (repetitionPenalty !== 1) {
          for (const id of new Set([...promptIds, ...generatedIds]))
            logits[id] = logits[id] > 0 ? logits[id] / repetitionPenalty : logits[id] * repetitionPenalty;
        }
        const next = greedy ? argmax(logits) : sample(logits, temperature, topK, topP, rand);
        generatedIds.push(next);
        if (eos.has(next)) {
          stop = 'eos';
          break;
        }
        input = [next];
      }
    } finally {
      await device?.close();
    }
    return {
      folder,
      prompt: o.prompt,
      promptText,
      promptIds,
      generatedIds,
      text: tok.decode(generatedIds.filter((id) => !eos.has(id))),
      stop,
      sampling: greedy ? { greedy, repetitionPenalty } : { greedy, temperature, topK, topP, seed, repetitionPenalty },
      topLogits: first ? topLogits(first, o.top ?? 10, tok) : [],
      ...(rendered ? { environment: { format: rendered.format, tools: rendered.tools } } : {}),
      ...(model.baseQuant
        ? {
            quantization: {
              mode: model.baseQuant.bits === 4 ? ('int4' as const) : ('int8' as const),
              block: model.baseQuant.blockSize,
              ...(o.quality ? { quality: await baseQuality(folder, model, tok, promptIds, { threads: o.threads, providers }) } : {}),
            },
          }
        : {}),
      ...(device
        ? {
            deviceBytes: { toDevice: device.crossing.toDevice, toHost: device.crossing.toHost, kvCache: device.crossing.kvToDevice + device.crossing.kvToHost },
          }
        : {}),
    };
  } finally {
    await model.dispose();
  }
}

/** The quantized model's next-token logits against the same folder with the float32 base, over QUALITY_PROMPTS and the prompt. */
async function baseQuality(
  folder: string,
  model: PolicyModel,
  tok: HfTokenizer,
  promptIds: number[],
  opts: { threads?: number; providers: string[] },
): Promise<QuantQuality> {
  const float = PolicyModel.load(folder, { ...opts, quantizeBase: null });
  try {
    const seqs = [...QUALITY_PROMPTS.map((p) => tok.encodeWithSpecialTokens(p)), promptIds].filter(
      (s) => s.length > 0 && s.every((id) => id < model.config.vocabSize),
    );
    return await quantizationQuality(model, float, seqs);
  } finally {
    await float.dispose();
  }
}

const positiveInt = (name: string) => intFlag(name, 1);
const number = (name: string) => numberFlag(name);

export function register(program: Command): void {
  program
    .command('generate')
    .description('load a model folder or checkpoint and print its continuation of a prompt (a check before training)')
    .argument('<folder>', 'HF model folder or Arbor checkpoint (e.g. <run>/checkpoints/step-000040)')
    .requiredOption('--prompt <text>', 'prompt text')
    .option('--chat', "wrap the prompt as a user message with the model's chat template")
    .option(
      '--config <file>',
      "render the prompt as an experiment config's episodes do: its system prompt, tools and tool-call format (the prompt is the user message)",
    )
    .option('--max-new <n>', 'largest number of new tokens', positiveInt('max-new'), 64)
    .option('--greedy', 'argmax decoding (default: sampling with generation_config.json temperature / top_k / top_p)')
    .option('--temperature <t>', 'sampling temperature (overrides generation_config.json)', number('temperature'))
    .option('--top-k <k>', 'sampling top-k, 0 = off (overrides generation_config.json)', number('top-k'))
    .option('--top-p <p>', 'sampling top-p (overrides generation_config.json)', number('top-p'))
    .option('--repetition-penalty <p>', 'repetition penalty (overrides generation_config.json; greedy too, as transformers)', number('repetition-penalty'))
    .option('--seed <seed>', 'sampling seed', number('seed'), 0)
    .option('--top <n>', 'how many top logits --json lists', positiveInt('top'), 10)
    .option('--threads <n>', 'ONNX Runtime intra-op threads', positiveInt('threads'))
    .option('--device <device>', `ONNX Runtime device: ${DEVICES.join(', ')} (default cpu)`, deviceOption)
    .option(
      '--quantize-base <mode>',
      `the base's linear weights block-quantized: ${QUANT_MODES.join(', ')} (default: what an adapter folder was trained with, else none)`,
      (v: string) => {
        if (!(QUANT_MODES as readonly string[]).includes(v)) throw new Error(`--quantize-base: got "${v}"; allowed: ${QUANT_MODES.join(', ')}`);
        return v as QuantMode;
      },
    )
    .option('--quantize-block <n>', 'values per scale of --quantize-base (a power of two ≥ 16; default 32)', (v: string) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 16 || (n & (n - 1)) !== 0) throw new Error(`--quantize-block: got "${v}"; give a power of two ≥ 16`);
      return n;
    })
    .option('--json', "print prompt ids, generated ids and the top logits as JSON (with a quantized base: its logits against the float32 base's)")
    .action(async (folder: string, o: GenerateOptions & { json?: boolean }) => {
      const r = await generate(folder, { ...o, quality: o.quality ?? !!o.json });
      if (o.json) console.log(JSON.stringify(r));
      else console.log(r.text);
    });
}
