// The branch tree of a group from branching rollouts (ARPO/AEPO), walked by keyboard in
// Chromium against a real engine (`arbor serve`) on a real workspace database.
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../engine/store/db';
import { Store } from '../../engine/store/store';
import { branchedGroup, plainGroup } from '../renderer/fixtures/branched-group';
import { openBrowser, reviewShot, screenshotIfFailed, startEngine, type Browser, type Engine } from './harness';

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

function seedBranchedRun(home: string): void {
  const db = openDatabase(join(home, 'arbor.db'));
  try {
    const store = new Store(db);
    const id = store.createRun({ name: 'arpo-branches', template: 'multihop', status: 'completed', config: { rollout: { branching: { mode: 'arpo' } } } });
    for (const t of [...branchedGroup(), ...plainGroup()]) store.writeTrajectory(id, t);
  } finally {
    db.close();
  }
}

describe('branch tree', () => {
  it('shows a branched group as a tree and walks it by keyboard', async () => {
    seedBranchedRun(engine!.home);
    const { page, errors } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-trajectories').click();
    const runSelect = page.getByTestId('traj-run');
    await runSelect.locator('option', { hasText: 'arpo-branches' }).waitFor({ state: 'attached' });
    await runSelect.selectOption({ label: 'arpo-branches' });

    // The first sample of group 0 opens, and its group shows as a tree.
    const tree = page.getByRole('tree');
    await tree.waitFor();
    const nodes = page.getByTestId('branch-node');
    const outline = () =>
      page.evaluate(() =>
        [...document.querySelectorAll('[role="tree"] [role="treeitem"]')].map((n) => `${n.getAttribute('data-sample')}@${n.getAttribute('aria-level')}`),
      );
    // Depth first, branches after their parent in branch-point order, the branch of a branch nested under it.
    expect(await outline()).toEqual(['0@1', '2@2', '4@3', '3@2', '1@1', '5@2']);
    expect(await page.getByTestId('branch-prompt').innerText()).toContain('Where was the director of Tidewater born ?');
    const node = (s: number) => page.locator(`[role="treeitem"][data-sample="${s}"]`);
    const row = (s: number) => node(s).locator(':scope > .branch-row');
    expect(await row(4).getByTestId('branch-entropy').innerText()).toBe('H 2.87 · ΔH +1.43');
    expect(await row(5).getByTestId('branch-entropy').innerText()).toBe('H 1.95 · ΔH −0.12');
    expect(await row(4).getByTestId('branch-reward').innerText()).toBe('1.000');
    expect(await row(4).innerText()).toContain('+0.42'); // advantage 1 − mean(1, 0, 0, 0.5, 1, 1)
    expect(await row(0).getByTestId('branch-entropy').count()).toBe(0); // a root has no branch point
    expect(await node(0).getAttribute('aria-selected')).toBe('true');
    expect(await page.getByTestId('branch-keys').innerText()).toMatch(/focus tree/);
    await reviewShot(page, 'branch-tree');

    const header = page.getByTestId('traj-header');
    const openSample = async () => Number(/sample (\d+) of/.exec(await header.innerText())?.[1]);
    const focused = () => page.evaluate(() => document.activeElement?.getAttribute('data-sample') ?? null);

    // t puts the keyboard in the tree, on the open sample.
    await page.keyboard.press('t');
    await expect.poll(focused).toBe('0');
    // ↓ the next visible node: the first branch of sample 0, opened in the replay with its shared turns marked.
    await page.keyboard.press('ArrowDown');
    await expect.poll(focused).toBe('2');
    await expect.poll(openSample).toBe(2);
    expect(await node(2).getAttribute('aria-selected')).toBe('true');
    expect(await node(0).getAttribute('aria-selected')).toBe('false');
    await expect.poll(() => page.getByTestId('traj-branch').innerText()).toMatch(/branched from sample 0 after 2 turns/);
    await expect
      .poll(() => page.getByTestId('turn-shared').allInnerTexts())
      .toEqual(['shared · from sample 0', 'shared · from sample 0', 'shared · from sample 0']);
    expect(await page.getByTestId('branch-point').innerText()).toMatch(/left sample 0 here · entropy 2\.310 · ΔH 0\.840/);
    // → its first branch (a branch of a branch): turns from the root, then from sample 2.
    await page.keyboard.press('ArrowRight');
    await expect.poll(focused).toBe('4');
    await expect.poll(openSample).toBe(4);
    await expect
      .poll(() => page.getByTestId('turn-shared').allInnerTexts())
      .toEqual(['shared · from sample 0', 'shared · from sample 0', 'shared · from sample 0', 'shared · from sample 2', 'shared · from sample 2']);
    await reviewShot(page, 'branch-tree-nested');
    // ← the parent; ← again collapses it (its branch hidden); ← once more goes to the root.
    await page.keyboard.press('ArrowLeft');
    await expect.poll(openSample).toBe(2);
    await page.keyboard.press('ArrowLeft');
    await expect.poll(() => node(2).getAttribute('aria-expanded')).toBe('false');
    expect(await node(4).count()).toBe(0);
    expect(await openSample()).toBe(2);
    await page.keyboard.press('ArrowLeft');
    await expect.poll(focused).toBe('0');
    await expect.poll(openSample).toBe(0);
    // End / Home: the last and first visible nodes; ↑ from the last goes back through the other root.
    await page.keyboard.press('End');
    await expect.poll(openSample).toBe(5);
    await page.keyboard.press('ArrowUp');
    await expect.poll(focused).toBe('1');
    await expect.poll(openSample).toBe(1);
    await expect.poll(() => page.getByTestId('traj-branch').innerText()).toMatch(/root sample · 1 branch/);
    expect(await page.getByTestId('turn-shared').count()).toBe(0);
    await page.keyboard.press('ArrowUp');
    await expect.poll(focused).toBe('3');
    await page.keyboard.press('Home');
    await expect.poll(focused).toBe('0');
    await expect.poll(openSample).toBe(0);
    // → on a collapsed node expands it; ↑/↓ never reached the trajectory list (still group 0).
    await page.keyboard.press('ArrowDown');
    await expect.poll(focused).toBe('2');
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => node(2).getAttribute('aria-expanded')).toBe('true');
    expect(await nodes.count()).toBe(6);

    // Outside the tree the replay's keys still work, and ←/→ follow the branches there too.
    await page.getByTestId('turns').click();
    expect(await focused()).toBe(null);
    await page.keyboard.press('ArrowRight');
    await expect.poll(openSample).toBe(4);
    await page.keyboard.press('ArrowLeft');
    await expect.poll(openSample).toBe(2);
    // A branch opens at its branch point (turn index 3: after the prompt and 2 shared turns); j/k still walk the turns.
    const activeTurn = () => page.locator('[data-testid="turn"][data-active="true"]').getAttribute('data-turn-index');
    await expect.poll(activeTurn).toBe('3');
    await page.keyboard.press('k');
    await expect.poll(activeTurn).toBe('2');

    // An unbranched group keeps today's view: no tree, no branch marks.
    await page.getByTestId('traj-row').filter({ hasText: 'Who wrote Lantern' }).first().click();
    await expect.poll(() => header.innerText()).toMatch(/group 1 · sample 0 of 3/);
    expect(await page.getByRole('tree').count()).toBe(0);
    expect(await page.getByTestId('traj-branch').count()).toBe(0);
    expect(errors.filter((e) => !/favicon/.test(e))).toEqual([]);
  });
});
