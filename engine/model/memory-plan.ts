/**
 * The memory plan of a training run, before it starts (`arbor plan`, and the one-line total that
 * `arbor train` prints and checks): the bytes of the weights (the frozen base in float32 or block-
 * quantized, the LoRA adapters), the optimizer state, the activations of one training micro-batch,
 * the rollout KV cache and the process's own baseline, with what fits a memory budget and which
 * config key to change when it does not.
 *
 * It follows how Arbor holds memory (docs/areas/model.md, "Where the weights live"):
 * - a full model is held twice (the main thread's arrays, which AdamW updates in place, and the ORT
 *   worker's copy), plus a staging copy of every tensor re-sent after an update; under LoRA with a
 *   base folder the frozen base lives only in the worker (moved, not copied), a built-in model
 *   without a folder keeps the host copy too; the adapters are held like a full model's weights;
 * - AdamW keeps two moments per trainable value; a step's gradients arrive from the worker and are
 *   accumulated over micro-batches into a second buffer;
 * - the train graph's activations are not estimated from a formula: the program itself (the same
 *   `trainProgram` the run executes: block recompute, LM-head chunks, the frozen head's closed
 *   form, LoRA, the config's loss) is traced at the micro-batch's size and the tensors alive at
 *   once are counted in execution order (`graphPeakBytes`; views share their input's buffer),
 *   times ORT_ARENA_FACTOR for what ONNX Runtime's arena and kernels add (measured, below);
 * - the score graph (old and reference logprobs) likewise, forward only, over one scoring call: the loop
 *   scores a step's episodes in pieces of the update's micro-batch (in recording order, scoreGraphBytes);
 * - the rollouts' KV cache is batch × max length × layers × KV heads × head dim × 2 (K, V) × 4 bytes,
 *   held by the decode worker; float32 decode sessions of 4M–200M parameters on the CPU bake a
 *   transposed copy of the linear weights in (PolicyModel bakeDecodeWeights);
 * - ONNX Runtime's arenas keep what a session allocated for the life of the session, so the train,
 *   score and decode workspaces add up rather than take turns.
 */
import { reachable, traceGraph, type GNode, type Graph, type InputSpec, type Program } from '../tensor/graph';
import { withGradients } from '../tensor/autodiff';
import { parameterCount, weightShapes, type ModelConfig } from './config';
import { decodeInputSpecs, decodeProgram, scoreInputSpecs, scoreProgram, trainInputSpecs, trainProgram, type LossSpec } from './graphs';
import { adapterShapes, type LoraSpec } from './lora';
import { nllLoss } from './lora-step';
import {
  baseQuantLayout,
  HEAD_QUANT_BITS,
  QUANT_BLOCK,
  quantizedBaseSpecs,
  quantizedBytes,
  quantizedWeightNames,
  withQuantizedBase,
  type BaseQuantSpec,
} from './quantize';
import { recomputedBlocks } from './transformer';

/** A frozen base stored block-quantized (`model.quantize_base`). */
export type BaseQuant = 'int4' | 'int8';
export const BASE_QUANT_BITS: Record<BaseQuant, 4 | 8> = { int4: 4, int8: 8 };

/**
 * Bytes of the Node process before the model exists: V8, the engine's modules, the CLI. Measured
 * at plan time where the plan is made in the process that will train (process.memoryUsage().rss);
 * this default is what `node bin/arbor.mjs` holds after loading its commands on Linux x64 (Node 22:
 * 185–200 MB, docs/BENCHMARKS.md "Memory plan").
 */
export const PROCESS_BASELINE_BYTES = 190e6;
/**
 * ONNX Runtime in the process: the native library, the model's worker thread and its sessions'
 * fixed buffers (measured with `arbor plan --shape tiny --measure`: the step's peak RSS less the
 * baseline, the weights and the counted activations: 72–75 MB on Linux x64, Node 22, 2026-11-28, once
 * the CLI loaded only the command's modules and tfjs only when used, so that the baseline no longer
 * hid the worker thread's own module heap).
 */
export const ORT_RUNTIME_BYTES = 75e6;
/**
 * ONNX Runtime's arena and kernels against the tensors the traced graph holds at once: rounding
 * to the arena's bins, kernels' scratch (GEMM packing, fused ops' temporaries), and tensors
 * kept by its own execution order. Measured at the 25M and Qwen2.5-0.5B shapes (docs/BENCHMARKS.md
 * "Memory plan").
 */
