// The branch tree of a group from branching rollouts (ARPO/AEPO), walked by keyboard in
// Chromium against a real engine (`arbor serve`) on a real workspace database: the groups of a
// real short ARPO training run, and a hand-made group (written through the store API) whose
// shape is known exactly: branches of branches, collapse and expand, every key.
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../engine/store/db';
import { Store } from '../../engine/store/store';
import { branchedGroup, plainGroup } from '../renderer/fixtures/branched-group';
import { engineRequest, openBrowser, reviewShot, screenshotIfFailed, startEngine, type Browser, type Engine } from './harness';
import type { TrajectorySummary } from '../../engine/server/protocol';

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

type Summary = Pick<TrajectorySummary, 'id' | 'step' | 'group' | 'sample' | 'reward' | 'advantage' | 'branch'>;

/** The expected outline of a group, written out from the branch fields: depth first, a parent's branches by branch point then sample. */
function expectedOutline(group: Summary[]): { sample: number; level: number; t: Summary }[] {
  const out: { sample: number; level: number; t: Summary }[] = [];
  const kids = (p: number) =>
    group.filter((t) => t.branch?.parent === p).sort((a, b) => a.branch!.tokens - b.branch!.tokens || a.branch!.turn - b.branch!.turn || a.sample - b.sample);
  const walk = (t: Summary, level: number) => {
    out.push({ sample: t.sample, level, t });
    for (const k of kids(t.sample)) walk(k, level + 1);
  };
  for (const r of group.filter((t) => !t.branch).sort((a, b) => a.sample - b.sample)) walk(r, 1);
  return out;
}

