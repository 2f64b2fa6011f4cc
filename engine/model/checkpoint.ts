/**
 * Checkpoints are HF model folders: config.json, model.safetensors (or shards with
 * model.safetensors.index.json), generation_config.json, and the tokenizer files, so a trained
 * Arbor model opens in any HF tool and any HF Llama/Qwen folder opens in Arbor.
 *
 * Loading refuses rather than guesses: a tensor the config does not explain, a shard the index
 * names but the folder lacks, or a config field that would change results is an error naming it.
 * Saving streams tensors in the dtype the model came in (F32/F16/BF16), shards above a size
 * limit, and writes into a temporary folder that is moved into place only when complete.
 */
import { mulberry32 } from '../base/rng';
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { parseHfConfig, toHfConfig, weightShapes, type ModelConfig, type WeightDType } from './config';
import { emptyQuantized, quantizeRowsInto, type QuantizedMatrix } from './quantize';
import { readSafetensorsHeader, readTensorInto, writeSafetensors, type SafeDType, type SafeTensor, type SafeTensorInfo } from './safetensors';

/** Values read per chunk when a tensor is quantized as it is read (16M: 64 MB of float32 scratch). */
const QUANT_READ_VALUES = 16 * 2 ** 20;

export const TOKENIZER_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'vocab.json',
  'merges.txt',
  'chat_template.jinja',
  'chat_template.json',
  'added_tokens.json',
];

export const INDEX_FILE = 'model.safetensors.index.json';

/** Shard size limit when saving (as transformers' save_pretrained default, 5 GB). */
export const DEFAULT_MAX_SHARD_BYTES = 5e9;

export type Weights = Map<string, Float32Array>;

export interface LoadedCheckpoint {
  folder: string;
  config: ModelConfig;
  weights: Weights;
  /** generation_config.json as found (undefined when the folder has none). */
  generationConfig?: Record<string, unknown>;
  /** The tensors quantized while reading (LoadOptions.quantize), absent from `weights`. */
  quantized?: Map<string, QuantizedMatrix>;
}

export interface LoadOptions {
  /**
   * Block-quantize these tensors as they are read (model.quantize_base): each is read into one
   * scratch buffer and quantized there at its own bits and block size (quantize.ts
   * baseQuantLayout), so the float32 base never exists in memory at once.
   */
  quantize?: Map<string, { bits: 4 | 8; blockSize: number }>;
}

/**
 * Allocate a weight array. (Not a SharedArrayBuffer: onnxruntime-node 1.30 rejects
 * SharedArrayBuffer-backed inputs with "Invalid argument", measured; weights are sent to the
 * model worker once per update instead, see PolicyModel.markWeightsUpdated.)
 */
export function allocWeight(n: number): Float32Array {
  return new Float32Array(n);
}