export const ORT_ARENA_FACTOR = 1.2;
/** Tensor bytes of a dtype. */
const DTYPE_BYTES: Record<string, number> = { float32: 4, int32: 4, float64: 8, int64: 8, bool: 1, uint8: 1, float16: 2 };
/** Ops whose output is a view of their first input (no buffer of their own in ONNX Runtime). */
const VIEW_OPS = new Set(['reshape', 'squeeze', 'unsqueeze', 'stopGradient', 'identity']);

const numel = (shape: readonly (number | string)[]): number => {
  let n = 1;
  for (const d of shape) {
    if (typeof d !== 'number') throw new Error(`memory plan: symbolic dim '${d}' left in a traced graph (trace it at concrete sizes)`);
    n *= d;
  }
  return n;
};

/**
 * The order ONNX Runtime runs a graph's nodes in (its default: a depth-first post-order from the
 * graph's outputs, the last output first, each node's inputs first, in order): a recompute group's
 * clones run only when the backward pass reaches them, where the recording order would put them.
 * (The last output first: measured with LoRA's weight gradients made as the backward pass goes,
 * withGradients `weightsFirst`: the 25M int4 step of 4 × 512 with every block recomputed peaked at
 * 645 MiB, 403 MiB of activations planned so against 270 MiB first output first.)
 */
function executionOrder(g: Graph): GNode[] {
  const seen = new Set<number>();
  const out: GNode[] = [];
  // ORT starts from the graph's leaf nodes (here the outputs' Identity nodes, in output order) on a
  // stack, so the last output's inputs run first.
  for (const root of Object.values(g.outputs).reverse()) {
    const stack: [GNode, number][] = [[root, 0]];
    while (stack.length) {
      const top = stack[stack.length - 1]!;
      const [n, i] = top;
      if (i === 0) {
        if (seen.has(n.id)) {
          stack.pop();
          continue;
        }
        seen.add(n.id);
      }
      if (i < n.inputs.length) {
        top[1]++;
        const x = n.inputs[i]!;
        if (!seen.has(x.id)) stack.push([x, 0]);
      } else {
        stack.pop();
        out.push(n);
      }
    }
  }
  return out;
}

/**
 * A transpose of the last two axes read only by matmuls (or by another transpose, which cancels
 * it): ONNX Runtime folds it into the GEMM (MatMul with a transposed operand) or removes the pair,
 * so no transposed copy exists (a weight's Wᵀ in every linear layer, and (Wᵀ)ᵀ in its backward pass).
 */
function fusedTranspose(n: GNode, readers: GNode[]): boolean {
  if (n.op !== 'transpose' || readers.length === 0 || !readers.every((r) => r.op === 'matmul' || r.op === 'transpose')) return false;
  const perm = n.attrs.perm as number[] | undefined;
  if (!perm || perm.length < 2) return false;
  const k = perm.length;
  return perm.every((p, i) => (i < k - 2 ? p === i : p === (i === k - 2 ? k - 1 : k - 2)));
}

/**
 * The most bytes of intermediate tensors alive at once when `g` runs (executionOrder, or the order
 * the program recorded its nodes in; inputs are
 * not counted: the caller counts the weights and feeds it owns). A tensor lives from its node to
 * its last reader (outputs: to the end); views (reshape, squeeze, …) extend their source's life
 * instead of holding a buffer.
 */
