// The playground opens a checkpoint's run environment as training does (engine/tasks/open.ts):
// a short CLI run of the two-tool task (resources/configs/tools.yaml: lookup and calculator, the
// user files of resources/examples/tools-task) makes the checkpoint; in Chromium the playground
// chats with it and offers exactly the run's two tools, from the run's own files, and a turn of
// the chat calls one of them through the sandbox.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { engineRequest, openBrowser, ROOT, screenshotIfFailed, shot, startEngine, type Browser, type Engine } from './harness';

let engine: Engine | undefined;
let browser: Browser | undefined;

afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

/** `arbor <args>` in the engine's workspace; resolves with its output, rejects on a non-zero exit. */
function arbor(home: string, args: string[], timeoutMs = 150_000): Promise<string> {
  return new Promise((res, rej) => {
    const p = spawn(process.execPath, [join(ROOT, 'bin/arbor.mjs'), ...args], {
      cwd: ROOT,
      env: { ...process.env, ARBOR_HOME: home, ARBOR_YES: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.on('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) res(out);
      else rej(new Error(`arbor ${args.join(' ')} exited with ${code}:\n${out}`));
    });
  });
}

describe('playground: the run environment of a two-tool task checkpoint', () => {
  it("offers lookup and calculator from the run's own tool files, and one chat turn calls one", async () => {
    engine = await startEngine();
    // Enough SFT on the scripted expert for the tiny model to write Hermes tool calls (not to answer well).
    await arbor(engine.home, [
      'train',
      'resources/configs/tools.yaml',
      '--steps',
      '1',
      '--set',
      'sft.epochs=12',
      '--set',
      'sft.demos=128',
      '--set',
      'eval.n_questions=4',
      '--set',
      'eval.validation=8',
      '--set',
      'rollout.prompts_per_step=2',
      '--set',
      'rollout.n=2',
      '--set',
      'checkpoint.every=1',
    ]);
    const cks = (await engineRequest(engine, 'checkpoints.list')).result as { id: string; runId: string; step: number }[];
    const ck = cks.find((c) => c.step === 1);
    expect(ck, JSON.stringify(cks)).toBeDefined();

    browser = await openBrowser();
    const page = browser.page;
    await page.goto(engine.url);
    await page.getByTestId('nav-playground').click();
    await page.getByTestId('checkpoint-select').selectOption(ck!.id);
    await page.getByTestId('chat-input').fill('how old was the founder of the iron bridge guild when it was founded ?');
    await page.getByTestId('chat-send').click();
    // The tools the chat offered, each from the run's file.
    const tools = page.getByTestId('chat-tool');
    await expect.poll(() => tools.count(), { timeout: 90_000 }).toBe(2);
    expect(await tools.locator('b').allTextContents()).toEqual(['lookup', 'calculator']);
    const sources = await tools.evaluateAll((els) => els.map((e) => e.getAttribute('title')));
    expect(sources).toEqual([join(ROOT, 'resources/examples/tools-task/tools/lookup.ts'), join(ROOT, 'resources/examples/tools-task/tools/calculator.ts')]);
    // One turn called one of them, and the sandboxed tool answered.
    const calls = page.getByTestId('chat-tool-call');
    await expect.poll(() => calls.count()).toBeGreaterThan(0);
    expect(await calls.first().locator('b').textContent()).toMatch(/^(lookup|calculator)$/);
    const obs = page.getByTestId('chat-observation');
    await expect.poll(() => obs.count()).toBeGreaterThan(0);
    await shot(page, 'playground-tools');
    expect(browser.errors).toEqual([]);
  }, 240_000);
});
