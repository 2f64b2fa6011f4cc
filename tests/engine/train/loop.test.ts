import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { advantagePort } from '../../../engine/train/advantage';
import { latestCheckpoint } from '../../../engine/train/checkpoints';
import { validateConfig, type ExperimentInput } from '../../../engine/config/experiment';
import { learningRate, runTrainingLoop } from '../../../engine/train/loop';
import { JsonlSink, readMetricsJsonl } from '../../../engine/run/sinks';
import { TabularPolicy } from './tabular';

function setup(over: Partial<ExperimentInput> = {}) {
  const cfg = validateConfig({
    model: { init: 'tiny' },
    steps: 30,
    seed: 11,
    rollout: { prompts_per_step: 4, n: 8 },
    algorithm: { ppo_epochs: 2, mini_batches: 2, micro_batches: 2 },
    optim: { lr: 0.1, warmup_steps: 0 },
    checkpoint: { every: 10, keep: 1 },
    ...over,
  });
  const policy = new TabularPolicy({ prompts: 4, length: 3, vocab: 6, seed: 5 }, cfg);
  const runDir = mkdtempSync(join(tmpdir(), 'arbor-loop-'));
  const sink = new JsonlSink(runDir);
  return { cfg, policy, runDir, sink, ports: { rollout: policy, policy, advantage: advantagePort(cfg), sink } };
}