export function graphPeakBytes(g: Graph, order: 'ort' | 'recorded' = 'ort'): number {
  const live0 = order === 'ort' ? null : reachable(Object.values(g.outputs)); // what ORT runs: no dead nodes
  const nodes = order === 'ort' ? executionOrder(g) : g.nodes.filter((n) => live0!.has(n.id));
  const readers = new Map<number, GNode[]>();
  for (const n of nodes) for (const x of n.inputs) readers.set(x.id, [...(readers.get(x.id) ?? []), n]);
  const source = new Map<number, number>(); // view id → id of the buffer it reads
  const bufferOf = (n: GNode): number => source.get(n.id) ?? n.id;
  const lastUse = new Map<number, number>();
  nodes.forEach((n, i) => {
    if ((VIEW_OPS.has(n.op) || fusedTranspose(n, readers.get(n.id) ?? [])) && n.inputs[0]) source.set(n.id, bufferOf(n.inputs[0]));
    for (const x of n.inputs) lastUse.set(bufferOf(x), i);
  });
  const end = nodes.length;
  for (const o of Object.values(g.outputs)) lastUse.set(bufferOf(o), end);
  const frees: number[] = new Array(end).fill(0);
  let live = 0,
    peak = 0;
  nodes.forEach((n, i) => {
    if (n.op !== 'input' && !source.has(n.id)) {
      const bytes = numel(n.shape) * (DTYPE_BYTES[n.dtype] ?? 4);
      live += bytes;
      const last = lastUse.get(n.id) ?? i;
      if (last < end) frees[last] += bytes;
      // A quantized weight made float32 inside the node: the elementwise dequantization's intermediates, two of the
      // float32 weight's size at once (qmatmul on the CPU: dequantized, then Gemm; dequantNBits: its output counted
      // above, one more).
      const wBytes = n.op === 'qmatmul' || n.op === 'dequantNBits' ? (n.attrs.N as number) * (n.attrs.K as number) * 4 : 0;
      const scratch = n.op === 'qmatmul' ? 2 * wBytes : wBytes;
      if (live + scratch > peak) peak = live + scratch;
    }
    live -= frees[i];
  });
  return peak;
}

const concrete = <S extends { shape: (number | string)[] }>(specs: S[], dims: Record<string, number>): S[] =>
  specs.map((s) => ({ ...s, shape: s.shape.map((d) => (typeof d === 'string' && d in dims ? dims[d]! : d)) }));

/** The plan's loss when the caller gives none: the masked NLL of a bare LoRA step (lora-step.ts; the SFT loss has the same tensors). */
export const PLAN_NLL: LossSpec = nllLoss;

/** Intermediate bytes of one training micro-batch [batch, seq] (forward + backward), as traced; before ORT_ARENA_FACTOR. */
export function trainGraphBytes(
  c: ModelConfig,
  o: { batch: number; seq: number; lora?: LoraSpec; loss?: LossSpec; recomputeLayers?: boolean | number; headChunks?: number; quantizeBase?: BaseQuantSpec },
): number {
  const loss = o.loss ?? PLAN_NLL;
  const wrt = o.lora ? Object.keys(adapterShapes(c, o.lora)) : Object.keys(weightShapes(c));
  const frozenHead = !!o.lora; // LoRA never differentiates the head (PolicyModel.trainStep)
  const specs = concrete(trainInputSpecs(c, loss, o.lora), { batch: o.batch, seq: o.seq });
  const program = trainProgram(c, loss, o.lora, o.headChunks, o.recomputeLayers ?? false, frozenHead);
  return graphPeakBytes(withGradients(trace(c, specs, program, o.quantizeBase), 'loss', wrt, { weightsFirst: !!o.lora }));
}

/** Trace a program as PolicyModel does: with a quantized base, its linear weights read as codes + scales (MatMulNBits; the backward dequantizes one layer at a time). */
function trace(c: ModelConfig, specs: InputSpec[], program: Program, q?: BaseQuantSpec): Graph {
  if (!q) return traceGraph(specs, program);
  const layout = baseQuantLayout(c, q);
  return traceGraph(quantizedBaseSpecs(specs, layout), withQuantizedBase(program, layout, weightShapes(c), 'input', 0));
}

/**
 * Intermediate bytes of a scoring call [batch, seq] (logprobs and entropy; forward only), counted in
 * recording order: each LM-head chunk's entropy right after its logprob. (The depth-first order
 * would keep every chunk's [rows, V] log-softmax until the entropy output, 1.6 GB at Qwen2.5-0.5B
 * and 8 × 288; the RL loop of bench:model peaked 1 GB below a plan counted so: docs/BENCHMARKS.md
 * "Memory plan".)
 */
export function scoreGraphBytes(c: ModelConfig, o: { batch: number; seq: number; lora?: LoraSpec; headChunks?: number; quantizeBase?: BaseQuantSpec }): number {
  const specs = concrete(scoreInputSpecs(c, o.lora), { batch: o.batch, seq: o.seq });
  return graphPeakBytes(trace(c, specs, scoreProgram(c, true, o.lora, o.headChunks), o.quantizeBase), 'recorded');
}

