/**
 * `npm run bench:gpu -- [--device webgpu|cuda|auto] [--shape tiny|qwen2.5-0.5b|qwen3-0.6b|llama3.2-1b]
 *   [--layers n] [--vocab n] [--batch 8] [--prefill 32] [--steps 16] [--train-length 64] [--lora] [--placement] [--device-only] [--json]`
 *
 * For a person with a GPU: the same model (random weights at the shape; --layers keeps only the
 * first n blocks) on the CPU and on the chosen device, side by side:
 *  - decode: a batch of --batch rows prefilled with --prefill tokens, then --steps single-token
 *    steps with in-graph sampling (the rollout engine's worker KV cache): tokens/s, and the bytes
 *    that cross host ↔ device per steady step (KV cache included or not), next to the design's
 *    figure for a cache that would cross (ARCHITECTURE §3: 2·L·Hkv·hd·S·B floats each way);
 *  - train: one training step (mean NLL, batch 2 × --train-length, gradients for every trainable
 *    weight: all, or the LoRA adapters with --lora): step time and bytes crossed (weights are
 *    uploaded once per version, so a LoRA step sends only the adapters);
 *  - peak RSS of the process (device memory is not reported by onnxruntime-node).
 * --placement: for the decode, score, train and LoRA-train graphs, the nodes ORT places on each
 * execution provider (its verbose "Node placements" log, from a child process per graph) and the
 * op types that fall back to the CPU.
 *
 * SwiftShader (VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json) runs this for
 * correctness and byte counts only: its times are a CPU emulation's, never a GPU figure.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { tinyConfig, parameterCount, type ModelConfig } from '../../engine/model/config';
import { PolicyModel } from '../../engine/model/runtime';
import { decodeInputSpecs, decodeProgram, scoreInputSpecs, scoreProgram, trainInputSpecs, trainProgram, type LossSpec } from '../../engine/model/graphs';
import { LORA_TARGETS, type LoraSpec } from '../../engine/model/lora';
import { randomTokenBatch } from '../../engine/model/lora-step';
import { policyDecodeBackend } from '../../engine/rollout/model-backend';
import type { WorkerKvBackend } from '../../engine/rollout/worker-kv';
import { renderTable } from '../../engine/cli/progress';
import { ort, resolveProviders } from '../../engine/tensor/ort';
import { webgpuInfo } from '../../engine/tensor/webgpu';
import { traceGraph } from '../../engine/tensor/graph';
import { withGradients } from '../../engine/tensor/autodiff';
import { toOnnx } from '../../engine/tensor/onnx';
import type { Ops } from '../../engine/tensor/ops';
import { SHAPES } from './shapes';

const int = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`expected a positive integer, got "${v}"`);
  return n;
};
const cli = new Command('bench:gpu')
  .option('--device <device>', 'the accelerator: webgpu, cuda or auto', 'webgpu')
  .option('--shape <shape>', `tiny or ${Object.keys(SHAPES).join(', ')}`, 'tiny')
  .option('--layers <n>', 'keep only the first n transformer blocks', int)
  .option('--vocab <n>', 'a smaller vocabulary at the same widths (the KV cache does not depend on it; the embedding and head shrink)', int)
  .option('--batch <n>', 'decode rows', int, 8)
  .option('--prefill <n>', 'prompt tokens per row', int, 32)
  .option('--steps <n>', 'steady decode steps timed', int, 16)
  .option('--train-length <n>', 'tokens per training sequence', int, 64)
  .option('--lora', 'train LoRA adapters (rank 16, all linear layers) instead of every weight')
  .option('--placement', 'count ORT node placements per graph (decode, score, train, LoRA train)')
  .option('--decode-only', 'skip the training step')
  .option('--device-only', 'measure on the device only (no CPU run beside it: the byte counts need only the device)')
  .option('--placement-only', 'only the placement table (no weights are uploaded: quick at any shape)')
  .option('--placement-child <graph>', '(internal) print the placement log of one graph')
  .option('--json', 'print the results as JSON')
  .parse();
const o = cli.opts<{
  device: string;
  shape: string;
  layers?: number;
  vocab?: number;
  batch: number;
  prefill: number;
  steps: number;
  trainLength: number;
  lora?: boolean;
  placement?: boolean;
  placementOnly?: boolean;
  decodeOnly?: boolean;
  deviceOnly?: boolean;
  placementChild?: string;
  json?: boolean;
}>();

function shapeConfig(): ModelConfig {
  const base =
    o.shape === 'tiny'
      ? tinyConfig({ vocabSize: 512, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, maxPositionEmbeddings: 1024, padTokenId: 0 })
      : SHAPES[o.shape];
  if (!base) throw new Error(`--shape: unknown shape "${o.shape}" (tiny, ${Object.keys(SHAPES).join(', ')})`);
  return { ...base, numLayers: o.layers ?? base.numLayers, vocabSize: o.vocab ?? base.vocabSize, padTokenId: base.padTokenId ?? 0 };
}
const LORA: LoraSpec = { rank: 16, alpha: 32, dropout: 0, targets: [...LORA_TARGETS] };

const nll: LossSpec = {
  key: 'nll',
  inputs: [],
  entropy: false,
  program: <T>(ops: Ops<T>, t: { logprobs: T; mask: T }) => ({ loss: ops.div(ops.neg(ops.sum(ops.mul(t.logprobs, t.mask), [0, 1])), ops.sum(t.mask, [0, 1])) }),
};

/** The placement log of one graph on the device (child process: ORT's verbose log goes to stderr). */
async function placementChild(graph: string): Promise<void> {
  const O = ort();
  const c = shapeConfig();
  const lora = graph === 'lora-train' ? LORA : undefined;
  const g =
    graph === 'decode'
      ? traceGraph(decodeInputSpecs(c), decodeProgram(c))
      : graph === 'score'
        ? traceGraph(scoreInputSpecs(c), scoreProgram(c, true))
        : (() => {
            const prog = trainProgram(c, nll, lora, undefined, false, !!lora);
            const gr = traceGraph(trainInputSpecs(c, nll, lora), prog);
            const wrt = gr.inputs.map((x) => x.spec.name).filter((n) => (lora ? n.includes('lora_') : n.endsWith('.weight') || n.endsWith('.bias')));
            return withGradients(gr, 'loss', wrt);
          })();
  O.env.logLevel = 'verbose';
  await O.InferenceSession.create(toOnnx(g, { webgpu: o.device === 'webgpu' }), {
    executionProviders: [o.device as 'webgpu'],
    logSeverityLevel: 0,
    graphOptimizationLevel: 'all',
  });
}

