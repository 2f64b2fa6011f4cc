// The model picker: the launch form lists a model placed in a fixture Hugging Face cache (the
// huggingface_hub layout: a blob, a relative snapshot link, refs/main), and "Download…" pulls
// another from a mock Hub with its progress in the page; cancelled midway it resumes from the
// partial blob, and ends with the model selected in the form.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { initModelFolder } from '../../engine/cli/commands/init-model';
import { commitOf, gitBlobSha1, MockHub, sha256 } from '../engine/hub/mock-hub';
import { openBrowser, screenshotIfFailed, startEngine, type Browser, type Engine } from './harness';

let engine: Engine | undefined;
let browser: Browser | undefined;
let hub: MockHub | undefined;

afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  await hub?.stop();
  browser = engine = hub = undefined;
});

/** A model folder written into a cache as huggingface_hub would: blobs by ETag, a relative link per file, refs/main. */
function placeInCache(cache: string, repoId: string, folder: string): void {
  const repo = join(cache, `models--${repoId.replace('/', '--')}`);
  const commit = commitOf(repoId);
  mkdirSync(join(repo, 'blobs'), { recursive: true });
  mkdirSync(join(repo, 'snapshots', commit), { recursive: true });
  mkdirSync(join(repo, 'refs'));
  for (const f of readdirSync(folder)) {
    const content = readFileSync(join(folder, f));
    const etag = f.endsWith('.safetensors') ? sha256(content) : gitBlobSha1(content);
    writeFileSync(join(repo, 'blobs', etag), content);
    symlinkSync(`../../blobs/${etag}`, join(repo, 'snapshots', commit, f));
  }
  writeFileSync(join(repo, 'refs', 'main'), commit);
}

describe('model picker', () => {
  it('lists a cached model in the launch form, and a pull from the mock Hub shows progress, cancels, resumes and ends selectable', async () => {
    const model = mkdtempSync(join(tmpdir(), 'arbor-e2e-model-'));
    await initModelFolder(model, { task: 'multihop', seed: 0 });
    const cache = mkdtempSync(join(tmpdir(), 'arbor-e2e-hf-'));
    placeInCache(cache, 'acme/fixture', model);
    hub = await new MockHub().start();
    const files = readdirSync(model).map((f) => ({ path: f, content: readFileSync(join(model, f)), lfs: f.endsWith('.safetensors') }));
    hub.add({ id: 'acme/pulled', commit: commitOf('acme/pulled'), files });
    const weights = files.find((f) => f.lfs)!;
    // The weights stop midway (the connection stays open): the page shows the bytes so far.
    const cut = Math.floor(weights.content.length / 2);
    hub.stallAfter.set(sha256(weights.content), cut);

    engine = await startEngine({ HF_HUB_CACHE: cache, HF_ENDPOINT: hub.endpoint });
    browser = await openBrowser();
    const { page, errors } = browser;
    await page.goto(engine.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-runs').click();
    await page.getByTestId('new-run').click();
    await page.getByTestId('launch-dialog').waitFor();
    const select = page.getByTestId('launch-model-select');
    await expect
      .poll(async () => (await select.locator('option').allTextContents()).join('\n'), { timeout: 30_000 })
      .toMatch(/acme\/fixture — Qwen2ForCausalLM/);
    await select.selectOption('acme/fixture');
    await expect.poll(() => page.getByTestId('launch-model-chosen').innerText()).toMatch(/^acme\/fixture: Qwen2ForCausalLM/);

    await page.getByTestId('launch-model-download').click();
    await page.getByTestId('launch-model-repo').fill('acme/pulled');
    await page.getByTestId('launch-model-pull-start').click();
    const progress = page.getByTestId('launch-model-progress');
    await expect.poll(() => progress.innerText(), { timeout: 60_000 }).toMatch(/download model\.safetensors: .* of .* \(\d+%\), .*\/s, files \d+\/\d+/);
    await page.getByTestId('launch-model-bar').waitFor();
    await page.getByTestId('launch-model-cancel').click();
    await expect.poll(() => progress.innerText(), { timeout: 30_000 }).toMatch(/cancelled; Resume continues where it stopped/);
    hub.log.length = 0;
    await page.getByTestId('launch-model-pull-start').click(); // "Resume"
    await expect.poll(() => select.inputValue(), { timeout: 60_000 }).toBe('acme/pulled');
    // The resumed pull asked the file storage for the rest only.
    expect(hub.requests('cdn').map((q) => q.range)).toEqual([`bytes=${cut}-`]);
    expect(await page.getByTestId('launch-model-chosen').innerText()).toMatch(/^acme\/pulled: Qwen2ForCausalLM/);
    expect(errors.filter((e) => !/favicon/.test(e))).toEqual([]);
  });
});
