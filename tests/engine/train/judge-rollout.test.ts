/**
 * environment.judge in the training loop (engine/train/judge-rollout.ts): GRPO steps on the
 * tabular task whose groups a mock OpenAI-compatible judge scores, in both modes, with the
 * workspace store as the sink: rewards from the judge, judge/* metrics stored, the judge's audit
 * (prompt, raw answer, score, rank) stored with the trajectories, failed groups stored and left
 * out of the update (named), and rank mode seeing whole groups under dynamic sampling.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { keysOutsideScope, validateConfig, type ExperimentInput } from '../../../engine/config/experiment';
import { Judge, type JudgeCall, type JudgeRecord } from '../../../engine/env/judge';
import { storeSink } from '../../../engine/run/store-sink';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import { advantagePort } from '../../../engine/train/advantage';
import { judgedRolloutPort, judgeOptions, withJudge } from '../../../engine/train/judge-rollout';
import { runTrainingLoop } from '../../../engine/train/loop';
import { TabularPolicy } from './tabular';
import { contentScore, MockJudge } from '../env/judge-mock';

let mock: MockJudge;
beforeEach(async () => {
  mock = new MockJudge();
  await mock.start();
});
afterEach(async () => mock.close());

const VOCAB = 3;
/** Token 0 reads "good": the mock judge's score is the share of good words in the model's turn. */
const decode = (ids: number[]) => ids.map((i) => (i === 0 ? 'good' : i >= VOCAB ? `prompt${i - VOCAB}` : `w${i}`)).join(' ');

function setup(judge: Record<string, unknown>, over: Partial<ExperimentInput> = {}) {
  const cfg = validateConfig({
    model: { init: 'tiny' },
    steps: 2,
    seed: 3,
    rollout: { prompts_per_step: 3, n: 4 },
    algorithm: { ppo_epochs: 1, mini_batches: 1, micro_batches: 1 },
    optim: { lr: 0.1, warmup_steps: 0 },
    checkpoint: { every: 10, keep: 1 },
    environment: { judge: { base_url: mock.url, model: 'mock', rubric: 'Good words are good.', retries: 1, ...judge } },
    ...over,
  });
  const policy = new TabularPolicy({ prompts: 4, length: 4, vocab: VOCAB, seed: 5 }, cfg);
  const runDir = mkdtempSync(join(tmpdir(), 'arbor-judge-'));
  const store = new Store(openDatabase(join(runDir, 'arbor.db')));
  const runId = store.createRun({ name: 'judge' });
  const sink = storeSink(store, runId, { decode });
  const j = cfg.environment.judge!;
  const judgeObj = new Judge({ ...judgeOptions(j), backoffMs: () => 0 });
  const rollout = judgedRolloutPort(policy, judgeObj, { decode, mix: j.mix, references: j.references });
  return { cfg, policy, runDir, store, runId, ports: { rollout, policy, advantage: advantagePort(cfg), sink } };
}

const judgeOf = (t: { outcomeData: unknown }) => (t.outcomeData as { judge?: JudgeRecord }).judge;

