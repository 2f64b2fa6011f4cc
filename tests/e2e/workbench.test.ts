// The workbench in Chromium against a real engine (web mode), one fresh workspace per test.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  engineRequest,
  newWorkspaceFile,
  numbersIn,
  openBrowser,
  reviewShot,
  ROOT,
  screenshotIfFailed,
  startEngine,
  type Browser,
  type Engine,
} from './harness';

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

/** Store a small verl rollout dump through the engine's importer, so there are real stored trajectories. */
function seedVerlDump(home: string): void {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-e2e-verl-'));
  const rows = [0, 1, 2, 3].map((i) => ({
    input: `<|im_start|>user\nWho directed the film that won in ${2000 + i}?<|im_end|>\n<|im_start|>assistant\n`,
    output: `<search>film ${2000 + i} winner director</search>\n<answer>Director ${i % 2}</answer>`,
    gts: `Director ${i % 2 === 0 ? 0 : 9}`,
    score: i % 2 === 0 ? 1 : 0,
    step: 3,
  }));
  writeFileSync(join(dir, '3.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const r = spawnSync(process.execPath, [join(ROOT, 'bin/arbor.mjs'), 'import-verl', dir, '--name', 'verl-seed'], {
    cwd: ROOT,
    env: { ...process.env, ARBOR_HOME: home },
    encoding: 'utf8',
  });
  rmSync(dir, { recursive: true, force: true });
  if (r.status !== 0) throw new Error(`arbor import-verl failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
}

/** True when the engine answers `method` (it is registered by the area that provides it). */
async function available(method: string, params: unknown): Promise<boolean> {
  const r = await engineRequest(engine!, method, params);
  return r.error?.code !== 'unavailable' && r.error?.code !== 'unknown_method';
}

describe('workbench in web mode', () => {
  it('starts a short run from a template and its charts update live', async () => {
    const templates = (await engineRequest(engine!, 'templates.list')).result as { id: string }[];
    expect(templates.map((t) => t.id)).toContain('multihop');
    const { page, errors } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    // An empty workspace opens on the first-run page; the run list is one click away.
    await page.getByTestId('nav-runs').click();
    await page.getByTestId('new-run').click();
    const dialog = page.getByTestId('launch-dialog');
    await dialog.waitFor();
    expect(await page.getByTestId('template-select').locator('option').count()).toBeGreaterThan(0);
    await page.getByTestId('run-name').fill('e2e-short');
    await page.getByTestId('start-run').click();
    await page.getByTestId('view-run').waitFor();
    // The first chart appears with the first logged step; the point count grows as steps arrive.
    const chart = page.locator('[data-testid^="chart-"]').first();
    await chart.waitFor({ timeout: 120_000 });
    const points = chart.getByTestId('chart-points');
    const first = numbersIn(await points.innerText())[0];
    await page.waitForFunction(
      ([sel, n]) => {
        const el = document.querySelector(sel as string);
        const m = el?.textContent?.match(/^(\d+) pts/);
        return !!m && Number(m[1]) > (n as number);
      },
      ['[data-testid^="chart-"] [data-testid="chart-points"]', first],
      { timeout: 150_000 },
    );
    expect(await page.locator('canvas').count()).toBeGreaterThan(0);
    expect(errors.filter((e) => !/favicon/.test(e))).toEqual([]);
  });

  it('replays a stored trajectory with the keyboard and switches the colour channel', async () => {
    seedVerlDump(engine!.home);
    const { page } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-trajectories').click();
    const runSelect = page.getByTestId('traj-run');
    await runSelect.locator('option', { hasText: 'verl-seed' }).waitFor({ state: 'attached' });
    await runSelect.selectOption({ label: 'verl-seed' });
    await page.getByTestId('traj-header').waitFor();
    expect(await page.getByTestId('traj-row').count()).toBe(4);
    const turns = page.getByTestId('turn');
    expect(await turns.count()).toBeGreaterThan(1);
    const activeIndex = () =>
      page.evaluate(() => Number(document.querySelector('[data-testid="turn"][data-active="true"]')?.getAttribute('data-turn-index') ?? -1));
    expect(await activeIndex()).toBe(0);
    await page.keyboard.press('j');
    await expect.poll(activeIndex).toBe(1);
    await page.keyboard.press('k');
    await expect.poll(activeIndex).toBe(0);
    // ↓ opens the next sample
    const reward0 = await page.getByTestId('traj-reward').innerText();
    await page.keyboard.press('ArrowDown');
    await expect.poll(() => page.getByTestId('traj-reward').innerText()).not.toBe(reward0);
    const channel = page.getByTestId('channel-active');
    expect(await channel.innerText()).toBe('logprob');
    await page.keyboard.press('c');
    await expect.poll(() => channel.innerText()).toBe('entropy');

    // The run's notes and tags are saved to the workspace, and it exports from the run view.
    await page.getByTestId('nav-runs').click();
    await page.getByTestId('run-row').getByRole('link', { name: 'verl-seed' }).click();
    await page.getByTestId('view-run').waitFor();
    await page.getByTestId('run-notes').fill('imported from verl; rewards look inverted');
    await page.getByTestId('run-tags-edit').focus(); // leaving the notes saves them
    await expect.poll(() => page.getByTestId('run-notes-saved').innerText()).toBe('notes saved');
    await page.getByTestId('run-tags-edit').fill('imported, verl, check');
    await page.getByTestId('run-tags-edit').press('Enter');
    await expect.poll(() => page.getByTestId('run-notes-saved').innerText()).toBe('tags saved');
    await page.getByRole('button', { name: 'Export' }).click();
    await expect.poll(() => page.getByTestId('export-result').innerText()).toMatch(/exports\/.+\.trajectories\.jsonl \(4 trajectories\)/);
    await reviewShot(page, 'run-notes-export');
    await page.reload();
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-runs').click(); // the reload kept the Run view (URL state)
    const row = page.getByTestId('run-row').filter({ hasText: 'verl-seed' });
    await expect.poll(() => row.locator('.tag').allInnerTexts()).toEqual(['imported', 'verl', 'check']);
    await row.getByRole('link', { name: 'verl-seed' }).click();
    await expect.poll(() => page.getByTestId('run-notes').inputValue()).toBe('imported from verl; rewards look inverted');
  });

  it('scores a stored trajectory with a reward edited in Monaco', async () => {
    // No skip: an engine without the sandbox fails here, naming what is missing.
    expect(await available('sandbox.tryReward', { source: '', trajectoryId: '0' }), 'the engine registers sandbox.tryReward (engine/env/sandbox.ts)').toBe(
      true,
    );
    seedVerlDump(engine!.home);
    const { page } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    // Pick a stored trajectory id from the replay list.
    await page.getByTestId('nav-trajectories').click();
    await page.getByTestId('traj-run').locator('option', { hasText: 'verl-seed' }).waitFor({ state: 'attached' });
    await page.getByTestId('traj-run').selectOption({ label: 'verl-seed' });
    await page.getByTestId('traj-header').waitFor();
    const trajId = (await page.getByTestId('traj-header').locator('.mono').last().innerText()).trim();

    await page.getByTestId('nav-editor').click();
    await newWorkspaceFile(page, 'New reward', 'rewards/e2e_len.ts');
    await page.waitForFunction(() => !!(window as unknown as { __arborEditor?: unknown }).__arborEditor);
    const source = `export const reward = (e: { turns: string[] }) => 0.25 + e.turns.length;\n`;
    await page.evaluate((s) => (window as unknown as { __arborEditor: { setValue(v: string): void } }).__arborEditor.setValue(s), source);
    await page.getByTestId('try-trajectory').fill(trajId);
    await page.getByTestId('try-it').click();
    const result = page.getByTestId('try-result');
    await result.waitFor();
    expect(await result.getAttribute('class')).toContain('ok');
    const value = numbersIn(await result.innerText())[0];
    await reviewShot(page, 'editor-reward-scored');
    expect(value % 1).toBeCloseTo(0.25, 9);
    expect(value).toBeGreaterThan(1);
  });

  it('shows the error and its line when a tool throws', async () => {
    expect(await available('sandbox.tryTool', { source: '', args: {} }), 'the engine registers sandbox.tryTool (engine/env/sandbox.ts)').toBe(true);
    const { page } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await page.getByTestId('nav-editor').click();
    await newWorkspaceFile(page, 'New tool', 'tools/e2e_throws.ts');
    await page.waitForFunction(() => !!(window as unknown as { __arborEditor?: unknown }).__arborEditor);
    const source = [
      'export const tool = {',
      "  name: 'explode',",
      "  description: 'always fails',",
      "  parameters: { type: 'object', properties: { q: { type: 'string' } } },",
      '  async execute(args: { q?: string }) {',
      '    throw new Error(`no luck with ${args.q}`);',
      '  },',
      '};',
      '',
    ].join('\n');
    await page.evaluate((s) => (window as unknown as { __arborEditor: { setValue(v: string): void } }).__arborEditor.setValue(s), source);
    // The engine's type definitions are installed: no unresolved 'arbor/env', and a wrong type is flagged.
    const markers = () =>
      page.evaluate(() => {
        const w = window as unknown as { __arborMonaco: { editor: { getModelMarkers(o: object): { message: string }[] } } };
        return w.__arborMonaco.editor
          .getModelMarkers({})
          .map((m) => m.message)
          .join('\n');
      });
    await page.evaluate(
      (s) => (window as unknown as { __arborEditor: { setValue(v: string): void } }).__arborEditor.setValue(s),
      "import type { Tool } from 'arbor/env';\nexport const tool: Tool = { name: 7, description: 'd', parameters: {}, execute: () => ({ content: 'x', success: true }) };\n",
    );
    await expect.poll(markers, { timeout: 30_000 }).toMatch(/Type 'number' is not assignable to type 'string'/);
    expect(await markers()).not.toMatch(/Cannot find module 'arbor\/env'/);
    await page.evaluate((s) => (window as unknown as { __arborEditor: { setValue(v: string): void } }).__arborEditor.setValue(s), source);
    await page.getByTestId('try-args').fill('{"q":"zebra"}');
    await page.getByTestId('try-it').click();
    const result = page.getByTestId('try-result');
    await result.waitFor();
    expect(await result.getAttribute('class')).toContain('err');
    const text = await result.innerText();
    await reviewShot(page, 'editor-tool-error');
    expect(text).toContain('no luck with zebra');
    expect(text).toMatch(/line 6\b/);
  });
});

/** Set a generated form field by its config path (ids are `cfg-<dotted path>`). */
async function setField(page: Browser['page'], path: string, value: string) {
  const field = page.locator(`[id="cfg-${path}"]`);
  // Settings beyond the essentials are under the launch form's collapsed "advanced" part.
  const advanced = page.getByTestId('launch-advanced');
  if ((await advanced.count()) && !(await field.isVisible())) await advanced.evaluate((d) => ((d as HTMLDetailsElement).open = true));
  if (value === 'true' || value === 'false') await field.setChecked(value === 'true');
  else await field.fill(value);
}

async function startShortRun(page: Browser['page'], name: string, over: Record<string, string>) {
  await page.getByTestId('nav-runs').click();
  await page.getByTestId('new-run').click();
  await page.getByTestId('launch-dialog').waitFor();
  await page.getByTestId('run-name').fill(name);
  await page.getByTestId('run-tags').fill('e2e, short');
  const fields = {
    steps: '4',
    'rollout.prompts_per_step': '4',
    'rollout.n': '4',
    'checkpoint.every': '2',
    'eval.every': '2',
    'eval.n_questions': '8',
    ...over,
  };
  for (const [k, v] of Object.entries(fields)) await setField(page, k, v);
  await reviewShot(page, 'launch-form');
  await page.getByTestId('start-run').click();
  await page.getByTestId('view-run').waitFor();
}

describe('a short real run through every view', () => {
  it('trains two short runs from the template form, compares them, replays a trajectory and chats with a checkpoint', async () => {
    const { page, errors } = browser!;
    await page.goto(engine!.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();

    // A small SFT warm start first, so the RL steps see search calls, rewards and advantages.
    await startShortRun(page, 'tour-a', { 'sft.warm_start': 'true', 'sft.demos': '64', 'sft.epochs': '2' });
    await page.getByTestId('view-run').getByTestId('run-status').getByText('completed').waitFor({ timeout: 150_000 });
    await page.locator('[data-testid="chart-reward/mean"]').waitFor();
    await reviewShot(page, 'run-charts');
    for (const tab of ['config', 'log', 'checkpoints']) {
      await page.getByTestId(`tab-${tab}`).click();
      await reviewShot(page, `run-${tab}`);
    }
    await startShortRun(page, 'tour-b', { 'optim.lr': '0.003', steps: '2' });
    await page.getByTestId('view-run').getByTestId('run-status').getByText('completed').waitFor({ timeout: 150_000 });

    // Fork tour-b from its last checkpoint: the form comes prefilled, the fork starts from those weights.
    await page.getByTestId('tab-checkpoints').click();
    await page.getByRole('button', { name: 'Fork from here…' }).last().click();
    await page.getByTestId('launch-dialog').waitFor();
    expect(await page.getByTestId('run-name').inputValue()).toBe('tour-b-from-2');
    await setField(page, 'steps', '1');
    await page.getByTestId('start-run').click();
    await page.getByTestId('view-run').getByText('tour-b-from-2').waitFor();
    await page.getByTestId('view-run').getByTestId('run-status').getByText('completed').waitFor({ timeout: 150_000 });
    await page.getByTestId('tab-config').click();
    expect(await page.getByTestId('run-config').innerText()).toMatch(/"path": ".*checkpoints.*step-0+2"/);

    await page.getByTestId('nav-runs').click();
    // Three runs and tour-a's SFT warm start, its own run (tour-a's parent).
    await expect.poll(() => page.getByTestId('run-row').count()).toBe(4);
    await reviewShot(page, 'runs');
    expect(await page.getByTestId('run-row').filter({ hasText: 'tour-a · SFT' }).getByTestId('run-row-sft').count()).toBe(1);
    expect(await page.getByTestId('run-row-parent').allInnerTexts()).toEqual(expect.arrayContaining(['after SFT tour-a · SFT', 'from tour-b']));
    await page.getByTestId('run-filter').fill('tour-a');
    await expect.poll(() => page.getByTestId('run-row').count()).toBe(2);
    await page.getByTestId('run-filter').fill('');
    // tour-b and tour-a (not the fork, not the SFT run).
    for (const row of (await page.getByTestId('run-row').all()).slice(1))
      if (!(await row.getByTestId('run-row-sft').count())) await row.locator('input[type=checkbox]').check();
    await page.getByTestId('compare-selected').click();
    const diff = page.getByTestId('config-diff');
    await diff.waitFor();
    const diffText = await diff.innerText();
    expect(diffText).toContain('optim.lr');
    expect(diffText).toContain('steps');
    expect(diffText).not.toContain('rollout.n');
    await reviewShot(page, 'compare');

    await page.getByTestId('nav-trajectories').click();
    await page.getByTestId('traj-run').selectOption({ label: 'tour-a' });
    await page.getByTestId('traj-header').waitFor();
    await reviewShot(page, 'trajectories');
    // Keyboard on a real GRPO batch: ] / [ walk the group's samples, ↓ the list, j the turns, c the channel.
    const header = page.getByTestId('traj-header');
    const where = async () =>
      /group (\d+) · sample (\d+)/
        .exec(await header.innerText())!
        .slice(1)
        .map(Number);
    expect(await where()).toEqual([0, 0]);
    await page.keyboard.press(']');
    await expect.poll(where).toEqual([0, 1]);
    await page.keyboard.press('[');
    await expect.poll(where).toEqual([0, 0]);
    await page.keyboard.press('[');
    await expect.poll(where).toEqual([0, 3]); // wraps around the group of 4
    await page.keyboard.press('ArrowDown');
    await expect.poll(where).toEqual([1, 0]);
    await page.keyboard.press('j');
    await expect.poll(() => page.evaluate(() => document.querySelector('[data-testid="turn"][data-active="true"]')?.getAttribute('data-turn-index'))).toBe('1');
    await page.keyboard.press('c');
    await expect.poll(() => page.getByTestId('channel-active').innerText()).toBe('entropy');
    await page.keyboard.press('c');
    await expect.poll(() => page.getByTestId('channel-active').innerText()).toBe('advantage');
    // A token the model generated: the card has its sampling values.
    const tok = page.locator('[data-testid="turns"] span.t:not(.masked)').first();
    await tok.hover();
    await page.getByTestId('token-card').waitFor();
    const card = await page.getByTestId('token-card').innerText();
    expect(card).toMatch(/token\s/);
    expect(card).toMatch(/logprob\s+-\d+\.\d{4}/);
    expect(card).toMatch(/entropy\s+\d+\.\d{4}/);
    expect(card).toMatch(/advantage\s+-?\d+\.\d{4}/);
    expect(card).toMatch(/loss mask\s+1/);
    await reviewShot(page, 'token-card');
    await page.keyboard.press('g');
    await page.getByTestId('group-view').waitFor();
    await reviewShot(page, 'group');
    await page.keyboard.press('g');

    await page.getByTestId('nav-playground').click();
    await expect.poll(() => page.getByTestId('checkpoint-select').locator('option').count()).toBeGreaterThan(1);
    await page.getByTestId('chat-input').fill('where was the author of the book born ?');
    await page.getByTestId('chat-send').click();
    await page.getByTestId('chat-assistant').first().waitFor({ timeout: 60_000 });
    await expect.poll(() => page.getByTestId('chat-send').innerText(), { timeout: 60_000 }).toBe('Send');
    expect(await page.getByTestId('chat-world').innerText()).toMatch(/search \(built-in\).*world seed 1001/); // the run's tool; task.eval_seed default
    await reviewShot(page, 'playground');

    await page.getByTestId('nav-editor').click();
    await page.waitForFunction(() => !!(window as unknown as { __arborEditor?: unknown }).__arborEditor);
    await reviewShot(page, 'editor');
    expect(errors.filter((e) => !/favicon/.test(e))).toEqual([]);
  });
});
