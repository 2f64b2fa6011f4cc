// Results a researcher can trust (#28) in the workbench: seed groups in the Compare view (one line
// per group with its 95% interval band, its statistics and runs, two groups' difference).
// The workspace is filled through the store API (the same rows `arbor train --seeds` writes), so
// the test needs no training job.
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../engine/store/db';
import { Store } from '../../engine/store/store';
import { createRunGroup, setRunGroupStatus } from '../../engine/store/groups';
import { openBrowser, reviewShot, screenshotIfFailed, shot, startEngine, type Browser, type Engine } from './harness';

let engine: Engine | undefined;
let browser: Browser | undefined;

beforeEach(async () => {
  engine = await startEngine();
  browser = await openBrowser();
});

afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

/** A seed group of 4 completed runs whose held-out EM rises to `top` (± a seed-dependent spread). */
function seedGroup(s: Store, name: string, top: number): string {
  const g = createRunGroup(s, { name, kind: 'seeds', plan: [0, 1, 2, 3].map((seed) => ({ cell: 'base', overrides: {}, seed })) });
  for (const seed of [0, 1, 2, 3]) {
    const id = s.createRun({ name: `${name}-s${seed}`, seed, status: 'completed', template: 'tools' });
    s.db.prepare('UPDATE runs SET group_id = ?, group_cell = ? WHERE id = ?').run(g, 'base', id);
    const spread = (seed - 1.5) * 0.04;
    s.writeMetrics(id, 200, { 'sft/eval/exact_match': 0.5 + spread / 2 });
    for (let step = 1; step <= 20; step++) s.writeMetrics(id, step, { 'reward/mean': (top * step) / 20 + spread + 0.02 * Math.sin(step + seed) });
    s.writeMetrics(id, 20, { 'eval/exact_match': top + spread });
  }
  setRunGroupStatus(s, g, 'completed');
  return g;
}

