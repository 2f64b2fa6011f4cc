/**
 * Rollouts on WebGPU with the KV cache resident on the device (SwiftShader; see ./harness.ts):
 * the same tokens as on the CPU for fixed seeds (tool observations between turns, in-graph sampling, top-k/top-p from
 * device logits, one or several decode steps per call), logprobs within float tolerance, an
 * ARPO-style fork of a device cache, and no KV cache crossing on steady decode steps.
 */
import { describe, expect, it } from 'vitest';
import { gpuEnv, runCase, SKIP_REASON } from './harness';
import type { KvCrossing } from '../../../engine/rollout/worker-kv';

interface Case {
  tokens?: number[][];
  logprobs: number[][];
  entropy?: number[][];
  observations?: number[];
  before?: number[];
  after?: number[][];
  crossing: KvCrossing;
}

describe.skipIf(!gpuEnv)(`WebGPU rollouts match the CPU${gpuEnv ? '' : ` (${SKIP_REASON})`}`, () => {
  let res: { cpu: Record<string, Case>; gpu: Record<string, Case> };
  it('runs the rollouts on both devices', { timeout: 600_000 }, () => {
    res = runCase('rollout.ts');
    expect(Object.keys(res.gpu)).toEqual(['T=1.3', 'greedy, 1 step per call', 'T=0.7 top-k 6 top-p 0.9', 'fork']);
  });
  for (const name of ['T=1.3', 'greedy, 1 step per call', 'T=0.7 top-k 6 top-p 0.9', 'fork'])
    it(`${name}: same tokens, logprobs within 1e-5, the cache stays on the device between steady steps`, () => {
      const c = res.cpu[name]!,
        g = res.gpu[name]!;
      if (name === 'fork') {
        expect(g.before).toEqual(c.before);
        expect(g.after).toEqual(c.after);
      } else {
        expect(g.tokens).toEqual(c.tokens);
        expect(g.observations).toEqual(c.observations);
        expect(c.observations!.every((n) => n > 0)).toBe(true);
      }
      const a = g.logprobs.flat(),
        b = c.logprobs.flat();
      expect(a.length).toBe(b.length);
      for (let i = 0; i < b.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThan(1e-5);
      // On the CPU nothing crosses; on the device most runs are steady (present fed back as past).
      expect(c.crossing.toDevice + c.crossing.toHost).toBe(0);
      expect(g.crossing.steadyRuns).toBeGreaterThan(0);
      expect(g.crossing.runs).toBe(c.crossing.runs);
    });
});