function readJson(file: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: invalid JSON (${(e as Error).message})`);
  }
}

const TORCH_TO_SAFE: Record<WeightDType, Exclude<SafeDType, 'F64'>> = { float32: 'F32', float16: 'F16', bfloat16: 'BF16' };
const SAFE_TO_TORCH: Record<string, WeightDType> = { F32: 'float32', F16: 'float16', BF16: 'bfloat16' };

const eosList = (v: unknown): number[] => (typeof v === 'number' ? [v] : Array.isArray(v) ? v.filter((x): x is number => typeof x === 'number') : []);

/** generation_config.json, checked: eos_token_id must be an id or a list of ids. */
export function readGenerationConfig(folder: string): Record<string, unknown> | undefined {
  const file = join(folder, 'generation_config.json');
  if (!existsSync(file)) return undefined;
  const g = readJson(file);
  const eos = g.eos_token_id;
  if (eos !== undefined && eos !== null && typeof eos !== 'number' && !(Array.isArray(eos) && eos.every((x) => Number.isInteger(x)))) {
    throw new Error(`${file}: eos_token_id must be a token id or a list of ids, got ${JSON.stringify(eos)}`);
  }
  return g;
}

/**
 * config.json → ModelConfig. The EOS ids are those of config.json and generation_config.json
 * together (transformers' generate stops on generation_config's, which for instruct models
 * lists more ids than config.json, e.g. Qwen2.5's <|im_end|> and <|endoftext|>).
 */
export function readModelConfig(folder: string): ModelConfig {
  const file = join(folder, 'config.json');
  if (!existsSync(file)) throw new Error(`model folder ${folder}: config.json not found`);
  const config = parseHfConfig(readJson(file), file);
  const gen = readGenerationConfig(folder);
  if (gen) {
    const ids = [...new Set([...eosList(config.eosTokenId), ...eosList(gen.eos_token_id)])];
    if (ids.length) config.eosTokenId = ids.length === 1 ? ids[0] : ids;
  }
  return config;
}

interface Located {
  file: string;
  info: SafeTensorInfo;
}

/** Every tensor of the folder's weight files: name → file and header entry. Missing shards are named. */
function locateTensors(folder: string): Map<string, Located> {
  const single = join(folder, 'model.safetensors');
  const index = join(folder, INDEX_FILE);
  const out = new Map<string, Located>();
  const addFile = (file: string) => {
    for (const [name, info] of readSafetensorsHeader(file).tensors) {
      const prev = out.get(name);
      if (prev) throw new Error(`${folder}: tensor '${name}' appears in both ${basename(prev.file)} and ${basename(file)}`);
      out.set(name, { file, info });
    }
  };
  if (existsSync(single)) {
    addFile(single);
    return out;
  }
  if (!existsSync(index)) throw new Error(`model folder ${folder}: neither model.safetensors nor ${INDEX_FILE} found`);
  const map = readJson(index).weight_map as Record<string, string> | undefined;
  if (!map || typeof map !== 'object') throw new Error(`${index}: invalid index (no weight_map object)`);
  const byShard = new Map<string, string[]>();
  for (const [name, shard] of Object.entries(map)) {
    if (typeof shard !== 'string') throw new Error(`${index}: weight_map['${name}'] must be a file name, got ${JSON.stringify(shard)}`);
    byShard.set(shard, [...(byShard.get(shard) ?? []), name]);
  }
  for (const [shard, names] of byShard) {
    const file = join(folder, shard);
    if (!existsSync(file)) {
      throw new Error(
        `${index}: shard '${shard}' (holding '${names[0]}'${names.length > 1 ? ` and ${names.length - 1} more tensors` : ''}) is missing from ${folder}`,
      );
    }
    addFile(file);
    for (const n of names) if (!out.has(n)) throw new Error(`${index}: tensor '${n}' is mapped to '${shard}', which does not contain it`);
  }
  return out;
}

/** Derived buffers some exporters store (recomputed from the config, so skipping them loses nothing). */
const DERIVED = /\.rotary_emb\.inv_freq$/;

export function loadCheckpoint(folder: string, opts: LoadOptions = {}): LoadedCheckpoint {
  const config = readModelConfig(folder);
  const located = locateTensors(folder);
  const shapes = weightShapes(config);
  let tiedHead: Located | undefined;
  for (const [name, at] of located) {
    if (name in shapes || DERIVED.test(name)) continue;
    if (name === 'lm_head.weight' && config.tieWordEmbeddings) {
      tiedHead = at; // checked against the embedding below
      continue;
    }
    throw new Error(
      `${at.file}: unexpected tensor '${name}' (shape [${at.info.shape}]), not part of a ${config.architecture} with this config.json; refusing to ignore it`,
    );
  }
  // The dtype the weights came in (saved back in the same dtype).
  const dtypes = new Set([...Object.keys(shapes)].map((n) => located.get(n)?.info.dtype).filter((d) => d !== undefined));
  const only = dtypes.size === 1 ? SAFE_TO_TORCH[[...dtypes][0]!] : undefined;
  config.dtype = only ?? 'float32';
  const weights: Weights = new Map();
  const quantized = opts.quantize ? new Map<string, QuantizedMatrix>() : undefined;
  let scratch: Float32Array | undefined;
  const fds = new Map<string, number>();
  const fdOf = (file: string) => {
    let fd = fds.get(file);
    if (fd === undefined) fds.set(file, (fd = openSync(file, 'r')));
    return fd;
  };
  try {
    for (const [name, shape] of Object.entries(shapes)) {
      const at = located.get(name);
      if (!at) throw new Error(`${folder}: missing tensor '${name}' (expected shape [${shape}])`);
      const s = at.info.shape;
      if (s.length !== shape.length || s.some((d, i) => d !== shape[i])) throw new Error(`${at.file}: tensor '${name}' has shape [${s}], expected [${shape}]`);
      const n = shape.reduce((p, q) => p * q, 1);
      const q = opts.quantize?.get(name);
      if (quantized && q) {
        // Read and quantized QUANT_READ_ROWS_VALUES values' worth of rows at a time: a 2.5 GB head is never float32 whole.
        const [N, K] = [shape[0]!, shape[1]!];
        const rows = Math.max(1, Math.min(N, Math.floor(QUANT_READ_VALUES / K)));
        if (!scratch) scratch = new Float32Array(rows * K);
        else if (scratch.length < rows * K) scratch = new Float32Array(rows * K);
        const m = emptyQuantized(N, K, q.bits, q.blockSize);
        for (let r = 0; r < N; r += rows) {
          const w = scratch.subarray(0, Math.min(rows, N - r) * K);
          readTensorInto(fdOf(at.file), at.file, at.info, w, r * K);
          quantizeRowsInto(m, w, r);
        }
        quantized.set(name, m);
        continue;
      }
      const w = allocWeight(n);
      readTensorInto(fdOf(at.file), at.file, at.info, w);
      weights.set(name, w);
    }
    if (tiedHead) {
      if (tiedHead.info.shape.join() !== [config.vocabSize, config.hiddenSize].join())
        throw new Error(`${tiedHead.file}: tensor 'lm_head.weight' has shape [${tiedHead.info.shape}] but tie_word_embeddings is true`);
      // Compared with the embedding as stored, a chunk at a time (the embedding may have been quantized as it was read).
      const emb = located.get('model.embed_tokens.weight')!;
      const n = config.vocabSize * config.hiddenSize;
      const step = Math.min(n, QUANT_READ_VALUES);
      const [a, b] = [new Float32Array(step), new Float32Array(step)];
      for (let s = 0; s < n; s += step) {
        const len = Math.min(step, n - s);
        readTensorInto(fdOf(emb.file), emb.file, emb.info, a.subarray(0, len), s);
        readTensorInto(fdOf(tiedHead.file), tiedHead.file, tiedHead.info, b.subarray(0, len), s);
        for (let i = 0; i < len; i++)
          if (a[i] !== b[i])
            throw new Error(
              `${tiedHead.file}: tensor 'lm_head.weight' differs from 'model.embed_tokens.weight' but config.json has tie_word_embeddings: true; refusing to guess which head is meant`,
            );
      }
    }
  } finally {
    for (const fd of fds.values()) closeSync(fd);
  }
  return { folder, config, weights, generationConfig: readGenerationConfig(folder), ...(quantized ? { quantized } : {}) };
}

export interface SaveCheckpointOptions {
  /** Folder whose tokenizer files (and generation_config.json, unless given) are copied. */
  tokenizerFrom?: string;
  generationConfig?: Record<string, unknown>;
  /** dtype on disk; default: the dtype the model came in (config.dtype), else float32. */
  dtype?: WeightDType;
  /** Largest shard in bytes (default 5 GB); above it the weights are sharded with an index. */
  maxShardBytes?: number;
  /** Called after each tensor is written (bytes so far, total bytes, tensor name). */
  onProgress?: (written: number, total: number, tensor: string) => void;
}

/** Group tensors (in weightShapes order) into shards of at most `limit` bytes (a larger tensor gets its own shard). */
function planShards(names: string[], bytesOf: (n: string) => number, limit: number): string[][] {
  const shards: string[][] = [];
  let cur: string[] = [],
    size = 0;
  for (const n of names) {
    const b = bytesOf(n);
    if (cur.length && size + b > limit) {
      shards.push(cur);
      cur = [];
      size = 0;
    }
    cur.push(n);
    size += b;
  }
  if (cur.length) shards.push(cur);
  return shards;
}

const WEIGHT_FILE = /^model(-\d{5}-of-\d{5})?\.safetensors$/;

/**
 * Write an HF folder. Everything is written into a temporary sibling folder first; only when
 * every file is complete is it renamed into place (or, if `folder` already exists, its files
 * are moved in one by one and stale weight files removed), so a save that fails midway leaves
 * the previous checkpoint loadable.
 */
export function saveCheckpoint(folder: string, config: ModelConfig, weights: Weights, opts: SaveCheckpointOptions = {}): void {
  const dtype = opts.dtype ?? config.dtype ?? 'float32';
  const safe = TORCH_TO_SAFE[dtype];
  if (!safe) throw new Error(`saveCheckpoint: unsupported dtype ${JSON.stringify(dtype)} (supported: ${Object.keys(TORCH_TO_SAFE).join(', ')})`);
  const shapes = weightShapes(config);
  const names = Object.keys(shapes);
  for (const name of names) {
    const w = weights.get(name);
    const n = shapes[name].reduce((p, q) => p * q, 1);
    if (!w) throw new Error(`saveCheckpoint: missing weight '${name}'`);
    if (w.length !== n) throw new Error(`saveCheckpoint: weight '${name}' has ${w.length} values, shape [${shapes[name]}] needs ${n}`);
  }
  const bytesPer = safe === 'F32' ? 4 : 2;
  const bytesOf = (n: string) => weights.get(n)!.length * bytesPer;
  const total = names.reduce((a, n) => a + bytesOf(n), 0);
  const parent = dirname(folder);
  mkdirSync(parent, { recursive: true });
  const tmp = join(parent, `.${basename(folder)}.saving-${process.pid}-${Date.now().toString(36)}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  try {
    let written = 0;
    const progress = (name: string, b: number) => {
      written += b;
      opts.onProgress?.(written, total, name);
    };
    const shards = planShards(names, bytesOf, opts.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES);
    const group = (ns: string[]) => new Map<string, SafeTensor>(ns.map((n) => [n, { shape: shapes[n], data: weights.get(n)! }]));
    if (shards.length === 1) {
      writeSafetensors(join(tmp, 'model.safetensors'), group(shards[0]), { format: 'pt' }, safe, progress);
    } else {
      const weightMap: Record<string, string> = {};
      shards.forEach((ns, i) => {
        const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.safetensors`;
        writeSafetensors(join(tmp, file), group(ns), { format: 'pt' }, safe, progress);
        for (const n of ns) weightMap[n] = file;
      });
      const params = names.reduce((a, n) => a + weights.get(n)!.length, 0);
      writeFileSync(
        join(tmp, INDEX_FILE),
        JSON.stringify({ metadata: { total_size: total, total_parameters: params }, weight_map: weightMap }, null, 2) + '\n',
      );
    }
    writeFileSync(join(tmp, 'config.json'), JSON.stringify(toHfConfig({ ...config, dtype }), null, 2) + '\n');
    const srcGen = opts.tokenizerFrom && !opts.generationConfig ? join(opts.tokenizerFrom, 'generation_config.json') : undefined;
    if (srcGen && existsSync(srcGen)) copyFileSync(srcGen, join(tmp, 'generation_config.json'));
    else {
      const gen = opts.generationConfig ?? { bos_token_id: config.bosTokenId, eos_token_id: config.eosTokenId, pad_token_id: config.padTokenId };
      writeFileSync(join(tmp, 'generation_config.json'), JSON.stringify(gen, null, 2) + '\n');
    }
    if (opts.tokenizerFrom) {
      for (const f of TOKENIZER_FILES) {
        const src = join(opts.tokenizerFrom, f);
        if (existsSync(src)) copyFileSync(src, join(tmp, f));
      }
    }
    // Complete: move into place.
    if (!existsSync(folder)) {
      renameSync(tmp, folder);
      return;
    }
    const fresh = new Set(readdirSync(tmp));
    for (const f of fresh) renameSync(join(tmp, f), join(folder, f));
    for (const f of readdirSync(folder)) {
      if (!fresh.has(f) && (WEIGHT_FILE.test(f) || f === INDEX_FILE)) rmSync(join(folder, f), { force: true });
    }
    rmSync(tmp, { recursive: true, force: true });
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
}

/** Seeded initialisation: N(0, 0.02) for matrices (mulberry32 + Box-Muller), ones for norms, zeros for biases. */
export function initWeights(config: ModelConfig, seed: number): Weights {
  const rand = mulberry32(seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  const weights: Weights = new Map();
  for (const [name, shape] of Object.entries(weightShapes(config))) {
    const n = shape.reduce((p, q) => p * q, 1);
    const w = allocWeight(n);
    if (name.endsWith('norm.weight')) w.fill(1);
    else if (!name.endsWith('.bias')) for (let i = 0; i < n; i++) w[i] = 0.02 * normal();
    weights.set(name, w);
  }
  return weights;
}
