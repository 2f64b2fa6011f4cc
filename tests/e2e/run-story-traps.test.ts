// The workbench's traps (issue 40): what used window.prompt() (which Electron does not implement:
// it throws, and the harness makes Chromium do the same) asks in an in-app dialog instead.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { newWorkspaceFile, openBrowser, screenshotIfFailed, startEngine, type Browser, type Engine } from './harness';

let engine: Engine | undefined;
let browser: Browser | undefined;
afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

describe('New tool / New reward / New MCP servers without window.prompt', () => {
  it('asks for the path in an in-app dialog (Escape cancels), creates and saves each kind of file', async () => {
    engine = await startEngine();
    browser = await openBrowser();
    const { page } = browser;
    await page.goto(engine.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    // window.prompt throws here, as in Electron.
    expect(
      await page.evaluate(() =>
        String(
          (() => {
            try {
              window.prompt('x');
              return 'returned';
            } catch (e) {
              return (e as Error).message;
            }
          })(),
        ),
      ),
    ).toMatch(/not be supported/);
    await page.getByTestId('nav-editor').click();
    await page.waitForFunction(() => !!(window as unknown as { __arborEditor?: unknown }).__arborEditor);

    // Escape closes the dialog without creating anything; focus is back on the button.
    await page.getByRole('button', { name: 'New tool', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'New tool file' });
    await dialog.waitFor();
    expect(await page.getByTestId('prompt-input').inputValue()).toBe('tools/my_tool.ts');
    expect(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.testid)).toBe('prompt-input');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('New tool');
    expect(await page.getByTestId('save-file').isDisabled()).toBe(true);

    const editorText = () => page.evaluate(() => (window as unknown as { __arborEditor: { getValue(): string } }).__arborEditor.getValue());
    for (const [button, path, marker] of [
      ['New tool', 'tools/story_tool.ts', /Tool/],
      ['New reward', 'rewards/story_reward.ts', /RewardFn/],
      ['New MCP servers', 'envs/story_mcp.json', /mcpServers/],
    ] as const) {
      await newWorkspaceFile(page, button, path);
      await expect.poll(editorText).toMatch(marker);
      await page.getByTestId('save-file').click();
      await expect.poll(() => page.getByTestId('env-file').locator('option').allInnerTexts()).toContainEqual(expect.stringContaining(path));
      const file = join(engine.home, 'workspace', path);
      expect(existsSync(file), file).toBe(true);
      expect(readFileSync(file, 'utf8')).toBe(await editorText());
    }
    // Enter submits; an empty path cannot be submitted.
    await page.getByRole('button', { name: 'New reward', exact: true }).click();
    await page.getByTestId('prompt-input').fill('   ');
    expect(await page.getByTestId('prompt-ok').isDisabled()).toBe(true);
    await page.getByTestId('prompt-input').fill('rewards/by_enter.ts');
    await page.keyboard.press('Enter');
    await page.getByTestId('prompt-dialog').waitFor({ state: 'detached' });
    expect(await page.locator('.mono.muted', { hasText: 'rewards/by_enter.ts' }).count()).toBe(1);
    expect(browser.errors).toEqual([]);
  });
});

describe('the New run form and the runs table', () => {
  it('shows the essentials with "advanced" collapsed, keeps Start in view, has one name field and closes on Escape', async () => {
    engine = await startEngine();
    browser = await openBrowser();
    const { page } = browser;
    await page.goto(engine.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-runs').click();
    await page.getByTestId('new-run').click();
    const dialog = page.getByRole('dialog', { name: 'Start a run' });
    await dialog.waitFor();
    await expect.poll(() => page.getByTestId('template-select').locator('option').count()).toBeGreaterThan(0);
    for (const t of await page
      .getByTestId('template-select')
      .locator('option')
      .evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value))) {
      await page.getByTestId('template-select').selectOption(t);
      // The essential part: steps (and model/task/algorithm fields where the template's schema has them); no other field is visible.
      await page.locator('[id="cfg-steps"]').waitFor();
      const visibleIds = await dialog.locator('[id^="cfg-"]').evaluateAll((els) => els.filter((e) => (e as HTMLElement).checkVisibility()).map((e) => e.id));
      expect(visibleIds.length, t).toBeLessThanOrEqual(6);
      for (const id of visibleIds)
        expect(['cfg-model.path', 'cfg-model.init', 'cfg-task.kind', 'cfg-task.dataset', 'cfg-algorithm.adv_estimator', 'cfg-steps'], t).toContain(id);
      // Start is on screen without scrolling, however long the form.
      const box = (await page.getByTestId('start-run').boundingBox())!;
      expect(box.y + box.height, t).toBeLessThanOrEqual(900);
      await page.getByTestId('launch-advanced').locator('summary').click();
      expect(await page.locator('[id="cfg-rollout.n"]').isVisible(), t).toBe(true);
      const box2 = (await page.getByTestId('start-run').boundingBox())!;
      expect(box2.y + box2.height, t).toBeLessThanOrEqual(900);
      // One "name" field: the run's.
      expect(await dialog.getByText('name', { exact: true }).count(), t).toBe(1);
      expect(await page.locator('[id="cfg-name"]').count(), t).toBe(0);
      // Every id in the form is unique (an essential field is not repeated under "advanced").
      const ids = await dialog.locator('[id]').evaluateAll((els) => els.map((e) => e.id));
      expect(new Set(ids).size, t).toBe(ids.length);
      await page.getByTestId('launch-advanced').locator('summary').click();
    }
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    expect(await page.evaluate(() => (document.activeElement as HTMLElement).dataset.testid)).toBe('new-run');
    expect(browser.errors).toEqual([]);
  });
});