describe('trustworthy results in the workbench', () => {
  it('the Compare view shows two seed groups as lines with interval bands, their statistics, runs and difference', async () => {
    const s = new Store(openDatabase(join(engine!.home, 'arbor.db')));
    seedGroup(s, 'grpo', 0.75);
    seedGroup(s, 'rloo', 0.6);
    s.db.close();
    const { page, errors } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-compare').click();
    for (const name of ['grpo', 'rloo']) {
      const select = page.getByTestId('group-select');
      const value = await select.locator('option', { hasText: name }).getAttribute('value');
      await select.selectOption(value!);
      await page.getByTestId('group-add').click();
      await page.getByTestId('group-panel').filter({ hasText: name }).waitFor();
    }
    expect(await page.getByTestId('group-line').allTextContents()).toEqual(['▬ grpo', '▬ rloo']);
    // One chart per metric, each with two lines and two bands.
    const chart = page.getByTestId('chart-reward/mean');
    await chart.waitFor();
    expect(await chart.getAttribute('data-bands')).toBe('2');
    expect(await chart.getByTestId('chart-points').textContent()).toBe('2 lines');
    // The statistics: held-out EM over 4 seeds, the lift, and the group's runs.
    const grpo = page.getByTestId('group-panel').filter({ hasText: 'grpo' });
    const emRow = grpo.getByTestId('group-stats').locator('tr', { hasText: 'eval/exact_match' }).first();
    expect(await emRow.textContent()).toContain('0.75');
    await expect(grpo.getByTestId('group-stats').locator('tr', { hasText: 'lift/exact_match' }).count()).resolves.toBe(1);
    expect((await grpo.getByTestId('group-runs').textContent())!.match(/seed \d/g)).toEqual(['seed 0', 'seed 1', 'seed 2', 'seed 3']);
    await expect(page.getByTestId('group-partial').count()).resolves.toBe(0);
    // rloo − grpo: the held-out EM difference is −0.15 with its interval.
    const diff = page.getByTestId('group-diff');
    expect(await diff.textContent()).toMatch(/rloo − grpo/);
    expect(await diff.locator('tr', { hasText: /^eval\/exact_match/ }).textContent()).toContain('-0.15');
    await chart.scrollIntoViewIfNeeded();
    await shot(page, 'trust-compare-groups');
    await reviewShot(page, 'compare-groups');
    expect(errors).toEqual([]);
  }, 120_000);

  it("the Run view's panel flags steps where nothing was learned, warns about flat groups, and links a step to its zero-variance groups", async () => {
    const s = new Store(openDatabase(join(engine!.home, 'arbor.db')));
    const run = s.createRun({ name: 'flat-run', seed: 0, status: 'completed', template: 'tools' });
    for (let step = 1; step <= 14; step++) {
      const flat = step <= 11;
      s.writeMetrics(run, step, {
        'reward/mean': flat ? 0 : 0.3,
        'learn/zero_variance_groups': flat ? 1 : 0.25,
        'learn/gradient_share': flat ? 0 : 0.8,
        'actor/grad_norm': flat ? 0 : 0.5,
        'actor/clip_low_fraction': 0.01,
        'actor/clip_high_fraction': 0.02,
        'advantage/p05': flat ? 0 : -1.1,
        'advantage/p50': 0,
        'advantage/p95': flat ? 0 : 1.2,
        truncated_rate: 0.1,
        format_rate: 0.9,
        tool_calls_per_episode: 2,
        // One curve under two keys: drawn once.
        exact_match: flat ? 0 : 0.25,
        'reward/exact_match': flat ? 0 : 0.25,
      });
    }
    // Step 5: group 0 is flat (reward 0 for both samples), group 1 is not.
    const turns = [
      { role: 'prompt', text: 'how old was the founder?' },
      { role: 'model', text: '<answer>12</answer>' },
    ];
    for (const [group, sample, reward] of [
      [0, 0, 0],
      [0, 1, 0],
      [1, 0, 1],
      [1, 1, 0],
    ] as const)
      s.writeTrajectory(run, { step: 5, group, sample, reward, advantage: 0, task: `t${group}`, prompt: 'how old was the founder?', turns });
    s.db.close();
    const { page, errors } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-runs').click();
    // The runs table shows seed, algorithm and duration, and keeps its actions on screen.
    const rowEl = page.getByTestId('run-row').filter({ hasText: 'flat-run' });
    expect(await rowEl.getByTestId('run-seed').textContent()).toBe('0');
    await shot(page, 'trust-runs-table');
    await page.getByTestId('run-row').getByRole('link', { name: 'flat-run' }).click();
    expect(await page.getByTestId('run-progress').textContent()).toBe('RL · step 14');
    expect(await page.getByTestId('chart-exact_match').getByTestId('chart-aliases').textContent()).toBe(' = reward/exact_match');
    expect(await page.getByTestId('chart-reward/exact_match').count()).toBe(0);
    const panel = page.getByTestId('learn-panel');
    await panel.waitFor();
    expect(await panel.locator('h3').textContent()).toContain('11 of 14 steps flagged');
    expect(await page.getByTestId('learn-warning').textContent()).toMatch(/step 10:.*flat for 10 steps \(steps 1–10\)/);
    expect(await page.getByTestId('learn-figures').textContent()).toContain('zero-variance groups in the trained batch 25%');
    const row = page.getByTestId('learn-flag-5');
    expect(await row.textContent()).toContain('no signal');
    await row.getByTestId('learn-flag-open').click();
    const chips = page.getByTestId('zv-group');
    await chips.first().waitFor();
    expect(await chips.allTextContents()).toEqual(['group 0 · reward 0 × 2']);
    await shot(page, 'trust-run-learn-panel');
    await reviewShot(page, 'run-learn-panel');
    await chips.first().click();
    await page.getByTestId('view-trajectories').waitFor();
    // Opened at step 5 on group 0, in the group view (its two samples side by side).
    await expect.poll(() => page.getByTestId('traj-step').inputValue()).toBe('5');
    const groupView = page.getByTestId('group-view');
    await groupView.waitFor();
    expect(await groupView.locator('.group-col').count()).toBe(2);
    expect(await groupView.locator('.group-col.sel').textContent()).toMatch(/sample 0\s*reward 0\.000/);
    // The list selects group 0's first sample.
    expect((await page.locator('[data-testid="traj-row"].sel').innerText()).split(/\s+/).slice(0, 2)).toEqual(['0', '0']);
    await shot(page, 'trust-run-learn-trajectories');
    expect(errors).toEqual([]);
  }, 120_000);
});