/** Intermediate bytes of one decode step of `batch` rows over a past of `past` tokens (the cache itself not counted). */
export function decodeGraphBytes(c: ModelConfig, o: { batch: number; past: number; newTokens?: number; lora?: LoraSpec }): number {
  const n = o.newTokens ?? 1;
  const specs = concrete(decodeInputSpecs(c, o.lora), { batch: o.batch, past: o.past, new: n, total: o.past + n });
  return graphPeakBytes(traceGraph(specs, decodeProgram(c, o.lora, { kvOut: 'new' })));
}

export interface MemoryPlanInput {
  config: ModelConfig;
  /** LoRA adapters (absent: full fine-tuning). */
  lora?: LoraSpec;
  /** The frozen base stored block-quantized (LoRA only). */
  quantizeBase?: BaseQuant;
  /** Values per quantization scale (`model.quantize_block`; default QUANT_BLOCK). */
  quantBlock?: number;
  /** One training micro-batch: sequences × tokens. */
  train: { batch: number; seq: number };
  /** `model.recompute_layers`. */
  recomputeLayers?: boolean | number;
  /** LM-head row chunks (default defaultHeadChunks). */
  headChunks?: number;
  /** The training loss (default: masked NLL; a run passes its policy loss, which reads the entropy). */
  loss?: LossSpec;
  /** Rollouts: sequences decoded at once and their longest length (prompt + every turn). Absent: no rollouts (SFT, a bare step). */
  rollout?: { batch: number; maxLength: number };
  /**
   * The old/reference logprobs' scoring (forward only): `batch` sequences per call (the loop's pieces: the update's
   * micro-batch, engine/train/loop.ts scorePieceSize), `sequences` scored per step (default `batch`). Absent: no scoring.
   */
  score?: { batch: number; seq: number; sequences?: number };
  /** The main thread keeps a host copy of the frozen base (a built-in model without a folder; PolicyModel keepHostBase). Default false. */
  hostBaseCopy?: boolean;
  /** The KL reference: a copy of the trainable weights (algorithm.kl_coef > 0). */
  klReference?: boolean;
  /** A PPO critic (GAE): a full float32 copy of the transformer, trained in full. */
  critic?: boolean;
  /** algorithm.distill: the teacher (its own frozen float32 model) and its scoring calls (pieces of `batch` of a step's `sequences`). */
  teacher?: { config: ModelConfig; score: { batch: number; seq: number; sequences?: number } };
  /** `rollout.quantize`: a quantized copy of the linear weights for sampling (held by the main thread and the decode session). */
  rolloutQuantize?: BaseQuant | 'none';
  /** Device the sessions run on ('cpu' unless said: decode weights are baked only there). */
  device?: string;
  /** The process's bytes before the model exists (default PROCESS_BASELINE_BYTES). */
  baseline?: number;
}

/** One line of the plan. `key`: the config key (or flag) that changes it. */
export interface PlanItem {
  id:
    | 'baseline'
    | 'runtime'
    | 'base'
    | 'adapters'
    | 'optimizer'
    | 'gradients'
    | 'reference'
    | 'critic'
    | 'teacher'
    | 'decode_weights'
    | 'activations'
    | 'score'
    | 'kv_cache';
  label: string;
  bytes: number;
  detail: string;
  key?: string;
}

export interface MemoryPlan {
  items: PlanItem[];
  /** Everything at once: the process's peak during a run. */
  total: number;
  /** A training step alone (no rollouts or scoring): baseline, runtime, weights, optimizer, gradients and the train activations. */
  step: number;
  parameters: number;
  trainable: number;
}

const sumShapes = (shapes: Record<string, number[]>, only?: (name: string) => boolean) =>
  Object.entries(shapes).reduce((a, [name, s]) => (only && !only(name) ? a : a + s.reduce((p, q) => p * q, 1)), 0);

