// Workbench behaviours that need only the engine core: workspace files saved from the editor,
// engine errors shown readably, a lost engine shown as a banner that clears on restart, and a
// corrupted workspace database answered with an offer to open another.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { newWorkspaceFile, openBrowser, reviewShot, ROOT, screenshotIfFailed, startEngine, type Browser, type Engine } from './harness';
import { createEngine } from '../../engine/server/engine';
import { serveWebSocket, type WebServer } from '../../engine/server/transports';

let engine: Engine | undefined;
let browser: Browser | undefined;
afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

const setEditor = (page: Browser['page'], text: string) =>
  page.evaluate((s) => (window as unknown as { __arborEditor: { setValue(v: string): void } }).__arborEditor.setValue(s), text);

describe('workspace files and engine errors', () => {
  it('saves a tool from Monaco into the workspace, lists and reopens it; a bad path shows the engine error', async () => {
    engine = await startEngine();
    browser = await openBrowser();
    const { page } = browser;
    await page.goto(engine.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    // the access token was for the first load only: replaced out of the address bar (and its history entry)
    expect(engine.url).toContain('token=');
    expect(page.url()).not.toContain('token=');
    await page.getByTestId('nav-editor').click();
    await page.waitForFunction(() => !!(window as unknown as { __arborEditor?: unknown }).__arborEditor);

    await newWorkspaceFile(page, 'New tool', 'tools/echo.ts');
    const source =
      "export const tool = { name: 'echo', description: 'echo', parameters: { type: 'object' }, execute: (a: { q: string }) => ({ content: a.q, success: true }) };\n";
    await setEditor(page, source);
    await page.getByTestId('save-file').click();
    await expect.poll(() => page.getByTestId('env-file').locator('option').allInnerTexts()).toContain('tool: tools/echo.ts');
    expect(readFileSync(join(engine.home, 'workspace', 'tools', 'echo.ts'), 'utf8')).toBe(source);

    // A fresh page reads it back from the engine.
    await page.reload();
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-editor').click();
    await page.waitForFunction(() => !!(window as unknown as { __arborEditor?: unknown }).__arborEditor);
    await page.getByTestId('env-file').locator('option', { hasText: 'tools/echo.ts' }).waitFor({ state: 'attached' });
    await page.getByTestId('env-file').selectOption('tools/echo.ts');
    await expect.poll(() => page.evaluate(() => (window as unknown as { __arborEditor: { getValue(): string } }).__arborEditor.getValue())).toBe(source);

    // The engine refuses paths outside tools/, rewards/, envs/; the UI shows its message.
    await newWorkspaceFile(page, 'New tool', '../outside.ts');
    await page.getByTestId('save-file').click();
    const err = page.getByTestId('errors');
    await err.waitFor();
    expect(await err.innerText()).toMatch(/Saving \.\.\/outside\.ts:[\s\S]*must be inside tools\/, rewards\/ or envs\//);
  });
});

describe('engine lost and back', () => {
  it('shows a banner while the engine is down and reloads when it returns on the same address', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-e2e-home-'));
    const staticDir = join(ROOT, 'renderer', 'dist');
    let core = await createEngine({ home });
    let web: WebServer = await serveWebSocket(core, { port: 0, staticDir });
    const { port, token } = web;
    browser = await openBrowser();
    const { page } = browser;
    try {
      await page.goto(web.url);
      await page.getByTestId('engine-status').getByText('connected').waitFor();
      expect(await page.getByTestId('crash-banner').count()).toBe(0);

      await web.close();
      core.close();
      await page.getByTestId('crash-banner').waitFor();
      expect(await page.getByTestId('crash-banner').innerText()).toMatch(/Lost the connection to the engine/);

      core = await createEngine({ home });
      web = await serveWebSocket(core, { port, token, staticDir });
      await page.getByTestId('engine-status').getByText('connected').waitFor({ timeout: 20_000 });
      await expect.poll(() => page.getByTestId('crash-banner').count()).toBe(0);
      expect(
        await page.evaluate(
          () => (window as unknown as { __arborStore: { getState(): { connection: { reconnects: number } } } }).__arborStore.getState().connection.reconnects,
        ),
      ).toBe(1);
    } finally {
      await web.close();
      core.close();
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('a corrupted workspace database: the engine stays up, the page says which file and why, and opens another workspace', async () => {
    const home = mkdtempSync(join(tmpdir(), 'arbor-e2e-home-'));
    const bad = join(home, 'arbor.db');
    const damaged = Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(4096, 0x33)]);
    writeFileSync(bad, damaged);
    const core = await createEngine({ home });
    const web = await serveWebSocket(core, { port: 0, staticDir: join(ROOT, 'renderer', 'dist') });
    browser = await openBrowser();
    const { page } = browser;
    try {
      await page.goto(web.url);
      await page.getByTestId('engine-status').getByText('connected').waitFor();
      const banner = page.getByTestId('workspace-banner');
      await banner.waitFor();
      expect(await banner.innerText()).toContain(bad);
      await reviewShot(page, 'workspace-banner');
      const fresh = join(home, 'fresh.db');
      await page.getByTestId('workspace-path').fill(fresh);
      await page.getByTestId('workspace-open').click();
      await expect.poll(() => banner.count()).toBe(0);
      // An empty workspace opens on the first-run page; the runs view has the launch button.
      await page.getByTestId('nav-runs').click();
      await page.getByTestId('new-run').click(); // templates load from the new workspace
      await expect.poll(() => page.getByTestId('template-select').locator('option').count()).toBeGreaterThan(0);
      expect(existsSync(fresh)).toBe(true);
      expect(readFileSync(bad).equals(damaged)).toBe(true); // the damaged file is left as it was
    } finally {
      await web.close();
      core.close();
      rmSync(home, { recursive: true, force: true });
    }
  });
});
