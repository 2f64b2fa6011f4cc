// Results a researcher can trust (#28) in the workbench: seed groups in the Compare view (one line
// per group with its 95% interval band, its statistics and runs, two groups' difference).
// The workspace is filled through the store API (the same rows `arbor train --seeds` writes), so
// the test needs no training job.
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../engine/store/db';
import { Store } from '../../engine/store/store';
import { createGroup, setGroupStatus } from '../../engine/store/groups';
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
  const g = createGroup(s, { name, kind: 'seeds', plan: [0, 1, 2, 3].map((seed) => ({ cell: 'base', overrides: {}, seed })) });
  for (const seed of [0, 1, 2, 3]) {
    const id = s.createRun({ name: `${name}-s${seed}`, seed, status: 'completed', template: 'tools' });
    s.db.prepare('UPDATE runs SET group_id = ?, group_cell = ? WHERE id = ?').run(g, 'base', id);
    const spread = (seed - 1.5) * 0.04;
    s.writeMetrics(id, 200, { 'sft/eval/exact_match': 0.5 + spread / 2 });
    for (let step = 1; step <= 20; step++) s.writeMetrics(id, step, { 'reward/mean': (top * step) / 20 + spread + 0.02 * Math.sin(step + seed) });
    s.writeMetrics(id, 20, { 'eval/exact_match': top + spread });
  }
  setGroupStatus(s, g, 'completed');
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
});