interface Placement {
  graph: string;
  byProvider: Record<string, number>;
  /** CPU-placed nodes by op type. */
  cpuOps: Record<string, number>;
}

function placements(): Placement[] {
  const out: Placement[] = [];
  for (const graph of ['decode', 'score', 'train', 'lora-train']) {
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        fileURLToPath(import.meta.url),
        '--placement-child',
        graph,
        '--shape',
        o.shape,
        '--device',
        o.device,
        ...(o.layers ? ['--layers', String(o.layers)] : []),
        ...(o.vocab ? ['--vocab', String(o.vocab)] : []),
      ],
      { encoding: 'utf8', maxBuffer: 512 * 2 ** 20, timeout: 1_800_000 },
    );
    const lines = (r.stderr ?? '').split('\n');
    const byProvider: Record<string, number> = {};
    const cpuOps: Record<string, number> = {};
    let current = '';
    for (const l of lines) {
      const p = /Node\(s\) placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(l);
      if (p) {
        current = p[1]!;
        byProvider[current] = Number(p[2]);
        continue;
      }
      const n = /VerifyEachNodeIsAssignedToAnEp\]\s{3}(\w+) \(/.exec(l);
      if (n && current === 'CPUExecutionProvider') cpuOps[n[1]!] = (cpuOps[n[1]!] ?? 0) + 1;
    }
    if (!Object.keys(byProvider).length)
      throw new Error(`placement of ${graph}: no "Node placements" in ORT's log (status ${r.status}):\n${r.stderr?.slice(-2000)}`);
    out.push({ graph, byProvider, cpuOps });
  }
  return out;
}

interface DeviceResult {
  device: string;
  providers: string[];
  decodeTokensPerS: number;
  /** Per steady decode step, bytes host → device / device → host, and of those the KV cache. */
  decodeToDevice: number;
  decodeToHost: number;
  decodeKvBytes: number;
  trainStepS: number;
  trainToDevice: number;
  trainToHost: number;
  peakRssMiB: number;
}

