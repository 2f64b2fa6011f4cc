import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { advantagePort } from '../../../engine/train/advantage';
import { validateConfig } from '../../../engine/train/config';
import { runExperiment } from '../../../engine/train/experiment';
import type { TaskSession } from '../../../engine/train/run';
import { JsonlSink, readMetricsJsonl } from '../../../engine/train/sinks';
import { TabularPolicy } from '../../../engine/train/tabular';

function session(policy: TabularPolicy, cfg: ReturnType<typeof validateConfig>): TaskSession {
  const evaluate = async (n: number) => {
    const eps = await policy.sample({ step: 0, seed: 12345, prompts: n, n: 1 });
    const em = eps.filter((e) => e.exactMatch).length / eps.length;
    return { n, exactMatch: em, exactMatchByHops: { 1: em }, formatRate: 1, toolCallsPerEpisode: 0, toolErrorsPerEpisode: 0 };
  };
  return {
    ports: { rollout: policy, policy, advantage: advantagePort(cfg) },
    sft: policy,
    demos: async () => policy.demos(120, 0.2, 3),
    evaluate,
    loadPolicy: (dir) => policy.load(dir),
    close: async () => {},
  };
}

describe('experiment job (SFT warm start, then RL)', () => {
  it('runs SFT then RL in one run folder; on resume SFT is not repeated and RL continues', async () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      steps: 6,
      rollout: { prompts_per_step: 4, n: 4 },
      sft: { warm_start: true, epochs: 2, lr: 0.05, batch_size: 16 },
      optim: { lr: 0.05 },
      checkpoint: { every: 3, keep: 2 },
      eval: { every: 0, n_questions: 16 },
    });
    const runDir = mkdtempSync(join(tmpdir(), 'arbor-exp-'));
    const mk = () => new TabularPolicy({ prompts: 4, length: 3, vocab: 5, seed: 1 }, cfg);
    const ac = new AbortController();
    const phases: string[] = [];
    const r1 = await runExperiment(cfg, {
      runDir, session: session(mk(), cfg), sink: new JsonlSink(runDir), signal: ac.signal,
      onPhase: (p) => phases.push(p),
      onStep: (p, s) => p === 'rl' && s === 4 && ac.abort(),
    });
    expect(phases).toEqual(['sft', 'rl']);
    expect(r1.sft!.steps).toBe(2 * Math.ceil(120 / 16));
    expect(existsSync(join(runDir, 'sft', 'checkpoints'))).toBe(true);
    expect(r1.rl!.stopped).toBe(true);
    expect(r1.rl!.lastCheckpoint!.step).toBe(4);

    const r2 = await runExperiment(cfg, { runDir, session: session(mk(), cfg), sink: new JsonlSink(runDir), resume: true });
    expect(r2.sft).toBeUndefined(); // an RL checkpoint exists: SFT is neither repeated nor reloaded
    expect(r2.rl!.firstStep).toBe(5);
    expect(r2.eval!.exact_match).toBeGreaterThanOrEqual(0);
    expect(readMetricsJsonl(join(runDir, 'metrics.jsonl')).map((r) => r.step)).toEqual([1, 2, 3, 4, 5, 6]);
  });
});