describe('branch tree', () => {
  it('opens a branched group of a real ARPO run in the tree view and walks it by keyboard', async () => {
    // A real short run: the tiny model on the multi-hop task, 2 steps of one prompt × 8 samples,
    // ARPO starting 2 and branching after every tool response (α = 1, beam 2) while the budget
    // lasts: branches at the first tool response, then branches of those at the second.
    const started = await engineRequest(engine!, 'runs.start', {
      template: 'multihop',
      name: 'arpo-e2e',
      config: {
        model: { init: 'tiny' },
        task: { kind: 'multihop' },
        steps: 2,
        rollout: { prompts_per_step: 1, n: 8, max_turns: 3, max_new_tokens: 8, branching: { mode: 'arpo', alpha: 1, beam_size: 2, initial_samples: 2 } },
        eval: { every: 0, n_questions: 2 },
        checkpoint: { every: 2, keep: 1 },
        logging: { full_trajectories_every: 1 },
      },
    });
    expect(started.error).toBeUndefined();
    const runId = (started.result as { id: string }).id;
    const { page, errors } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await expect
      .poll(async () => ((await engineRequest(engine!, 'runs.get', { id: runId })).result as { status: string }).status, { timeout: 120_000, interval: 500 })
      .toBe('completed');

    // The group with the most branches at the last step (the engine decides where they are).
    const all = (await engineRequest(engine!, 'trajectories.list', { runId })).result as Summary[];
    const last = Math.max(...all.map((t) => t.step));
    const groups = [...new Set(all.filter((t) => t.step === last).map((t) => t.group))].map((g) => all.filter((t) => t.step === last && t.group === g));
    const group = groups.sort((a, b) => b.filter((t) => t.branch).length - a.filter((t) => t.branch).length)[0];
    const branches = group.filter((t) => t.branch);
    expect(branches.length, 'the ARPO run stored branched samples').toBeGreaterThan(0);
    const outline = expectedOutline(group);
    expect(outline).toHaveLength(group.length);
    expect(Math.max(...outline.map((o) => o.level)), 'the run branched from a branch').toBeGreaterThanOrEqual(3);
    const bySample = new Map(group.map((t) => [t.sample, t]));
    /** Who generated stored turn i of a branch, from the engine's counts: the nearest ancestor whose own turns include it. */
    const originOf = (t: Summary, i: number): number => {
      let a = bySample.get(t.branch!.parent)!;
      while (a.branch && i < a.branch.turn) a = bySample.get(a.branch.parent)!;
      return a.sample;
    };

    await page.getByTestId('nav-trajectories').click();
    await page.getByTestId('traj-run').locator('option', { hasText: 'arpo-e2e' }).waitFor({ state: 'attached' });
    await page.getByTestId('traj-run').selectOption({ label: 'arpo-e2e' });
    await page.getByTestId('traj-step').selectOption(String(last));
    const header = page.getByTestId('traj-header');
    const where = async () =>
      /group (\d+) · sample (\d+)/
        .exec(await header.innerText())
        ?.slice(1)
        .map(Number);
    const root = outline[0].t;
    await page
      .getByTestId('traj-row')
      .nth((await rowIndex(page, root)) ?? 0)
      .click();
    await expect.poll(where).toEqual([root.group, root.sample]);
    await page.getByRole('tree').waitFor();
    const shown = () =>
      page.evaluate(() =>
        [...document.querySelectorAll('[role="tree"] [role="treeitem"]')].map((n) => [
          Number(n.getAttribute('data-sample')),
          Number(n.getAttribute('aria-level')),
        ]),
      );
    expect(await shown()).toEqual(outline.map((o) => [o.sample, o.level]));
    const row = (s: number) => page.locator(`[role="treeitem"][data-sample="${s}"] > .branch-row`);
    for (const o of outline) {
      expect(await row(o.sample).getByTestId('branch-reward').innerText()).toBe(o.t.reward.toFixed(3));
      const b = o.t.branch;
      if (b)
        expect(await row(o.sample).getByTestId('branch-entropy').innerText()).toMatch(
          new RegExp(`^H ${b.entropy.toFixed(3)} · ΔH [+−]?${Math.abs(b.deltaH).toFixed(3)}$`),
        );
    }
    await reviewShot(page, 'branch-tree-arpo-run');

    // Walk the whole tree with ↓ from the keyboard's entry point (t): every node opens its sample;
    // a branch shows where it left its parent, and exactly its shared turns are marked.
    const focused = () => page.evaluate(() => Number(document.activeElement?.getAttribute('data-sample') ?? -1));
    await page.keyboard.press('t');
    await expect.poll(focused).toBe(outline[0].sample);
    for (const [i, o] of outline.entries()) {
      if (i > 0) await page.keyboard.press('ArrowDown');
      await expect.poll(focused).toBe(o.sample);
      await expect.poll(where).toEqual([o.t.group, o.sample]);
      const b = o.t.branch;
      if (b) {
        await expect.poll(() => page.getByTestId('traj-branch').innerText()).toMatch(new RegExp(`branched from sample ${b.parent} after turn ${b.turn}\\b`));
        // The engine counts shared stored turns (prompt included); the view finds them by token
        // position and names the ancestor that generated each (a branch of a branch: the root's, then its parent's).
        await expect
          .poll(() => page.getByTestId('turn-shared').allInnerTexts())
          .toEqual(Array.from({ length: b.turn }, (_, i) => `shared · from sample ${originOf(o.t, i)}`));
        expect(await page.getByTestId('branch-point').count()).toBe(1);
      } else {
        await expect.poll(() => page.getByTestId('turn-shared').count()).toBe(0);
      }
    }
    // ↓ at the last node stays; ← from a branch goes to its parent (a leaf has nothing to collapse); Home back to the top.
    await page.keyboard.press('ArrowDown');
    const lastNode = outline[outline.length - 1];
    expect(await focused()).toBe(lastNode.sample);
    const lastBranch = [...outline].reverse().find((o) => o.t.branch)!;
    if (lastBranch !== lastNode) {
      for (let k = outline.indexOf(lastNode); k > outline.indexOf(lastBranch); k--) await page.keyboard.press('ArrowUp');
      await expect.poll(focused).toBe(lastBranch.sample);
    }
    await page.keyboard.press('ArrowLeft');
    await expect.poll(focused).toBe(lastBranch.t.branch!.parent);
    await expect.poll(where).toEqual([root.group, lastBranch.t.branch!.parent]);
    // → from the parent: its first branch.
    await page.keyboard.press('ArrowRight');
    const firstKid = outline.find((o) => o.t.branch?.parent === lastBranch.t.branch!.parent)!;
    await expect.poll(focused).toBe(firstKid.sample);
    await page.keyboard.press('Home');
    await expect.poll(focused).toBe(outline[0].sample);
    await expect.poll(where).toEqual([root.group, outline[0].sample]);
    expect(errors.filter((e) => !/favicon/.test(e))).toEqual([]);
  });

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
    expect(await row(4).getByTestId('branch-entropy').innerText()).toBe('H 0.834 · ΔH +0.271');
    expect(await row(5).getByTestId('branch-entropy').innerText()).toBe('H 0.655 · ΔH −0.043');
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
    await expect.poll(() => page.getByTestId('traj-branch').innerText()).toMatch(/branched from sample 0 after turn 3/);
    await expect
      .poll(() => page.getByTestId('turn-shared').allInnerTexts())
      .toEqual(['shared · from sample 0', 'shared · from sample 0', 'shared · from sample 0']);
    expect(await page.getByTestId('branch-point').innerText()).toMatch(/left sample 0 here · entropy 0\.712 · ΔH 0\.184/);
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

    // g: the group side by side (columns say which sample a branch left), g again: back to the tree.
    await page.keyboard.press('g');
    await page.getByTestId('group-view').waitFor();
    await expect.poll(() => page.locator('.group-col').count()).toBe(6);
    expect(await page.locator('.group-col').nth(4).locator('.turn-head').first().innerText()).toMatch(/sample 4[\s\S]*from 2/);
    await reviewShot(page, 'branch-group-view');
    await page.keyboard.press('g');
    await page.getByRole('tree').waitFor();

    // An unbranched group keeps today's view: no tree, no branch marks.
    await page.getByTestId('traj-row').filter({ hasText: 'Who wrote Lantern' }).first().click();
    await expect.poll(() => header.innerText()).toMatch(/group 1 · sample 0 of 3/);
    expect(await page.getByRole('tree').count()).toBe(0);
    expect(await page.getByTestId('traj-branch').count()).toBe(0);
    expect(errors.filter((e) => !/favicon/.test(e))).toEqual([]);
  });
});

/** Index in the trajectory list of a summary's row (the list is sorted by group, then sample). */
async function rowIndex(page: Browser['page'], t: Summary): Promise<number | undefined> {
  const rows = await page.getByTestId('traj-row').allInnerTexts();
  const i = rows.findIndex((r) => {
    const [g, s] = r.split(/\s+/).map(Number);
    return g === t.group && s === t.sample;
  });
  return i < 0 ? undefined : i;
}