/** The memory plan of a run (see the file comment). */
export function memoryPlan(input: MemoryPlanInput): MemoryPlan {
  const c = input.config;
  const lora = input.lora;
  if (input.quantizeBase && !lora)
    throw new Error('model.quantize_base: the quantized base is frozen, so it needs model.lora (full fine-tuning trains every weight in float32)');
  recomputedBlocks(c, input.recomputeLayers); // refuses a budget the model does not have, naming the key
  const params = parameterCount(c);
  const trainable = lora ? sumShapes(adapterShapes(c, lora)) : params;
  const qspec = input.quantizeBase ? { bits: BASE_QUANT_BITS[input.quantizeBase], blockSize: input.quantBlock ?? QUANT_BLOCK } : undefined;
  const items: PlanItem[] = [
    { id: 'baseline', label: 'process', bytes: input.baseline ?? PROCESS_BASELINE_BYTES, detail: 'Node, the engine and the CLI before the model exists' },
    { id: 'runtime', label: 'ONNX Runtime', bytes: ORT_RUNTIME_BYTES, detail: 'native library, the model worker and its sessions (measured)' },
    qspec ? quantizedBaseItem(input, qspec) : floatWeightsItem(params, lora, input.hostBaseCopy),
    ...trainableStateItems(trainable, lora, input.klReference),
    ...(input.critic ? [criticItem(params)] : []),
    ...(input.teacher ? [teacherItem(input.teacher)] : []),
    ...decodeWeightsItems(input, params),
    ...workspaceItems(input, qspec),
  ];
  const total = items.reduce((a, i) => a + i.bytes, 0);
  const stepIds = new Set<PlanItem['id']>(['baseline', 'runtime', 'base', 'adapters', 'optimizer', 'gradients', 'activations']);
  const step = items.filter((i) => stepIds.has(i.id)).reduce((a, i) => a + i.bytes, 0);
  return { items, total, step, parameters: params, trainable };
}

/** Whether rollouts decode on the CPU (only there does ORT pre-pack a quantized base and the decode session bake float32 weights). */
const decodesOnCpu = (input: MemoryPlanInput): boolean => !!input.rollout && (input.device ?? 'cpu') === 'cpu';

/**
 * The frozen base block-quantized (model.quantize_base). PolicyModel (quantizeBase): the codes are moved to the ORT worker
 * (one copy; inputs of the score and train sessions); a CPU decode session reads them there as external initializers and ORT
 * pre-packs them for its MatMulNBits kernel (a second copy of about the same size). The float32 rest (norms, biases) is moved
 * to the worker too; a built-in model without a folder keeps the codes and its float32 base on the main thread.
 */
function quantizedBaseItem(input: MemoryPlanInput, qspec: BaseQuantSpec): PlanItem {
  const c = input.config;
  const shapes = weightShapes(c);
  const layout = baseQuantLayout(c, qspec);
  const names = new Set(layout.keys());
  let q = 0;
  for (const [n, spec] of layout) q += quantizedBytes(shapes[n]![0]!, shapes[n]![1]!, spec.bits, spec.blockSize);
  const rest = sumShapes(shapes, (n) => !names.has(n)) * 4;
  const prePacked = decodesOnCpu(input);
  const codeCopies = (prePacked ? 2 : 1) + (input.hostBaseCopy ? 1 : 0);
  const restCopies = input.hostBaseCopy ? 2 : 1;
  const hostLinear = input.hostBaseCopy ? sumShapes(shapes, (n) => names.has(n)) * 4 : 0;
  const holders = ['worker', ...(prePacked ? ["CPU decode session's pre-packed copy"] : []), ...(input.hostBaseCopy ? ['main thread'] : [])];
  return {
    id: 'base',
    label: 'frozen base',
    bytes: q * codeCopies + rest * restCopies + hostLinear,
    detail:
      `${input.quantizeBase} ${c.tieWordEmbeddings ? 'linear layers' : 'embeddings and linear layers'}, LM head ${HEAD_QUANT_BITS}-bit${c.tieWordEmbeddings ? ' (the tied embeddings)' : ''} (block ${qspec.blockSize}) ${fmtBytes(q)} × ${codeCopies} (${holders.join(', ')})` +
      ` + float32 norms and biases ${fmtBytes(rest)} × ${restCopies}` +
      (hostLinear ? ` + the float32 linear weights ${fmtBytes(hostLinear)} (a built-in model without a folder keeps them)` : ''),
    key: 'model.quantize_base',
  };
}

/**
 * The float32 weights: a LoRA base (frozen) or the whole model (trained in full). Copies: LoRA with a folder → the worker's only;
 * a built-in model keeps its host copy; a full model is held twice plus a staging copy for updates.
 */
