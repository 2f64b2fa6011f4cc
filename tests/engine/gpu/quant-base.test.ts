/**
 * The 4-bit frozen base (model.quantize_base: int4) on WebGPU (SwiftShader; see ./harness.ts):
 * the codes and scales are persistent feeds uploaded to the device once (uint8 and float32 device
 * tensors) and read by MatMulNBits in every session. On each device the quantized model's scores,
 * LoRA step (loss, adapter gradients) and decode logits match its float32 twin holding the
 * dequantized weights on the same device (relative 1e-4); `arbor generate --device webgpu
 * --quantize-base int4` samples the CPU's ids; `arbor train` with device webgpu runs two GRPO
 * steps with the CPU's tokens and metrics within 1e-3 (same seed).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gpuEnv, relToMax, runCase, SKIP_REASON } from './harness';
import { generate } from '../../../engine/cli/commands/generate';
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
const TINY = join(ROOT, 'tests', 'engine', 'model', 'fixtures', 'multihop-tiny-sft');

describe.skipIf(!gpuEnv)(`the 4-bit base on WebGPU${gpuEnv ? '' : ` (${SKIP_REASON})`}`, () => {
  it('score, a LoRA step and decoding equal the dequantized float32 twin on each device (rel 1e-4)', { timeout: 600_000 }, () => {
    const res = runCase<Record<'cpu' | 'webgpu', { quant: Side; twin: Side }>>('quant-base.ts');
    for (const dev of ['cpu', 'webgpu'] as const) {
      const { quant, twin } = res[dev];
      expect(quant.onDevice).toBe(dev === 'webgpu');
      expect(relToMax(quant.logprobs, twin.logprobs), `${dev} logprobs`).toBeLessThanOrEqual(1e-4);
      expect(Math.abs(quant.loss - twin.loss) / Math.abs(twin.loss), `${dev} loss`).toBeLessThanOrEqual(1e-4);
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
      expect(num / den, `${dev} adapter gradients`).toBeLessThanOrEqual(1e-4);
      twin.logits.forEach((l, i) => expect(relToMax(quant.logits[i]!, l), `${dev} logits ${i}`).toBeLessThanOrEqual(1e-4));
    }
  });

  it("arbor generate --device webgpu --quantize-base int4 samples the CPU's ids", { timeout: 300_000 }, async () => {
    const prompt = 'who directed the film';
    const args = { prompt, maxNew: 8, threads: 1, seed: 7, temperature: 1, topK: 0, quantizeBase: 'int4' as const };
    const cpu = await generate(TINY, args);
    const r = arbor(
      'generate',
      TINY,
      '--prompt',
      prompt,
      '--json',
      '--max-new',
      '8',
      '--threads',
      '1',
      '--seed',
      '7',
      '--temperature',
      '1',
      '--top-k',
      '0',
      '--quantize-base',
      'int4',
      '--device',
      'webgpu',
    );
    expect(r.status, r.stderr).toBe(0);
    const gpu = lastJson(r.stdout) as { generatedIds: number[]; quantization?: { mode: string }; deviceBytes?: { kvCache: number } };
    expect(cpu.generatedIds.length).toBe(8);
    expect(gpu.generatedIds).toEqual(cpu.generatedIds);
    expect(gpu.quantization?.mode).toBe('int4');
    expect(gpu.deviceBytes!.kvCache).toBe(0);
  });

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
    for (const [k, v] of Object.entries(cpu.metrics)) {
      if (timing.test(k)) continue;
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