describe('training loop (GRPO on the tabular task)', () => {
  it('raises mean reward and exact match', async () => {
    const { cfg, ports, runDir } = setup();
    await runTrainingLoop(cfg, ports, { runDir });
    const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
    expect(rows.map((r) => r.step)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    const mean = (rs: typeof rows, k: string) => rs.reduce((a, r) => a + r.values[k]!, 0) / rs.length;
    const early = mean(rows.slice(0, 3), 'reward/mean');
    const late = mean(rows.slice(-3), 'reward/mean');
    expect(early).toBeLessThan(0.4); // 1/6 chance per position at init
    expect(late).toBeGreaterThan(early + 0.4);
    expect(mean(rows.slice(-3), 'exact_match')).toBeGreaterThan(0.5);
    // Old logprobs recomputed before the update match what the sampler saw (same weights).
    expect(rows[0]!.values['rollout/logprob_mismatch']).toBeLessThan(1e-5);
    for (const k of ['actor/grad_norm', 'actor/clip_fraction', 'entropy', 'optim/lr', 'time/rollout_s', 'perf/tokens_per_s'])
      expect(Number.isFinite(rows[5]!.values[k])).toBe(true);
    // With 2 epochs the second pass sees a changed policy, so some tokens clip at lr 0.1.
    expect(Math.max(...rows.map((r) => r.values['actor/clip_fraction']!))).toBeGreaterThan(0);
  });

  it('gives the same first-step metrics for the same config and seed, different ones for another seed', async () => {
    const pick = (v: Record<string, number>) => Object.fromEntries(Object.entries(v).filter(([k]) => !k.startsWith('time/') && !k.startsWith('perf/')));
    const first = async (seed: number) => {
      const s = setup({ steps: 1, seed });
      await runTrainingLoop(s.cfg, s.ports, { runDir: s.runDir });
      return pick(readMetricsJsonl(join(s.runDir, 'metrics.jsonl'))[0]!.values);
    };
    const a = await first(3);
    expect(await first(3)).toEqual(a);
    expect(await first(4)).not.toEqual(a);
  });

  it('stops cleanly on abort after saving a checkpoint, and resumes at the next step', async () => {
    const { cfg, ports, runDir } = setup({ steps: 8 });
    const ac = new AbortController();
    const r1 = await runTrainingLoop(cfg, ports, { runDir, signal: ac.signal, onStep: (s) => s === 3 && ac.abort() });
    expect(r1.stopped).toBe(true);
    expect(latestCheckpoint(runDir)?.step).toBe(3);
    const r2 = await runTrainingLoop(cfg, ports, { runDir, resume: true });
    expect(r2.firstStep).toBe(4);
    expect(readMetricsJsonl(join(runDir, 'metrics.jsonl')).map((r) => r.step)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('dynamic sampling drops groups whose rewards are all equal', async () => {
    const { cfg, ports, runDir } = setup({
      steps: 25,
      algorithm: { ppo_epochs: 2, mini_batches: 2, micro_batches: 2, dynamic_sampling: { enabled: true, max_rounds: 2 } },
    });
    await runTrainingLoop(cfg, ports, { runDir });
    const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
    // Late in training many groups are solved (all reward 1): they are dropped and refilled.
    expect(rows.some((r) => r.values['dynamic_sampling/dropped_groups']! > 0)).toBe(true);
  });

  it('dynamic sampling with gen_prompts samples that many prompts per round and trains on at most prompts_per_step groups', async () => {
    const { cfg, ports, policy, runDir } = setup({
      steps: 20,
      algorithm: { dynamic_sampling: { enabled: true, max_rounds: 2, gen_prompts: 7 } },
    });
    const asked: number[] = [];
    const trained: number[] = [];
    const sample = policy.sample.bind(policy);
    const update = policy.update.bind(policy);
    const rollout = { sample: (a: Parameters<typeof sample>[0]) => (asked.push(a.prompts), sample(a)) };
    const spy = Object.assign(Object.create(policy) as typeof policy, {
      update: (a: Parameters<typeof update>[0]) => {
        trained.push(new Set(a.microBatches.flat().map((e) => e.group)).size);
        return update(a);
      },
    });
    await runTrainingLoop(cfg, { ...ports, rollout, policy: spy }, { runDir });
    expect(asked.length).toBeGreaterThanOrEqual(20);
    expect(asked.every((p) => p === 7)).toBe(true);
    // mini_batches 2: each update sees half the kept groups, and a step keeps at most 4.
    expect(Math.max(...trained)).toBeLessThanOrEqual(4);
    const rows = readMetricsJsonl(join(runDir, 'metrics.jsonl'));
    expect(rows).toHaveLength(20);
  });

  it('refuses gen_prompts below prompts_per_step, and gen_prompts with dynamic sampling off', () => {
    expect(() => setup({ algorithm: { dynamic_sampling: { enabled: true, gen_prompts: 3 } } })).toThrow(/gen_prompts.*prompts_per_step/s);
    expect(() => setup({ algorithm: { dynamic_sampling: { enabled: false, gen_prompts: 8 } } })).toThrow(/gen_prompts/);
  });

  describe('overlong shaping (DAPO soft penalty) against the response budget', () => {
    // Tabular episodes: 1 prompt token, then 3 model tokens, never truncated.
    const firstStep = async (rollout: Record<string, number>, buffer: number) => {
      const { cfg, ports, runDir } = setup({
        steps: 1,
        rollout: { prompts_per_step: 4, n: 8, ...rollout },
        algorithm: { overlong: { enabled: true, buffer, penalty: 1 } },
      });
      await runTrainingLoop(cfg, ports, { runDir });
      const v = readMetricsJsonl(join(runDir, 'metrics.jsonl'))[0]!.values;
      return { penalty: v['reward/overlong_penalty_mean']!, shift: v['reward/shaped_mean']! - v['reward/mean']! };
    };

    it('fires when the model tokens reach into the buffer before max_turns × max_new_tokens', async () => {
      // budget min(1 × 4, 384 − 1) = 4; buffer 2 → penalty from 2 tokens on: −(3 − 2)/2.
      const r = await firstStep({ max_turns: 1, max_new_tokens: 4 }, 2);
      expect(r.penalty).toBeCloseTo(-0.5, 12);
      expect(r.shift).toBeCloseTo(-0.5, 12);
    });

    it('fires against max_total_length minus the prompt when that is the tighter limit', async () => {
      // budget min(2 × 4, 5 − 1) = 4 (max_total_length 5 alone would give −(3 − 3)/2 = 0).
      const r = await firstStep({ max_turns: 2, max_new_tokens: 4, max_total_length: 5 }, 2);
      expect(r.penalty).toBeCloseTo(-0.5, 12);
    });

    it('does not fire when the responses stay below budget − buffer', async () => {
      // budget min(1 × 5, 383) = 5; buffer 2 → no penalty up to 3 tokens.
      const r = await firstStep({ max_turns: 1, max_new_tokens: 5 }, 2);
      expect(r.penalty).toBe(0);
      expect(r.shift).toBeCloseTo(0, 12);
    });
  });

  describe('learning-rate schedule', () => {
    const optim = (o: Record<string, unknown>) => validateConfig({ model: { init: 'tiny' }, optim: o }).optim;

    it('warms up linearly, then decays by cosine to min_lr_ratio · lr at the last step (hand-computed)', () => {
      const o = optim({ lr: 1, warmup_steps: 4, schedule: 'cosine', min_lr_ratio: 0.1 });
      const at = (step: number) => learningRate(o, step, 14);
      expect(at(1)).toBeCloseTo(0.25, 12);
      expect(at(2)).toBeCloseTo(0.5, 12);
      expect(at(4)).toBeCloseTo(1, 12);
      // After warm-up, progress p = (step − 4) / (14 − 4); lr = 0.1 + 0.45 · (1 + cos πp).
      expect(at(5)).toBeCloseTo(0.1 + 0.45 * (1 + 0.9510565162951535), 12); // p = 0.1, cos 18°
      expect(at(9)).toBeCloseTo(0.55, 12); // p = 0.5
      expect(at(14)).toBeCloseTo(0.1, 12); // p = 1
      expect(at(20)).toBeCloseTo(0.1, 12); // past the end: stays at the floor
      // No warm-up, floor 0: lr = 1 + cos(π · step / 4) for lr 2.
      const z = optim({ lr: 2, warmup_steps: 0, schedule: 'cosine', min_lr_ratio: 0 });
      expect(learningRate(z, 1, 4)).toBeCloseTo(1 + Math.SQRT1_2, 12);
      expect(learningRate(z, 2, 4)).toBeCloseTo(1, 12);
      expect(learningRate(z, 4, 4)).toBeCloseTo(0, 12);
    });

    it('constant: the warm-up ramp, then lr for every later step', () => {
      const o = optim({ lr: 0.5, warmup_steps: 2, schedule: 'constant' });
      expect([1, 2, 3, 10, 1000].map((s) => learningRate(o, s, 10))).toEqual([0.25, 0.5, 0.5, 0.5, 0.5]);
    });

    it('the loop updates with (and logs as optim/lr) the scheduled rate of each step', async () => {
      const { cfg, ports, runDir } = setup({ steps: 4, optim: { lr: 0.1, warmup_steps: 2, schedule: 'cosine', min_lr_ratio: 0.1 } });
      const seen: number[] = [];
      const update = ports.policy.update.bind(ports.policy);
      ports.policy.update = (args) => (seen.push(args.lr), update(args));
      await runTrainingLoop(cfg, ports, { runDir });
      const logged = readMetricsJsonl(join(runDir, 'metrics.jsonl')).map((r) => r.values['optim/lr']!);
      const expected = [0.05, 0.1, 0.055, 0.01]; // step 3: 0.01 + 0.045 · (1 + cos π/2)
      logged.forEach((x, i) => expect(x).toBeCloseTo(expected[i]!, 12));
      // 2 PPO epochs × 2 mini-batches: four updates per step, all at that step's rate.
      expect(seen.length).toBe(16);
      seen.forEach((x, i) => expect(x).toBeCloseTo(expected[Math.floor(i / 4)]!, 12));
    });
  });
});
