// The first-run page: an empty workspace opens on it; it says what Arbor is, where the workspace
// lives, starts the demo as a live workbench run, and leads to the editor.
import { afterEach, describe, expect, it } from 'vitest';
import { engineRequest, openBrowser, screenshotIfFailed, shot, startEngine, type Browser, type Engine } from './harness';

let engine: Engine | undefined;
let browser: Browser | undefined;
afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

describe('first-run page', () => {
  it('opens on an empty workspace, runs the demo live, and leads to the editor', async () => {
    engine = await startEngine();
    browser = await openBrowser();
    const { page } = browser;
    await page.goto(engine.url);
    const start = page.getByTestId('start-view');
    await start.waitFor();
    expect(await start.innerText()).toMatch(/reinforcement learning on one machine/);
    expect(await page.getByTestId('start-workspace').innerText()).toContain(`${engine.home}/arbor.db`);
    if (process.env.ARBOR_E2E_SHOTS === '1') await shot(page, 'view-start');

    await page.getByTestId('start-demo').click();
    const view = page.getByTestId('view-run');
    await view.getByTestId('run-status').getByText('running').waitFor({ timeout: 60_000 });
    // Live: the SFT warm start, recorded as its own run (the demo run's parent), reaches the page while
    // the run goes on: its loss in the run summary.
    await view.getByTestId('sft-parent-summary').waitFor({ timeout: 120_000 });
    expect(await view.getByTestId('run-progress').innerText()).toMatch(/^SFT · step \d+/);
    expect(await view.getByTestId('run-parent').innerText()).toContain('then RL (this run), after it');
    expect(await view.locator('.empty').innerText()).toContain('the SFT warm start trains first, in its own run');
    if (process.env.ARBOR_E2E_SHOTS === '1') await shot(page, 'view-run-sft-live');
    type Row = { id: string; name: string; template: string; status: string; parentId?: string };
    const list = async () => (await engineRequest(engine!, 'runs.list')).result as Row[];
    const runs = await list();
    expect(runs).toHaveLength(2);
    const demo = runs.find((r) => r.template === 'demo')!;
    expect(demo).toMatchObject({ name: 'demo' });
    const sft = runs.find((r) => r.id === demo.parentId)!;
    expect(sft).toMatchObject({ name: 'demo · SFT', template: 'sft' });
    // Pause holds the trainer before its next step; Resume lets it go on.
    await view.getByRole('button', { name: 'Pause' }).click();
    await view.getByTestId('run-status').getByText('paused').waitFor({ timeout: 60_000 });
    await view.getByRole('button', { name: 'Resume' }).click();
    await view.getByTestId('run-status').getByText('running').waitFor({ timeout: 60_000 });
    await view.getByRole('button', { name: 'Stop' }).click();
    await view.getByTestId('run-status').getByText('stopped').waitFor({ timeout: 120_000 });
    // A stop during SFT stops the SFT run too (a resume of the demo run continues it).
    expect((await list()).find((r) => r.id === sft.id)!.status).toBe('stopped');

    // Back on the first-run page, "Open the editor" leads to the environment editor.
    await page.getByTestId('nav-start').click();
    await page.getByTestId('start-editor').click();
    await page.waitForFunction(() => !!(window as unknown as { __arborEditor?: unknown }).__arborEditor);
    expect(browser.errors.filter((e) => !/favicon/.test(e))).toEqual([]);
  });
});
