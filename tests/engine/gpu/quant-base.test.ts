/**
 * The 4-bit frozen base (model.quantize_base: int4) on WebGPU (SwiftShader; see ./harness.ts):
 * the codes and scales are persistent feeds uploaded to the device once (uint8 and float32 device
 * tensors) and read by MatMulNBits in every session. On the device the quantized model's scores,
 * LoRA step (loss, adapter gradients) and decode logits match its float32 twin holding the
 * dequantized weights (relative 1e-4; an untied head, so the embedding lookup reads codes too);
 * generate (what `arbor generate --device webgpu --quantize-base int4` runs; the CLI's device flag
 * is tests/engine/gpu/cli.test.ts) samples the CPU's ids; `arbor train` with device webgpu runs two
 * GRPO steps with the CPU's tokens and metrics within 1e-3 (same seed). One child process serves
 * the first two cases.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gpuEnv, relToMax, runCase, SKIP_REASON } from './harness';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';

interface Side {
  logprobs: number[];
  loss: number;
  grads: Record<string, number[]>;
  logits: number[][];
  onDevice: boolean;
}

const ROOT = join(__dirname, '..', '..', '..');
const bin = join(ROOT, 'bin', 'arbor.mjs');
const home = mkdtempSync(join(tmpdir(), 'arbor-gpu-qbase-'));
const arbor = (...args: string[]) =>
  spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', env: { ...gpuEnv!, ARBOR_HOME: home }, timeout: 600_000, maxBuffer: 64 * 2 ** 20 });
const lastJson = (s: string) => JSON.parse(s.trim().split('\n').pop()!) as Record<string, unknown>;

/** The child's results (one process for the model comparison and generate), computed once. */
let child: { webgpu: { quant: Side; twin: Side }; generate: { cpu: number[]; webgpu: number[]; quantization?: string; kvCacheBytes?: number } } | undefined;
const caseResult = () => (child ??= runCase<NonNullable<typeof child>>('quant-base.ts'));

describe.skipIf(!gpuEnv)(`the 4-bit base on WebGPU${gpuEnv ? '' : ` (${SKIP_REASON})`}`, () => {
  it(
    'score, a LoRA step and decoding equal the dequantized float32 twin on the device (rel 1e-4; the CPU: tests/engine/model/quantize-base.test.ts)',
    { timeout: 600_000 },
    () => {
      const { quant, twin } = caseResult().webgpu;
      expect(quant.onDevice).toBe(true);
      expect(twin.onDevice).toBe(true);
      expect(relToMax(quant.logprobs, twin.logprobs), 'logprobs').toBeLessThanOrEqual(1e-4);
      expect(Math.abs(quant.loss - twin.loss) / Math.abs(twin.loss), 'loss').toBeLessThanOrEqual(1e-4);
      let num = 0,
        den = 0;
      for (const [k, g] of Object.entries(twin.grads)) {
        const q = quant.grads[k]!;
        for (let i = 0; i < g.length; i++) {
          num = Math.max(num, Math.abs(q[i]! - g[i]!));
          den = Math.max(den, Math.abs(g[i]!));
        }
      }
      expect(den).toBeGreaterThan(0);
      expect(num / den, 'adapter gradients').toBeLessThanOrEqual(1e-4);
      twin.logits.forEach((l, i) => expect(relToMax(quant.logits[i]!, l), `logits ${i}`).toBeLessThanOrEqual(1e-4));
    },
  );

  it(
    "generate (arbor generate's function) on WebGPU with --quantize-base int4 samples the CPU's ids; the KV cache stays on the device",
    { timeout: 600_000 },
    () => {
      const g = caseResult().generate;
      expect(g.cpu.length).toBe(8);
      expect(g.webgpu).toEqual(g.cpu);
      expect(g.quantization).toBe('int4');
      expect(g.kvCacheBytes).toBe(0);
    },
  );

  it("arbor train, device webgpu, quantize_base int4, two GRPO steps: the CPU's tokens and metrics within 1e-3", { timeout: 600_000 }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-gpu-qbase-train-'));
    const train = (device: string) => {
      const cfg = join(dir, `train-${device}.yaml`);
      writeFileSync(
        cfg,
        [
          `name: gpu-qbase-${device}`,
          `device: ${device}`,
          'threads: 1',
          'seed: 3',
          'model: { init: tiny, lora: { rank: 4, alpha: 8 }, quantize_base: int4 }',
          'steps: 2',
          'rollout: { prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 8 }',
          'eval: { every: 0, n_questions: 2 }',
          'checkpoint: { every: 100, keep: 1 }',
          'logging: { full_trajectories_every: 1 }',
        ].join('\n'),
      );
      const r = arbor('train', cfg, '--json');
      expect(r.status, r.stderr).toBe(0);
      const run = lastJson(r.stdout).run as string;
      const store = new Store(openDatabase(join(home, 'arbor.db')));
      try {
        const trajs = store.searchTrajectories({ runId: run });
        const tokens = trajs
          .sort((a, b) => a.step - b.step || Number(a.id) - Number(b.id))
          .map((t) => store.getTrajectory(t.id).turnsData.flatMap((u) => Array.from(u.tokenIds ?? [])));
        const metrics: Record<string, (number | null)[]> = {};
        for (const name of store.metricKeys(run)) metrics[name] = store.metricSeries(run, name).value;
        return { tokens, metrics };
      } finally {
        store.db.close();
      }
    };
    const cpu = train('cpu');
    const gpu = train('webgpu');
    expect(cpu.tokens.length).toBe(8);
    expect(gpu.tokens).toEqual(cpu.tokens);
    const timing = /time|seconds|_s$|ms|per_s|tok\/s|tokens_per_second|memory|rss/i;
    // The sampler-against-learner logprob gap is the samplers' own numerics: the CPU decode session reads the 8-bit LM
    // head with int8 activations (its fast path), WebGPU in float32; each stays small, neither is the other's.
    const samplerGap = /logprob_mismatch/;
    for (const [k, v] of Object.entries(cpu.metrics)) {
      if (timing.test(k)) continue;
      if (samplerGap.test(k)) {
        for (const x of [...v, ...(gpu.metrics[k] ?? [])]) expect(Math.abs(x ?? 0), k).toBeLessThan(0.05);
        continue;
      }
      const g = gpu.metrics[k];
      expect(g, k).toBeDefined();
      for (let i = 0; i < v.length; i++) {
        const a = v[i] ?? null,
          b = g![i] ?? null;
        if (a === null || b === null) expect(b, `${k} step ${i + 1}`).toBe(a);
        else expect(Math.abs(b - a), `${k} step ${i + 1}`).toBeLessThanOrEqual(1e-3 * Math.max(1, Math.abs(a)));
      }
    }
  });
});