function floatWeightsItem(params: number, lora: LoraSpec | undefined, hostBaseCopy: boolean | undefined): PlanItem {
  const baseCopies = lora ? (hostBaseCopy ? 2 : 1) : 3;
  return {
    id: 'base',
    label: lora ? 'frozen base' : 'weights (trained in full)',
    bytes: params * 4 * baseCopies,
    detail: `${(params / 1e6).toFixed(1)}M float32 values × ${baseCopies} (${lora ? (baseCopies === 2 ? 'host copy and worker copy: a built-in model without a folder' : 'held once, in the ORT worker') : 'main thread, ORT worker, staging for updates'})`,
    key: lora ? 'model.quantize_base' : 'model.lora',
  };
}

/** What the trainable values bring: the LoRA adapters themselves, AdamW's moments, the gradients and the KL reference's copy. */
function trainableStateItems(trainable: number, lora: LoraSpec | undefined, klReference: boolean | undefined): PlanItem[] {
  const items: PlanItem[] = [];
  if (lora)
    items.push({
      id: 'adapters',
      label: 'LoRA adapters',
      bytes: trainable * 4 * 3,
      detail: `r${lora.rank} on ${lora.targets.length} module kind(s): ${(trainable / 1e6).toFixed(2)}M float32 × 3 (main thread, worker, staging)`,
      key: 'model.lora.rank',
    });
  items.push({
    id: 'optimizer',
    label: 'AdamW moments',
    bytes: trainable * 8,
    detail: `2 × ${(trainable / 1e6).toFixed(2)}M float32`,
    key: lora ? 'model.lora.rank' : 'model.lora',
  });
  items.push({
    id: 'gradients',
    label: 'gradients',
    bytes: trainable * 8,
    detail: "the step's gradients and their accumulation over micro-batches",
    key: lora ? 'model.lora.rank' : 'model.lora',
  });
  if (klReference)
    items.push({ id: 'reference', label: 'KL reference', bytes: trainable * 4, detail: 'a copy of the trainable weights', key: 'algorithm.kl_coef' });
  return items;
}

/** The PPO critic (GAE): a float32 transformer of the policy's size trained in full. */
function criticItem(params: number): PlanItem {
  const critic = params * 4 * 5; // host + worker + staging + AdamW's two moments
  return {
    id: 'critic',
    label: 'PPO critic',
    bytes: critic + params * 8,
    detail: 'a float32 transformer trained in full: 3 copies, AdamW, gradients',
    key: 'algorithm.adv_estimator',
  };
}

/** algorithm.distill's teacher: its frozen float32 weights twice and its scoring call's activations. */
function teacherItem(teacher: NonNullable<MemoryPlanInput['teacher']>): PlanItem {
  const tp = parameterCount(teacher.config);
  const act = scoreGraphBytes(teacher.config, { batch: teacher.score.batch, seq: teacher.score.seq }) * ORT_ARENA_FACTOR;
  return {
    id: 'teacher',
    label: 'distillation teacher',
    bytes: tp * 4 * 2 + act,
    detail: `${(tp / 1e6).toFixed(1)}M float32 values × 2 (main thread, ORT worker; never updated) + scoring ${scoredIn(teacher.score)} ${fmtBytes(act)}`,
    key: 'algorithm.distill.teacher',
  };
}

