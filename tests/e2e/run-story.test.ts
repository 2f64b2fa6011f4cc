// The run tells its story (issue 40), in Chromium against a real engine and a real run: the Run view's
// summary (the SFT warm start as its own run, the parent, with its loss curve and a link that opens its
// Run view, which leads back to the RL run; the held-out table before
// RL / best / end whose numbers equal `arbor show`'s), the learning panel's flat share before dynamic
// sampling (equal to groups/flat_fraction) and a stored dropped group opened, and the Run view kept
// over a reload (URL state).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { axeViolations, engineRequest, numbersIn, openBrowser, ROOT, screenshotIfFailed, shot, startEngine, type Browser, type Engine } from './harness';

let engine: Engine | undefined;
let browser: Browser | undefined;
afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

interface Learning {
  heldOut: { metrics: string[]; columns: { label: string; step: number; values: Record<string, number> }[] } | null;
  droppedSteps: { step: number; dropped: number }[];
}

describe('the run tells its story', () => {
  it('summary with the SFT warm start as the parent run (its view, its curve) and held-out table equal to arbor show, truthful flat share, dropped group, reload', async () => {
    engine = await startEngine();
    // A real short run: SFT warm start, then 4 GRPO steps with dynamic sampling, held-out evaluation every 2 steps.
    const started = await engineRequest(engine, 'runs.start', {
      template: 'multihop',
      name: 'story-e2e',
      config: {
        model: { init: 'tiny' },
        task: { kind: 'multihop' },
        steps: 4,
        sft: { warm_start: true, demos: 32, epochs: 1 },
        // One new token per turn: no episode can write a whole answer, so every group is all wrong (flat) on any CPU.
        rollout: { prompts_per_step: 2, n: 4, max_turns: 3, max_new_tokens: 1 },
        algorithm: { dynamic_sampling: { enabled: true, max_rounds: 1 } },
        eval: { every: 2, n_questions: 6 },
        checkpoint: { every: 2, keep: 1, keep_every: 0 },
        logging: { full_trajectories_every: 1 },
      },
    });
    expect(started.error).toBeUndefined();
    const runId = (started.result as { id: string }).id;
    await expect
      .poll(async () => ((await engineRequest(engine!, 'runs.get', { id: runId })).result as { status: string }).status, { timeout: 150_000, interval: 500 })
      .toBe('completed');

    // `arbor show --json` on the same workspace: the numbers the Run view must show.
    const show = spawnSync(process.execPath, [join(ROOT, 'bin/arbor.mjs'), 'show', runId, '--json'], {
      cwd: ROOT,
      env: { ...process.env, ARBOR_HOME: engine.home },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(show.status, show.stderr).toBe(0);
    const shown = JSON.parse(show.stdout) as {
      metrics: Record<string, number>;
      learning: Learning & { phaseTimes: Record<string, number> };
      parentId?: string;
    };
    const held = shown.learning.heldOut!;
    expect(held.columns.map((c) => c.label)).toEqual(['before RL', 'best', 'end']);
    // The SFT warm start is its own run, the parent: SFT's curve at SFT steps, finished; its time is the RL run's "sft" phase.
    const runs = (await engineRequest(engine, 'runs.list')).result as {
      id: string;
      name: string;
      template: string;
      status: string;
      parentId?: string;
      step: number;
    }[];
    expect(runs).toHaveLength(2);
    const sftRun = runs.find((r) => r.id !== runId)!;
    const sftSteps = 2; // 32 demos in batches of 16 (sft.batch_size's default), one epoch
    expect(sftRun).toMatchObject({ name: 'story-e2e · SFT', template: 'sft', status: 'completed', step: sftSteps });
    expect(shown.parentId).toBe(sftRun.id);
    expect(runs.find((r) => r.id === runId)!.parentId).toBe(sftRun.id);
    const sftLoss = ((await engineRequest(engine, 'metrics.series', { runId: sftRun.id, keys: ['sft/loss'] })).result as Record<string, { step: number[] }>)[
      'sft/loss'
    ]!;
    expect(sftLoss.step).toEqual([1, 2]);
    expect(Object.keys(shown.learning.phaseTimes)).toContain('sft');
    const showText = spawnSync(process.execPath, [join(ROOT, 'bin/arbor.mjs'), 'show', runId], {
      cwd: ROOT,
      env: { ...process.env, ARBOR_HOME: engine.home },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(showText.stdout).toContain(`parent: story-e2e · SFT (${sftRun.id}), its SFT warm start: completed, ${sftSteps} SFT steps`);

    browser = await openBrowser();
    const { page } = browser;
    await page.goto(engine.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-runs').click();
    // (noWaitAfter: opening a run pushes its URL, a same-document navigation Playwright would wait on.)
    await page.locator(`[data-run-id="${runId}"] a`).first().click({ noWaitAfter: true });
    await page.getByTestId('run-summary').waitFor({ timeout: 60_000 });
    // Reload keeps the Run view (the run is in the URL).
    expect(page.url()).toContain(`#/run?id=${runId}`);
    await page.reload();
    await page.getByTestId('run-summary').waitFor({ timeout: 60_000 });
    expect(await page.getByTestId('view-run').locator('h2').first().innerText()).toBe('story-e2e');

    // The SFT warm start as the parent run, with its loss curve.
    const parent = page.getByTestId('run-parent');
    expect(await parent.getAttribute('data-parent-kind')).toBe('sft');
    await page.getByTestId('sft-parent-summary').waitFor();
    expect(await parent.innerText()).toMatch(
      /parent run: story-e2e · SFT · SFT warm start \(completed\): 2 steps, loss \S+ → \S+ · then RL \(this run\) to step 4/,
    );
    await parent.getByTestId('sft-curve').waitFor();
    expect(await page.getByTestId('phase-times').innerText()).toMatch(/wall time by phase: sft /);
    // The held-out table: the same columns, steps and numbers as arbor show (to the 4 significant digits shown).
    for (const c of held.columns) expect(await page.getByTestId(`heldout-col-${c.label.replace(/ /g, '-')}`).innerText()).toContain(`step ${c.step}`);
    for (const m of held.metrics) {
      const cells = numbersIn((await page.locator(`[data-testid="heldout-row"][data-metric="${m}"] td`).allInnerTexts()).join(' | '));
      const want = held.columns.map((c) => c.values[m]).filter((v): v is number => v !== undefined);
      expect(cells.length, m).toBe(want.length);
      cells.forEach((v, i) => expect(Math.abs(v - want[i]!), `${m} column ${i}`).toBeLessThanOrEqual(Math.abs(want[i]!) * 5e-4 + 1e-12));
    }
    await shot(page, 'view-run-story-summary');
    // The summary, the held-out table and the learning panel meet WCAG AA (the all-views test reads the views of runs without them).
    expect(await axeViolations(page), 'axe: Run view with its summary').toEqual([]);

    // The parent link opens the SFT run's own Run view (its loss chart, the RL run it began), whose link leads back.
    await page.getByTestId('run-parent-link').click({ noWaitAfter: true });
    await expect.poll(() => page.url()).toContain(`#/run?id=${sftRun.id}`);
    await expect.poll(() => page.getByTestId('view-run').locator('h2').first().innerText()).toBe('story-e2e · SFT');
    await page.locator('[data-testid="chart-sft/loss"]').waitFor({ timeout: 60_000 });
    expect(await page.getByTestId('sft-run-of').innerText()).toMatch(
      /SFT warm start: 2 steps, loss \S+ → \S+ · then RL in run story-e2e \(completed, step 4\)/,
    );
    expect(await page.getByTestId('run-progress').innerText()).toContain(`SFT · step ${sftSteps}`);
    await page.getByTestId('phase-times').waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('phase-times').innerText()).toMatch(/wall time by phase: sft /);
    // Its RL run resumes and forks it; it has no trajectories.
    for (const name of ['Resume', 'Fork…', 'Trajectories'])
      expect(await page.getByTestId('view-run').getByRole('button', { name }).isDisabled(), name).toBe(true);
    await shot(page, 'view-run-story-sft-run');
    expect(await axeViolations(page), 'axe: the SFT run\u2019s Run view').toEqual([]);
    await page.getByTestId('sft-child-link').click({ noWaitAfter: true });
    await expect.poll(() => page.getByTestId('view-run').locator('h2').first().innerText()).toBe('story-e2e');
    await page.getByTestId('learn-figures').waitFor({ timeout: 60_000 });

    // The learning panel: the flat share before dynamic sampling is groups/flat_fraction of the last step.
    const figures = await page.getByTestId('learn-figures').innerText();
    const flat = shown.metrics['groups/flat_fraction']!;
    expect(figures).toContain(`flat groups before dynamic sampling ${(flat * 100).toFixed(0)}%`);
    expect(figures).toMatch(/zero-variance groups in the trained batch/);
    // A stored dropped group opens in Trajectories (group view), flagged as dropped.
    expect(shown.learning.droppedSteps.length, 'dynamic sampling dropped flat groups (one token per turn: every group is all wrong)').toBeGreaterThan(0);
    await page.getByTestId('dropped-group').first().click({ noWaitAfter: true });
    await page.getByTestId('view-trajectories').waitFor();
    await expect.poll(() => page.getByTestId('dropped-flag').count()).toBeGreaterThan(0);
    const droppedStep = Number(await page.getByTestId('traj-step').inputValue());
    expect(shown.learning.droppedSteps.map((d) => d.step)).toContain(droppedStep);

    await shot(page, 'view-run-story-trajectories');
    expect(await axeViolations(page), 'axe: group view of a dropped group').toEqual([]);

    // Top-k on a step whose sampler was not kept (checkpoint.every 2 never saved step 1; keep 1
    // pruned step 2): the inspector names the checkpoint it used instead, and why.
    await page.getByTestId('traj-step').selectOption('2');
    await expect.poll(() => page.evaluate(() => window.location.hash)).toContain('step=2');
    // Off the group view (the dropped group opened it) by its switch: a count taken before the view
    // renders, then a key press, raced the render (and a key lands in the focused step select).
    await page.getByTestId('group-toggle').setChecked(false);
    await page.getByTestId('turns').waitFor();
    const token = page.locator('[data-testid="turns"] span.t[data-turn="1"]').first();
    await token.click();
    await page.getByTestId('inspector-topk-load').click();
    await page.getByTestId('inspector-topk').waitFor({ timeout: 60_000 });
    const trajectoryId = new URLSearchParams((await page.evaluate(() => window.location.hash)).split('?')[1]).get('sample')!;
    const tk = await engineRequest(engine, 'replay.topk', { trajectoryId, turn: 1, token: Number(await token.getAttribute('data-tok')), k: 8 });
    const used = (tk.result as { checkpoint: { step?: number; exact: boolean } }).checkpoint;
    expect(used.exact).toBe(false);
    const note = await page.getByTestId('inspector-topk-weights').innerText();
    expect(note).toContain(used.step === 0 ? 'the SFT checkpoint (step 0)' : `the step-${used.step} checkpoint`);
    expect(note).toContain('the checkpoint after step 1, which sampled step 2, was not kept');
    expect(note).not.toContain('the weights that sampled');
    await shot(page, 'view-run-story-topk');
    // This flat group's advantages are all 0: the channel says so instead of drawing a blank.
    await page.keyboard.press('Escape');
    await page.getByTestId('channel-advantage').click();
    expect(await page.getByTestId('channel-neutral').innerText()).toContain('every advantage is 0');
    expect(browser.errors).toEqual([]);
  });
});
