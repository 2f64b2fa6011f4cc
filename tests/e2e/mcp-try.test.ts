// The editor's try-it for MCP servers in the browser against `arbor serve`: a workspace file
// envs/mcp.json in the mcpServers layout (the test MCP server of tests/engine/interop) opens in
// Monaco as JSON; "List tools" shows the servers' tools and the picked tool's schema; "Call tool"
// runs one call with JSON arguments through mcp.tryTool; an isError result shows as an error.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openBrowser, reviewShot, ROOT, screenshotIfFailed, startEngine, type Browser, type Engine } from './harness';

let engine: Engine | undefined;
let browser: Browser | undefined;
afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

describe('editor try-it for MCP servers', () => {
  it('lists an MCP server file’s tools with schemas, calls one and shows an isError result as an error', async () => {
    engine = await startEngine();
    const server = join(ROOT, 'tests/engine/interop/fixtures/test-mcp-server.mjs');
    mkdirSync(join(engine.home, 'workspace', 'envs'), { recursive: true });
    writeFileSync(
      join(engine.home, 'workspace', 'envs', 'mcp.json'),
      JSON.stringify({ mcpServers: { test: { command: process.execPath, args: [server], tools: ['add', 'fail', 'sleep'] } } }, null, 2),
    );
    browser = await openBrowser();
    const { page } = browser;
    await page.goto(engine.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-editor').click();
    await page.waitForFunction(() => !!(window as unknown as { __arborEditor?: unknown }).__arborEditor);
    await page.getByTestId('env-file').locator('option', { hasText: 'envs/mcp.json' }).waitFor({ state: 'attached' });
    await page.getByTestId('env-file').selectOption('envs/mcp.json');
    await page.getByTestId('mcp-list').waitFor();
    // Monaco reads the file as JSON.
    await expect
      .poll(() =>
        page.evaluate(() => (window as unknown as { __arborEditor: { getModel(): { getLanguageId(): string } } }).__arborEditor.getModel().getLanguageId()),
      )
      .toBe('json');

    await page.getByTestId('mcp-list').click();
    // The try-it asks like everything else that starts a program (issue 37); approved once, remembered.
    await page.getByTestId('consent-dialog').waitFor();
    expect(await page.getByTestId('consent-items').innerText()).toContain('test-mcp-server.mjs');
    await page.getByTestId('consent-approve').click();
    await page.getByTestId('mcp-tools').waitFor();
    expect(await page.getByTestId('mcp-tools').innerText()).toMatch(/add[\s\S]*Add two numbers[\s\S]*fail[\s\S]*sleep/);
    expect(await page.getByTestId('try-result').innerText()).toMatch(/✓ 3 tools: add, fail, sleep/);
    const schema = JSON.parse(await page.getByTestId('mcp-schema').innerText());
    expect(schema).toMatchObject({ properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] });
    expect(await page.getByTestId('try-args').inputValue()).toBe('{"a":0,"b":0}');

    await page.getByTestId('try-args').fill('{"a": 19, "b": 23}');
    await page.getByTestId('try-it').click();
    await expect.poll(() => page.getByTestId('try-result').innerText()).toMatch(/^✓ 42/);
    await reviewShot(page, 'editor-mcp-try');
    // TypeScript does not check the JSON file (no stale diagnostics from the TS model it replaced).
    const owners = await page.evaluate(() =>
      (window as unknown as { __arborMonaco: { editor: { getModelMarkers(f: object): { owner: string }[] } } }).__arborMonaco.editor
        .getModelMarkers({})
        .map((m) => m.owner),
    );
    expect(owners.filter((o) => o === 'typescript')).toEqual([]);

    await page.getByTestId('mcp-tool-fail').click();
    expect(await page.getByTestId('mcp-tool').inputValue()).toBe('fail');
    await page.getByTestId('try-args').fill('{"why": "not today"}');
    await page.getByTestId('try-it').click();
    await expect.poll(() => page.getByTestId('try-result').innerText()).toMatch(/^✗ [\s\S]*refused: not today/);
    expect(browser.errors).toEqual([]);
  });
});