/** Decode weights: rollout.quantize's copy, or the baked float32 copy of 4M–200M models on the CPU (none otherwise). */
function decodeWeightsItems(input: MemoryPlanInput, params: number): PlanItem[] {
  const c = input.config;
  const shapes = weightShapes(c);
  if (input.rollout && input.rolloutQuantize && input.rolloutQuantize !== 'none') {
    const bits = BASE_QUANT_BITS[input.rolloutQuantize];
    let q = 0;
    for (const n of quantizedWeightNames(c)) q += quantizedBytes(shapes[n]![0]!, shapes[n]![1]!, bits);
    return [
      {
        id: 'decode_weights',
        label: 'quantized rollout copy',
        bytes: q * 2,
        detail: `${input.rolloutQuantize} codes and scales × 2 (main thread, decode session)`,
        key: 'rollout.quantize',
      },
    ];
  }
  if (!decodesOnCpu(input) || input.quantizeBase || params < 4e6 || params > 200e6) return [];
  const linear = sumShapes(shapes, (n) => /_proj\.weight$/.test(n) || n === (c.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight'));
  return [
    {
      id: 'decode_weights',
      label: 'baked decode weights',
      bytes: linear * 4,
      detail: 'the float32 decode session holds Wᵀ of the linear layers (models of 4M–200M parameters on the CPU)',
    },
  ];
}

/** The sessions' workspaces, which add up (ORT's arenas keep them): the train step's activations, the scoring call's, the rollouts' KV cache and decode step. */
function workspaceItems(input: MemoryPlanInput, qspec: BaseQuantSpec | undefined): PlanItem[] {
  const c = input.config;
  const lora = input.lora;
  const act = trainGraphBytes(c, {
    lora,
    loss: input.loss,
    recomputeLayers: input.recomputeLayers,
    headChunks: input.headChunks,
    quantizeBase: qspec,
    ...input.train,
  });
  const items: PlanItem[] = [
    {
      id: 'activations',
      label: 'train activations',
      bytes: act * ORT_ARENA_FACTOR,
      detail:
        `${input.train.batch} × ${input.train.seq} tokens, ${describeRecompute(c, input.recomputeLayers)}` +
        (qspec ? '; the backward pass dequantizes one base weight at a time' : ''),
      key: input.recomputeLayers === true || recomputedBlocks(c, input.recomputeLayers) === c.numLayers ? 'algorithm.micro_batches' : 'model.recompute_layers',
    },
  ];
  if (input.score)
    items.push({
      id: 'score',
      label: 'scoring activations',
      bytes: scoreGraphBytes(c, { lora, headChunks: input.headChunks, quantizeBase: qspec, batch: input.score.batch, seq: input.score.seq }) * ORT_ARENA_FACTOR,
      detail: `old/reference logprobs (forward only) of ${scoredIn(input.score)}`,
      key: 'algorithm.micro_batches',
    });
  if (input.rollout) {
    const { batch, maxLength } = input.rollout;
    const kv = batch * maxLength * c.numLayers * c.numKvHeads * c.headDim * 2 * 4;
    const step = decodeGraphBytes(c, { batch, past: maxLength - 1, lora }) * ORT_ARENA_FACTOR;
    items.push({
      id: 'kv_cache',
      label: 'rollout KV cache',
      bytes: kv + step,
      detail: `${batch} sequences × ${maxLength} tokens × ${c.numLayers} layers × ${c.numKvHeads} KV heads × ${c.headDim} × 2 × 4 B = ${fmtBytes(kv)}, + ${fmtBytes(step)} per decode step`,
      key: 'rollout.max_total_length',
    });
  }
  return items;
}

/** "a step's 8 sequences × 512 tokens in calls of 1", or "… at once" when one call takes them all. */
function scoredIn(s: { batch: number; seq: number; sequences?: number }): string {
  const n = s.sequences ?? s.batch;
  return `a step's ${n} sequences × ${s.seq} tokens ${n > s.batch ? `in calls of ${s.batch} (the update's micro-batch)` : 'at once'}`;
}

function describeRecompute(c: ModelConfig, r: boolean | number | undefined): string {
  const k = recomputedBlocks(c, r);
  return k === 0 ? 'no block recomputed' : k === c.numLayers ? 'every block recomputed' : `${k} of ${c.numLayers} blocks recomputed`;
}

/** What to change when a plan does not fit: a config key, what to set it to, and the plan's total after. */
export interface PlanAdvice {
  key: string;
  change: string;
  total: number;
}

/**
 * Changes that bring the plan under `available` bytes, cheapest first (each tried alone on the
 * input): recompute every block, more micro-batches, a quantized base, LoRA instead of full
 * fine-tuning, fewer rollout sequences, shorter rollouts. Empty when it fits, or when no single
 * change does (then the first of `tried` is the largest saving).
 */
export function adviseFit(
  input: MemoryPlanInput,
  available: number,
  microBatches = 1,
): { fits: boolean; advice: PlanAdvice[]; combination: PlanAdvice[]; tried: PlanAdvice[] } {
  const plan = memoryPlan(input);
  if (plan.total <= available) return { fits: true, advice: [], combination: [], tried: [] };
  const tries = candidateChanges(input, microBatches).map((t) => ({ ...t, total: memoryPlan(t.input).total }));
  const tried = tries.map(({ key, change, total }) => ({ key, change, total })).sort((a, b) => a.total - b.total);
  const advice: PlanAdvice[] = [];
  for (const t of tries) if (t.total <= available && !advice.some((a) => a.key === t.key)) advice.push({ key: t.key, change: t.change, total: t.total });
  // No single change fits: the greedy combination (each time the change that saves most), up to four keys.
  const combination: PlanAdvice[] = [];
  if (!advice.length) {
    let cur = { input, micro: microBatches, total: plan.total };
    for (let k = 0; k < 4 && cur.total > available; k++) {
      const next = (k === 0 ? tries : candidateChanges(cur.input, cur.micro).map((t) => ({ ...t, total: memoryPlan(t.input).total })))
        .filter((t) => !combination.some((c) => c.key === t.key))
        .sort((a, b) => a.total - b.total)[0];
      if (!next || next.total >= cur.total) break;
      combination.push({ key: next.key, change: next.change, total: next.total });
      cur = { input: next.input, micro: next.micro, total: next.total };
    }
    if (cur.total > available) combination.length = 0;
  }
  return { fits: false, advice, combination, tried };
}

/** The single changes adviseFit tries on a plan's input (`micro`: the micro-batches the input's train batch already is). */
function candidateChanges(input: MemoryPlanInput, micro: number): { key: string; change: string; input: MemoryPlanInput; micro: number }[] {
  const c = input.config;
  const tries: { key: string; change: string; input: MemoryPlanInput; micro: number }[] = [];
  if (recomputedBlocks(c, input.recomputeLayers) < c.numLayers)
    tries.push({ key: 'model.recompute_layers', change: 'true', input: { ...input, recomputeLayers: true }, micro });
  for (let m = 2; Math.ceil(input.train.batch / (m / 2)) > 1; m *= 2)
    tries.push({
      key: 'algorithm.micro_batches',
      change: String(micro * m),
      // The loop scores in pieces of the update's micro-batch: more micro-batches, smaller scoring calls.
      input: {
        ...input,
        train: { ...input.train, batch: Math.ceil(input.train.batch / m) },
        ...(input.score ? { score: { ...input.score, batch: Math.ceil(input.score.batch / m) } } : {}),
      },
      micro: micro * m,
    });
  if (input.lora && !input.quantizeBase) tries.push({ key: 'model.quantize_base', change: 'int4', input: { ...input, quantizeBase: 'int4' }, micro });
  if (!input.lora)
    tries.push({
      key: 'model.lora',
      change: '{ rank: 16 }',
      input: { ...input, lora: { rank: 16, alpha: 32, dropout: 0, targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] } },
      micro,
    });
  if (input.rollout || input.score) {
    // Fewer prompts per step: fewer sequences decoded, scored and trained on.
    const most = Math.max(input.rollout?.batch ?? 1, input.score?.sequences ?? input.score?.batch ?? 1);
    for (let f = 2; f / 2 < most; f *= 2) {
      const cut = <X extends { batch: number }>(x: X | undefined): X | undefined => (x ? { ...x, batch: Math.ceil(x.batch / f) } : undefined);
      const score = input.score && { ...cut(input.score)!, sequences: Math.ceil((input.score.sequences ?? input.score.batch) / f) };
      tries.push({
        key: 'rollout.prompts_per_step',
        change: `1/${f} of it`,
        input: { ...input, rollout: cut(input.rollout), score, train: cut(input.train)! },
        micro,
      });
    }
  }
  return tries;
}

const UNITS: Record<string, number> = {
  b: 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  t: 1e12,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};

/** "24GiB", "16 GB", "512MiB", "8e9" → bytes; an error naming `flag` otherwise. */
export function parseBytes(s: string, flag = '--memory'): number {
  const m = /^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*$/i.exec(s);
  const unit = m ? (m[2] || 'b').toLowerCase() : '';
  if (!m || !(unit in UNITS) || !(Number(m[1]) > 0)) throw new Error(`${flag}: '${s}' is not an amount of memory (e.g. 24GiB, 16GB, 512MiB)`);
  return Number(m[1]) * UNITS[unit]!;
}

/** Bytes for people: 1.23 GiB, 456 MiB. */
export function fmtBytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(0)} MiB`;
  return `${(n / 2 ** 10).toFixed(0)} KiB`;
}
