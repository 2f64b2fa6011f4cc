/**
 * The whole path of environment.judge: a config's judge section → the task session
 * (engine/run/compose.ts wraps the rollout port) → GRPO steps of the tiny transformer →
 * the store. The judge is `arbor serve-model` of a tiny random checkpoint (engine/openai/serve-model.ts,
 * what the command runs): it answers, but not in the judge's JSON, so every judgement must end as
 * a named failure (malformed answer), stored and counted, and the run must go on. A second run
 * against the mock judge shows the same wiring scoring the trajectories.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { validateConfig } from '../../../engine/config/experiment';
import type { JudgeRecord } from '../../../engine/env/judge';
import { buildTaskSession } from '../../../engine/run/compose';
import { runExperiment } from '../../../engine/run/runner';
import { serveModel } from '../../../engine/openai/serve-model';
import { storeSink } from '../../../engine/run/store-sink';
import { initWeights, saveCheckpoint } from '../../../engine/model/checkpoint';
import { tinyConfig } from '../../../engine/model/config';
import { toolsTokenizer } from '../../../engine/tasks/tools/kit';
import { openDatabase } from '../../../engine/store/db';
import { Store } from '../../../engine/store/store';
import type { TaskKit } from '../../../engine/tasks/kit';
import { toolsModelFolder } from '../openai/helpers';
import { sequenceTasks, tabularTargets, tabularTokenizer } from '../train/tabular';
import { MockJudge } from './judge-mock';

const home = mkdtempSync(join(tmpdir(), 'arbor-judge-serve-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

const VOCAB = 6;
const PROMPTS = 4;
const targets = tabularTargets({ prompts: PROMPTS, length: 3, vocab: VOCAB, seed: 4 });
const kit: TaskKit = {
  tokenizer: tabularTokenizer,
  trainTasks: sequenceTasks(targets, VOCAB),
  evalTasks: sequenceTasks(targets, VOCAB),
  stop: { strings: [], tokenIds: [] },
  tinyModel: () => tinyConfig({ vocabSize: VOCAB + PROMPTS, hiddenSize: 16, layers: 1, heads: 2, maxPositionEmbeddings: 8 }),
};

async function train(judge: Record<string, unknown>, name: string) {
  const cfg = validateConfig({
    model: { init: 'tiny' },
    steps: 2,
    seed: 1,
    threads: 1,
    rollout: { prompts_per_step: 2, n: 3, max_turns: 1, max_new_tokens: 3, max_total_length: 4 },
    eval: { every: 0, n_questions: 2 },
    checkpoint: { every: 2, keep: 1 },
    environment: { judge: { rubric: 'Score how many tokens equal 0.', retries: 1, ...judge } },
  });
  const store = new Store(openDatabase(join(home, `${name}.db`)));
  const runId = store.createRun({ name });
  const session = await buildTaskSession({ cfg, defaults: new Set() }, kit);
  try {
    const runDir = mkdtempSync(join(home, `${name}-`));
    await runExperiment(cfg, { runDir, session, sink: storeSink(store, runId, { decode: (ids) => ids.join(' ') }) });
  } finally {
    await session.close();
  }
  return { store, runId };
}

describe('environment.judge end to end', () => {
  it('a judge served by arbor serve-model of a tiny checkpoint: each judgement a score or a named failure (a random model writes no JSON), stored, the run goes on', async () => {
    const folder = join(home, 'judge-model');
    toolsModelFolder(folder, 3);
    const logs: string[] = [];
    const served = await serveModel(folder, { device: 'cpu', threads: 1, apiKey: 'sk-judge', log: (l: string) => logs.push(l) });
    process.env.ARBOR_TEST_JUDGE_KEY = 'sk-judge';
    try {
      const { store, runId } = await train(
        { base_url: served.url, model: 'judge-model', api_key_env: 'ARBOR_TEST_JUDGE_KEY', mode: 'rank', max_tokens: 8, timeout_ms: 60_000 },
        'served',
      );
      // The served model answered (it was asked: the requests reached its endpoint, with the key).
      expect(logs.some((l) => /POST \/v1\/chat\/completions 200/.test(l))).toBe(true);
      const calls = store.metricSeries(runId, 'judge/calls');
      expect(calls.step).toEqual([1, 2]);
      expect(calls.value.every((v) => (v ?? 0) >= 2)).toBe(true);
      const trajs = store.searchTrajectories({ runId });
      expect(trajs).toHaveLength(12);
      for (const t of trajs) {
        const j = (t.outcomeData as { judge?: JudgeRecord }).judge!;
        // A random tiny model does not write the judge's JSON: a named failure, never a score of 0 by default.
        if (j.failed !== undefined) {
          expect(j.failed).toMatch(/^(malformed answer|HTTP \d+|the response)/);
          expect(j.score).toBeUndefined();
          expect((t.outcomeData as { unscored?: string }).unscored).toMatch(/^judge: /);
        } else expect(j.score).toBeGreaterThanOrEqual(0);
      }
      const failures = store.metricSeries(runId, 'judge/failures').value.reduce<number>((a, v) => a + (v ?? 0), 0);
      expect(failures).toBe(trajs.filter((t) => (t.outcomeData as { judge?: JudgeRecord }).judge!.failed !== undefined).length);
      // The audit keeps the served model's raw answer.
      const withCalls = trajs.flatMap((t) => (t.outcomeData as { judge?: JudgeRecord }).judge!.calls ?? []);
      expect(withCalls.length).toBeGreaterThanOrEqual(4);
      expect(withCalls.every((c) => c.prompt.includes('Score how many tokens equal 0.') || c.system.includes('Score how many tokens equal 0.'))).toBe(true);
      expect(logs.join('\n')).not.toContain('sk-judge');
    } finally {
      delete process.env.ARBOR_TEST_JUDGE_KEY;
      await served.close();
    }
  }, 180_000);

  it('the two-tool task through `arbor train`, judged in rank mode by `arbor serve-model`: judge/* and the audit stored', async () => {
    const root = join(__dirname, '..', '..', '..');
    // The judge: the tiny tools model with a context long enough for a group's transcripts (a random one: it answers, not in JSON).
    const folder = join(home, 'judge-tools');
    const tok = toolsTokenizer();
    mkdirSync(folder, { recursive: true });
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(tok.folder(), f), join(folder, f));
    const config = tinyConfig({
      vocabSize: tok.vocab.length,
      hiddenSize: 32,
      layers: 1,
      heads: 4,
      maxPositionEmbeddings: 4096,
      eosTokenId: tok.hf.tokenId('<|im_end|>')!,
      padTokenId: tok.hf.padTokenId,
      bosTokenId: null,
    });
    saveCheckpoint(folder, config, initWeights(config, 5));
    const served = await serveModel(folder, { device: 'cpu', threads: 1, name: 'tiny-judge' });
    try {
      const cfg = parse(readFileSync(join(root, 'resources', 'configs', 'tools.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
      const abs = (p: string) => join(root, 'resources', 'configs', p);
      const env = cfg.environment!;
      env.tools = (env.tools as string[]).map(abs);
      for (const k of ['reward', 'tasks', 'workspace']) env[k] = abs(env[k] as string);
      env.judge = { base_url: served.url, model: 'tiny-judge', rubric: 'right answer', mode: 'rank', max_tokens: 8, retries: 0, mix: 0.5 };
      Object.assign(cfg, {
        model: { init: 'tiny', hidden_size: 32 },
        steps: 1,
        rollout: { ...cfg.rollout, prompts_per_step: 2, n: 2, max_turns: 2, max_new_tokens: 12 },
        sft: { warm_start: false },
        eval: { every: 0, n_questions: 2 },
        algorithm: { ...cfg.algorithm, dynamic_sampling: { enabled: false } },
        checkpoint: { every: 1, keep: 1 },
      });
      const file = join(home, 'tools-judge.yaml');
      writeFileSync(file, stringify(cfg));
      const child = spawn(process.execPath, [join(root, 'bin', 'arbor.mjs'), 'train', file, '--json'], {
        env: { ...process.env, ARBOR_HOME: home },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
      const code = await new Promise<number | null>((r) => child.once('exit', r));
      expect(code, err).toBe(0);
      const { run } = JSON.parse(out.trim().split('\n').pop()!) as { run: string };
      const store = new Store(openDatabase(join(home, 'arbor.db')));
      expect(store.metricSeries(run, 'judge/requests').value).toEqual([2]);
      const trajs = store.searchTrajectories({ runId: run });
      expect(trajs).toHaveLength(4);
      for (const t of trajs) {
        const j = (t.outcomeData as { judge?: JudgeRecord }).judge!;
        expect(j.model).toBe('tiny-judge');
        // A random tiny judge answers, but not the judge's JSON: a named failure (a score would do too; what it writes is not asserted).
        if (j.failed !== undefined) expect(j.failed).toMatch(/^malformed answer/);
        else expect(j.score).toBeGreaterThanOrEqual(0);
      }
      const calls = trajs.flatMap((t) => (t.outcomeData as { judge?: JudgeRecord }).judge!.calls ?? []);
      expect(calls).toHaveLength(2);
      for (const c of calls) {
        expect(c.prompt).toContain('<trajectory 1>');
        expect(typeof c.answer).toBe('string');
      }
    } finally {
      await served.close();
    }
  }, 240_000);

  it('the same wiring against the mock judge scores every trajectory', async () => {
    const mock = new MockJudge((req) => {
      const n = [...req.messages[1]!.content.matchAll(/<trajectory (\d+)>/g)].length;
      return JSON.stringify({ scores: Array.from({ length: n }, (_, i) => ({ trajectory: i + 1, score: (i + 1) / n })) });
    });
    await mock.start();
    try {
      const { store, runId } = await train({ base_url: mock.url, model: 'mock', mode: 'rank' }, 'mock');
      const trajs = store.searchTrajectories({ runId });
      expect(trajs).toHaveLength(12);
      for (const t of trajs) expect((t.outcomeData as { judge?: JudgeRecord }).judge!.score).toBe(t.reward);
      expect(store.metricSeries(runId, 'judge/failures').value).toEqual([0, 0]);
    } finally {
      await mock.close();
    }
  }, 120_000);
});