describe('judge in GRPO training (mock OpenAI-compatible judge)', () => {
  it('rank mode: each group in one request; rewards, ranks, the audit and judge/* metrics stored', async () => {
    const { cfg, ports, runDir, store, runId } = setup({ mode: 'rank', price: { input_per_mtok: 1, output_per_mtok: 2 } });
    await runTrainingLoop(cfg, ports, { runDir });
    // One request per group and step (a group whose samples are all alike is one trajectory shown).
    expect(mock.requests.length).toBe(6);
    for (const k of [
      'judge/requests',
      'judge/calls',
      'judge/tokens',
      'judge/seconds',
      'judge/cost',
      'judge/failures',
      'judge/dropped_groups',
      'judge/score_mean',
    ])
      expect(store.metricSeries(runId, k).step, k).toEqual([1, 2]);
    expect(store.metricSeries(runId, 'judge/calls').value).toEqual([3, 3]);
    expect(store.metricSeries(runId, 'judge/failures').value).toEqual([0, 0]);
    const trajs = store.searchTrajectories({ runId });
    expect(trajs).toHaveLength(24);
    for (const t of trajs) {
      const j = judgeOf(t)!;
      expect(j.mode).toBe('rank');
      const full = store.getTrajectory(t.id);
      const model = full.turnsData.filter((u) => u.role === 'model').map((u) => u.text);
      // The reward is the judge's score (mix 1), which the mock read from the trajectory's own words.
      expect(t.reward).toBeCloseTo(contentScore(`[assistant]\n${model.join(' ')}`), 6);
      expect(j.score).toBe(t.reward);
      expect((t.outcomeData as { components: Record<string, number> }).components).toMatchObject({ judge: j.score, judge_failed: 0 });
      expect(j.rank).toBeGreaterThanOrEqual(1);
      expect(j.rank).toBeLessThanOrEqual(j.of!);
    }
    // The group's requests are kept once, on its first sample: the prompt as sent, the raw answer, the order shown.
    const g = store.group(runId, 1, 0);
    const calls = g.flatMap((t) => judgeOf(t)!.calls ?? []) as JudgeCall[];
    expect(calls).toHaveLength(1);
    expect(judgeOf(g[0]!)!.calls).toHaveLength(1);
    expect(mock.requests.map((r) => r.messages[1]!.content)).toContain(calls[0]!.prompt);
    expect(JSON.parse(calls[0]!.answer!)).toHaveProperty('scores');
    expect(new Set(calls[0]!.order).size).toBe(calls[0]!.order.length);
    for (const id of calls[0]!.order) expect(g.map((t) => t.sample)).toContain(id);
  });

  it('a group whose judgement fails is named, stored and left out of the update; a step with none left trains nothing', async () => {
    const { cfg, ports, runDir, store, runId, policy } = setup({ mode: 'rank', retries: 0 }, { steps: 2 });
    // Step 1: one of the three groups gets a malformed answer. Step 2: all three do.
    mock.script.push({ content: '{"scores": [{"trajectory": 1' }, {}, {}, { content: 'x' }, { content: 'x' }, { content: 'x' });
    let before: Float64Array[] | undefined;
    await runTrainingLoop(cfg, ports, { runDir, onStep: (s) => s === 1 && (before = policy.logits.map((l) => l.slice())) });
    expect(store.metricSeries(runId, 'judge/dropped_groups').value).toEqual([1, 3]);
    expect(store.metricSeries(runId, 'judge/failures').value).toEqual([4, 12]);
    expect(store.metricSeries(runId, 'learn/unscored_step').step).toEqual([2]);
    const step1 = store.searchTrajectories({ runId, step: 1 });
    expect(step1).toHaveLength(12);
    const failed = step1.filter((t) => judgeOf(t)!.failed);
    expect(failed).toHaveLength(4);
    expect(new Set(failed.map((t) => t.group)).size).toBe(1);
    for (const t of failed) {
      expect(judgeOf(t)!.failed).toMatch(/^malformed answer: the answer is not JSON/);
      expect((t.outcomeData as { unscored?: string }).unscored).toMatch(/^judge: malformed answer/);
      expect((t.outcomeData as { components: Record<string, number> }).components.judge_failed).toBe(1);
      // Not trained on: no advantage was computed for it.
      expect(t.advantage).toBeUndefined();
    }
    for (const t of step1.filter((x) => !judgeOf(x)!.failed)) expect(t.advantage).toBeDefined();
    // Step 2: every judgement failed; its trajectories are stored, the weights did not move.
    expect(store.searchTrajectories({ runId, step: 2 })).toHaveLength(12);
    policy.logits.forEach((l, i) => expect(Array.from(l)).toEqual(Array.from(before![i]!)));
  });

  it('score mode: one request per distinct trajectory, identical ones share it', async () => {
    const { cfg, ports, runDir, store, runId } = setup({ mode: 'score' }, { steps: 1 });
    await runTrainingLoop(cfg, ports, { runDir });
    const trajs = store.searchTrajectories({ runId });
    const full = trajs.map((t) =>
      store
        .getTrajectory(t.id)
        .turnsData.map((u) => u.text)
        .join('|'),
    );
    const distinct = new Set(full.map((f, i) => `${trajs[i]!.group}:${f}`));
    // Identical trajectories of a step are asked once (the content cache; tasks repeat across groups too).
    expect(mock.requests.length).toBe(new Set(full).size);
    expect(mock.requests.length).toBeLessThanOrEqual(distinct.size);
    for (const t of trajs) {
      const j = judgeOf(t)!;
      expect(j.calls).toHaveLength(1);
      expect(j.calls![0]!.order).toEqual([t.sample]);
      expect(t.reward).toBe(j.score);
    }
    expect(store.metricSeries(runId, 'judge/cache_hits').value[0]).toBe(12 - mock.requests.length);
  });

  it('mix: the reward is (1 − mix) · task reward + mix · judge score', async () => {
    const { cfg, ports, runDir, store, runId } = setup({ mode: 'rank', mix: 0.25 }, { steps: 1 });
    await runTrainingLoop(cfg, ports, { runDir });
    for (const t of store.searchTrajectories({ runId })) {
      const c = (t.outcomeData as { components: Record<string, number> }).components;
      // The tabular task's own reward is the share of positions right (component "partial").
      expect(t.reward).toBeCloseTo(0.75 * c.partial! + 0.25 * c.judge!, 6);
    }
  });

  it('rank mode sees every group whole under dynamic sampling (each refill round is judged as it is sampled)', async () => {
    const { cfg, ports, runDir, store, runId } = setup(
      { mode: 'rank' },
      { steps: 2, algorithm: { ppo_epochs: 1, mini_batches: 1, micro_batches: 1, dynamic_sampling: { enabled: true, max_rounds: 3 } } },
    );
    await runTrainingLoop(cfg, ports, { runDir });
    for (const r of mock.requests) {
      const shown = [...r.messages[1]!.content.matchAll(/<trajectory \d+>/g)].length;
      expect(shown).toBeGreaterThanOrEqual(1);
      expect(shown).toBeLessThanOrEqual(4);
    }
    const trajs = store.searchTrajectories({ runId });
    const byGroup = new Map<string, number>();
    for (const t of trajs) byGroup.set(`${t.step}:${t.group}`, (byGroup.get(`${t.step}:${t.group}`) ?? 0) + 1);
    for (const n of byGroup.values()) expect(n).toBe(4);
    expect(store.metricSeries(runId, 'judge/requests').step).toEqual([1, 2]);
  });

  it('the key comes from the variable api_key_env names and never enters the config', () => {
    const cfg = validateConfig({
      model: { init: 'tiny' },
      environment: { judge: { base_url: mock.url, model: 'm', rubric: 'r', api_key_env: 'JUDGE_KEY_X' } },
    });
    expect(JSON.stringify(cfg)).not.toContain('sk-');
    expect(() => judgeOptions(cfg.environment.judge!, {})).toThrow('environment.judge.api_key_env: the environment variable JUDGE_KEY_X is not set');
    expect(judgeOptions(cfg.environment.judge!, { JUDGE_KEY_X: 'sk-abc' }).apiKey).toBe('sk-abc');
    expect(() =>
      validateConfig({ model: { init: 'tiny' }, environment: { judge: { base_url: mock.url, model: 'm', rubric: 'r', api_key: 'sk-abc' } } }),
    ).toThrow(/environment\.judge.*api_key/);
    expect(() =>
      validateConfig({ model: { init: 'tiny' }, environment: { judge: { base_url: mock.url, model: 'm', rubric: 'r', mode: 'score', agreement: true } } }),
    ).toThrow(/environment\.judge\.agreement: is for mode "rank"/);
    expect(() => validateConfig({ model: { init: 'tiny' }, environment: { judge: { base_url: 'ftp://x', model: 'm', rubric: 'r' } } })).toThrow(
      /environment\.judge\.base_url/,
    );
    // Commands that read the environment but not the judge say so (it scores training rollouts only).
    const raw = { model: { init: 'tiny' }, environment: { format: 'search-r1', judge: { base_url: mock.url, model: 'm', rubric: 'r' } } };
    expect(keysOutsideScope(raw, 'eval')).toEqual(['environment.judge.base_url', 'environment.judge.model', 'environment.judge.rubric']);
    expect(keysOutsideScope(raw, 'rollout')).toContain('environment.judge.rubric');
    // No judge configured: the port is the one given.
    const plain = validateConfig({ model: { init: 'tiny' } });
    const port = { sample: async () => [] };
    expect(withJudge(plain, port, decode)).toBe(port);
  });
});
