/**
 * WebGPU against the CPU, same model program (SwiftShader; see ./harness.ts): per-token logprobs
 * and entropies (score), loss and every gradient (a training step), for the tiny model in full and
 * LoRA (LoRA at temperature 0.7, the RL update's tempered head), and the parity fixtures with YaRN rope scaling, sharded safetensors and Qwen3 in BF16.
 */
import { describe, expect, it } from 'vitest';
import { gpuEnv, relToMax, runCase, SKIP_REASON } from './harness';

interface Side {
  logprobs: number[];
  entropy: number[];
  loss: number;
  metrics: Record<string, number>;
  grads: Record<string, number[]>;
}

/** ||a - b|| / ||b||. */
function relNorm(a: number[], b: number[]): number {
  let n = 0,
    d = 0;
  for (let i = 0; i < b.length; i++) {
    n += (a[i]! - b[i]!) ** 2;
    d += b[i]! ** 2;
  }
  return Math.sqrt(n) / Math.max(Math.sqrt(d), 1e-12);
}

describe.skipIf(!gpuEnv)(`WebGPU numerics match the CPU${gpuEnv ? '' : ` (${SKIP_REASON})`}`, () => {
  let res: Record<string, { cpu: Side; webgpu: Side }>;
  it('runs score and a training step on both devices', { timeout: 900_000 }, () => {
    res = runCase('numerics.ts');
    expect(Object.keys(res)).toEqual(['tiny', 'tiny LoRA', 'qwen2-yarn-f32', 'llama-sharded-f32', 'qwen3-bf16']);
  });
  // The fixtures' random weights are larger than the tiny model's, and SwiftShader's sin/cos (the
  // rotary angles, computed in the graph) are accurate to ~1.9e-4 absolute (measured; Vulkan
  // allows 2^-11): their logprobs agree to ~1.5e-4 and gradients to ~2e-3 of the largest value,
  // the tiny model's to 1e-7 and 3e-4. The bounds below are the design's where the rope error
  // does not dominate, and the measured error with a margin where it does (docs/BENCHMARKS.md).
  const bounds: Record<string, { lp: number; grad: number }> = {
    tiny: { lp: 1e-4, grad: 1e-3 },
    'tiny LoRA': { lp: 1e-4, grad: 1e-3 },
    'qwen2-yarn-f32': { lp: 5e-4, grad: 5e-3 },
    'llama-sharded-f32': { lp: 5e-4, grad: 5e-3 },
    'qwen3-bf16': { lp: 1e-4, grad: 1e-3 },
  };
  for (const [name, b] of Object.entries(bounds))
    it(`${name}: logprobs, entropy, loss and every gradient`, () => {
      const { cpu, webgpu } = res[name]!;
      expect(webgpu.logprobs.length).toBe(cpu.logprobs.length);
      expect(relNorm(webgpu.logprobs, cpu.logprobs)).toBeLessThan(b.lp);
      expect(relNorm(webgpu.entropy, cpu.entropy)).toBeLessThan(b.lp);
      expect(Math.abs(webgpu.loss - cpu.loss) / Math.abs(cpu.loss)).toBeLessThan(1e-4);
      for (const [k, v] of Object.entries(cpu.metrics)) expect(Math.abs(webgpu.metrics[k]! - v) / Math.max(Math.abs(v), 1e-6), k).toBeLessThan(1e-4);
      expect(Object.keys(webgpu.grads).sort()).toEqual(Object.keys(cpu.grads).sort());
      for (const [k, g] of Object.entries(cpu.grads)) expect(relToMax(webgpu.grads[k]!, g), k).toBeLessThan(b.grad);
    });
});
