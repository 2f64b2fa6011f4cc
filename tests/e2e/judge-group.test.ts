// The judge's audit in the group view (environment.judge), in Chromium against a real engine: a
// GRPO step judged in rank mode by a mock OpenAI-compatible judge (the training loop, the judge's
// rollout port and the store sink, in this process, writing into the engine's workspace), then the
// group view shows the judge's raw answer beside the samples with each one's score and rank.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { validateConfig } from '../../engine/config/experiment';
import { Judge, type JudgeRecord } from '../../engine/env/judge';
import { storeSink } from '../../engine/run/store-sink';
import { openDatabase } from '../../engine/store/db';
import { Store } from '../../engine/store/store';
import { advantagePort } from '../../engine/train/advantage';
import { judgedRolloutPort, judgeOptions } from '../../engine/train/judge-rollout';
import { runTrainingLoop } from '../../engine/train/loop';
import { MockJudge } from '../engine/env/judge-mock';
import { TabularPolicy } from '../engine/train/tabular';
import { openBrowser, reviewShot, screenshotIfFailed, startEngine, type Browser, type Engine } from './harness';

let engine: Engine | undefined;
let browser: Browser | undefined;
let mock: MockJudge | undefined;

beforeEach(async () => {
  engine = await startEngine();
  browser = await openBrowser();
  mock = new MockJudge();
  await mock.start();
});

afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  await mock?.close();
  browser = engine = mock = undefined;
});

const VOCAB = 3;
const decode = (ids: number[]) => ids.map((i) => (i === 0 ? 'good' : i >= VOCAB ? `prompt${i - VOCAB}` : `w${i}`)).join(' ');

async function judgedRun(home: string): Promise<{ runId: string; store: Store }> {
  const cfg = validateConfig({
    model: { init: 'tiny' },
    steps: 1,
    seed: 3,
    rollout: { prompts_per_step: 2, n: 4 },
    algorithm: { ppo_epochs: 1, mini_batches: 1, micro_batches: 1 },
    checkpoint: { every: 10, keep: 1 },
    environment: { judge: { base_url: mock!.url, model: 'mock-judge', rubric: 'More good words are better.', mode: 'rank' } },
  });
  const store = new Store(openDatabase(join(home, 'arbor.db')));
  const runId = store.createRun({ name: 'judged-run', template: 'multihop', status: 'completed', config: cfg as unknown as Record<string, unknown> });
  const policy = new TabularPolicy({ prompts: 4, length: 4, vocab: VOCAB, seed: 5 }, cfg);
  const j = cfg.environment.judge!;
  const sink = storeSink(store, runId, { decode });
  const rollout = judgedRolloutPort(policy, new Judge(judgeOptions(j)), { decode, mix: j.mix, references: j.references });
  await runTrainingLoop(cfg, { rollout, policy, advantage: advantagePort(cfg), sink }, { runDir: mkdtempSync(join(tmpdir(), 'arbor-e2e-judge-')) });
  sink.flush();
  return { runId, store };
}

describe('judge audit in the group view', () => {
  it("shows the judge's raw answer beside the group's samples, with each sample's score and rank", async () => {
    const { runId, store } = await judgedRun(engine!.home);
    const group = store.group(runId, 1, 0);
    expect(group).toHaveLength(4);
    const judged = group.map((t) => (t.outcomeData as { judge: JudgeRecord }).judge);
    const call = judged.flatMap((j) => j.calls ?? [])[0]!;

    const { page, errors } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-trajectories').click();
    const runSelect = page.getByTestId('traj-run');
    await runSelect.locator('option', { hasText: 'judged-run' }).waitFor({ state: 'attached' });
    await runSelect.selectOption({ label: 'judged-run' });
    await page.getByTestId('traj-row').first().click();
    await page.getByTestId('group-toggle').check();
    await page.getByTestId('group-view').waitFor();

    // The judge's request: model, mode, which numbered trajectory was which sample, the raw answer.
    const panel = page.getByTestId('judge-panel');
    await panel.waitFor();
    expect(await panel.innerText()).toContain('mock-judge');
    expect(await panel.innerText()).toContain('rank mode');
    expect(await panel.getByTestId('judge-answer').innerText()).toBe(call.answer);
    const mapping = call.order.map((s, k) => `trajectory ${k + 1} = sample ${s}`).join(', ');
    expect(await panel.getByTestId('judge-call').innerText()).toContain(mapping);
    // Each sample's column: its score and rank as the judge gave them.
    const cols = page.getByTestId('group-col');
    await expect.poll(() => cols.count()).toBe(4);
    for (let i = 0; i < 4; i++) {
      const t = group[i]!;
      const j = judged[i]!;
      const text = await cols.nth(i).getByTestId('judge-score').innerText();
      expect(text).toBe(`judge ${j.score!.toFixed(2)} · rank ${j.rank}/${j.of}`);
      expect(await cols.nth(i).innerText()).toContain(`sample ${t.sample}`);
    }
    await reviewShot(page, 'judge-group');
    expect(errors).toEqual([]);
  }, 120_000);
});