async function measure(device: string, providers: string[]): Promise<DeviceResult> {
  const c = shapeConfig();
  const m = PolicyModel.init(c, 1, { threads: undefined, providers, ...(o.lora ? { lora: LORA, loraSeed: 1 } : {}) });
  const B = o.batch;
  const backend = policyDecodeBackend(m, { maxBatch: B, maxLength: o.prefill + o.steps + 8, shards: 1 }) as WorkerKvBackend;
  const greedy = (n: number) => ({ u: new Float32Array(n), invTemp: new Float32Array(n).fill(1), greedy: new Float32Array(n).fill(1) });
  const V = c.vocabSize;
  const prompt = (b: number) => Array.from({ length: o.prefill }, (_, i) => (b * 7919 + i * 104729) % V);
  let last = (
    await backend.extendSample(
      Array.from({ length: B }, (_, b) => ({ slot: b, tokens: prompt(b) })),
      greedy(B),
    )
  ).map((x) => x.id);
  last = (
    await backend.extendSample(
      last.map((id, b) => ({ slot: b, tokens: [id] })),
      greedy(B),
    )
  ).map((x) => x.id); // warm steady step
  const c0 = { ...backend.crossing };
  const t0 = performance.now();
  for (let s = 0; s < o.steps; s++)
    last = (
      await backend.extendSample(
        last.map((id, b) => ({ slot: b, tokens: [id] })),
        greedy(B),
      )
    ).map((x) => x.id);
  const decodeS = (performance.now() - t0) / 1000;
  const c1 = backend.crossing;
  await backend.close();
  let trainS = NaN;
  let s0 = await m.runnerStats('train');
  let s1 = s0;
  if (!o.decodeOnly) {
    const batch = randomTokenBatch(V, 2, o.trainLength, 3);
    await m.trainStep(batch, nll, batch.valid); // warm: session creation, weights uploaded
    s0 = await m.runnerStats('train');
    const t1 = performance.now();
    await m.trainStep(batch, nll, batch.valid);
    trainS = (performance.now() - t1) / 1000;
    s1 = await m.runnerStats('train');
  }
  await m.dispose();
  return {
    device,
    providers,
    decodeTokensPerS: (B * o.steps) / decodeS,
    decodeToDevice: (c1.toDevice - c0.toDevice) / o.steps,
    decodeToHost: (c1.toHost - c0.toHost) / o.steps,
    decodeKvBytes: (c1.kvToDevice - c0.kvToDevice + c1.kvToHost - c0.kvToHost) / o.steps,
    trainStepS: trainS,
    trainToDevice: s1.toDeviceBytes - s0.toDeviceBytes,
    trainToHost: s1.toHostBytes - s0.toHostBytes,
    peakRssMiB: process.resourceUsage().maxRSS / 1024,
  };
}

const fmtBytes = (b: number) => (b >= 2 ** 20 ? `${(b / 2 ** 20).toFixed(2)} MiB` : b >= 1024 ? `${(b / 1024).toFixed(1)} KiB` : `${Math.round(b)} B`);

async function main(): Promise<void> {
  if (o.placementChild) return placementChild(o.placementChild);
  const c = shapeConfig();
  const providers = await resolveProviders(o.device);
  const w = providers[0] === 'webgpu' ? await webgpuInfo() : undefined;
  const results = o.placementOnly ? [] : [...(o.deviceOnly ? [] : [await measure('cpu', ['cpu'])]), await measure(o.device, providers)];
  // The design's figure for a KV cache that crosses each step (CUDA EP in Node; ARCHITECTURE §3): in and out.
  const S = o.prefill + 1 + o.steps / 2;
  const kvCrossingDesign = 2 * 2 * c.numLayers * c.numKvHeads * c.headDim * S * o.batch * 4;
  const placement = o.placement || o.placementOnly ? placements() : undefined;
  const report = {
    shape: o.shape,
    layers: c.numLayers,
    vocab: c.vocabSize,
    parameters: parameterCount(c),
    adapter: w?.adapter ?? null,
    software: w?.adapter?.software ?? false,
    batch: o.batch,
    designKvBytesPerStep: kvCrossingDesign,
    results,
    placement,
  };
  if (o.json) return void console.log(JSON.stringify(report));
  if (w?.adapter)
    console.log(
      `WebGPU adapter: ${w.adapter.name} (${w.adapter.vendor}, ${w.adapter.software ? 'software: times are an emulation, not a GPU figure' : 'hardware'})`,
    );
  if (results.length)
    console.log(
      renderTable(
        [
          'device',
          'decode tok/s',
          'per step → device',
          'per step → host',
          'of which KV',
          'design KV if it crossed',
          'train step s',
          'train → device',
          'train → host',
          'peak RSS MiB',
        ],
        results.map((r) => [
          r.device,
          r.decodeTokensPerS.toFixed(1),
          fmtBytes(r.decodeToDevice),
          fmtBytes(r.decodeToHost),
          fmtBytes(r.decodeKvBytes),
          fmtBytes(kvCrossingDesign),
          r.trainStepS.toFixed(3),
          fmtBytes(r.trainToDevice),
          fmtBytes(r.trainToHost),
          r.peakRssMiB.toFixed(0),
        ]),
      ),
    );
  if (results.length) console.log('(device memory: not reported by onnxruntime-node; on the CPU nothing crosses, so its byte columns are 0)');
  if (placement)
    console.log(
      renderTable(
        ['graph', 'nodes per provider', 'CPU fallbacks by op'],
        placement.map((p) => [
          p.graph,
          Object.entries(p.byProvider)
            .map(([k, v]) => `${k.replace('ExecutionProvider', '')} ${v}`)
            .join(', '),
          Object.entries(p.cpuOps)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ') || '-',
        ]),
      ),
    );
}

await main();
