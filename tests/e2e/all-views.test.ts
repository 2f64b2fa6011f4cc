// Every view reached from every other view, with no console error, no page error and no axe-core
// violation (WCAG 2.0/2.1 A and AA: contrast, names and labels; landmarks): Start, Runs, Run,
// Compare, Trajectories, Editor (with no file open, then with a file open) and Playground, on an
// empty workspace and then on one with runs, in one engine and one page.
//
// The four states: the fullest (runs in the workspace, a file open in the Editor) is walked through
// every ordered pair of views (an Eulerian circuit, 42 moves); the other three through every view
// from and back to the Editor (12 moves), so each view still mounts and unmounts in every state and
// every move into and out of the Editor is made in every state. (Before, all four states were walked
// through all 42 pairs, in two engines and two browsers: 168 moves against 78 now.) axe-core reads
// every view in the barest state and in the fullest. The Editor's text is typed into each time it is shown
// (Monaco's inline completions and markers start work on its model), since leaving an edited
// Editor is where Monaco threw when the text model was disposed before the editor.
//
// The workspace with runs also holds a scripted degeneration (tests/e2e/degeneration-run.ts): the
// Run view flags it at the step it starts and its link opens that step's trajectories; a click on a
// chart opens Trajectories at the step under the pointer (issue 40).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { axeViolations, engineRequest, openBrowser, reviewShot, screenshotIfFailed, startEngine, type Browser, type Engine } from './harness';
import { DEGENERATES_AT, seedDegeneratingRun } from './degeneration-run';

let engine: Engine | undefined;
let browser: Browser | undefined;

afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  await engine?.stop();
  browser = engine = undefined;
});

const VIEWS = ['start', 'runs', 'run', 'compare', 'trajectories', 'editor', 'playground'] as const;
type View = (typeof VIEWS)[number];
const SHOWN: Record<View, string> = {
  start: 'start-view',
  runs: 'view-runs',
  run: 'view-run',
  compare: 'view-compare',
  trajectories: 'view-trajectories',
  editor: 'view-editor',
  playground: 'view-playground',
};

/** A tour through every ordered pair of distinct views once (an Eulerian circuit of the complete directed graph), from `start`. */
function everyPair(views: readonly View[]): View[] {
  const out = new Map<View, View[]>(views.map((v) => [v, views.filter((w) => w !== v)]));
  const stack: View[] = [views[0]!];
  const tour: View[] = [];
  while (stack.length) {
    const v = stack[stack.length - 1]!;
    const next = out.get(v)!;
    if (next.length) stack.push(next.shift()!);
    else tour.push(stack.pop()!);
  }
  return tour.reverse();
}

/** Every view from the Editor and back: editor, a, editor, b, editor, … */
function throughEditor(views: readonly View[]): View[] {
  return ['editor', ...views.filter((v) => v !== 'editor').flatMap((v) => [v, 'editor' as View])];
}

/** A run in the workspace: a small verl rollout dump imported by the engine (`runs.importVerl`, what `arbor import-verl` asks). */
async function seedImportedRun(e: Engine): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-e2e-views-'));
  const rows = [0, 1, 2, 3].map((i) => ({
    input: `<|im_start|>user\nWhich river runs through city ${i}?<|im_end|>\n<|im_start|>assistant\n`,
    output: `<search>city ${i} river</search>\n<answer>River ${i % 2}</answer>`,
    gts: `River ${i % 2}`,
    score: i % 2 === 0 ? 1 : 0,
    step: 2,
  }));
  writeFileSync(join(dir, '2.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  try {
    const r = await engineRequest(e, 'runs.importVerl', { dir, name: 'views-run' });
    if (r.error) throw new Error(`runs.importVerl: ${r.error.message}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** axe-core violations per "state · view", collected over the whole test and asserted at its end (all of them in one report). */
const violations: Record<string, string[]> = {};

async function tour(b: Browser, seq: View[], label: string, opts: { axe?: boolean } = {}): Promise<number> {
  const { page, errors } = b;
  const checked = new Set<View>();
  let moves = 0;
  for (let i = 0; i < seq.length; i++) {
    const v = seq[i]!;
    await page.getByTestId(`nav-${v}`).click();
    const shown = page.getByTestId(SHOWN[v]);
    // The Run view without an opened run (the empty workspace) is its "open a run" note.
    await (v === 'run' ? shown.or(page.getByText('Open a run from the Runs table.')) : shown).waitFor();
    if (i > 0) moves++;
    if (v === 'editor') {
      // Touch the text: click into Monaco and type, so its model has pending work when the view is left.
      await page.waitForFunction(() => !!(window as unknown as { __arborEditor?: unknown }).__arborEditor);
      await page.locator('.monaco-editor .view-lines').first().click();
      // (insertText: one input event for the line, as an IME would send it; typing it key by key cost a round trip a character.)
      await page.keyboard.insertText(`// ${label} ${i}`);
      await page.keyboard.press('Enter');
    }
    // Entering or leaving the Editor: let Monaco's pending work surface its errors before the next move
    // (a view's own first loads that fail are caught by a later check: errors only accumulate).
    if (v === 'editor' || seq[i - 1] === 'editor') await page.waitForTimeout(150);
    expect(errors, `after ${seq[i - 1] ?? '(load)'} → ${v} (${label})`).toEqual([]);
    if (opts.axe && !checked.has(v)) {
      checked.add(v);
      await settle(page, v);
      const found = await axeViolations(page);
      if (found.length) violations[`${label} · ${v}`] = found;
      await reviewShot(page, `${label.replace(/\W+/g, '-')}-${v}`);
    }
  }
  return moves;
}

/** Wait for a view's data to be on screen before axe reads it (the Run view's charts, Trajectories' turns). */
async function settle(page: Page, v: View): Promise<void> {
  if (v === 'run' && (await page.getByTestId('view-run').count())) await page.locator('.chart canvas').first().waitFor();
  if (v === 'trajectories' && (await page.getByTestId('traj-row').count())) await page.getByTestId('turns').waitFor();
  if (v === 'editor') await page.locator('.monaco-editor .view-lines').first().waitFor();
}

async function openEditorFile(page: Page, home: string): Promise<void> {
  mkdirSync(join(home, 'workspace', 'tools'), { recursive: true });
  writeFileSync(join(home, 'workspace', 'tools', 'echo.ts'), "export const tool = { name: 'echo' };\n");
  await page.getByTestId('nav-editor').click();
  // The file list is read when the Editor opens: leave and come back until it lists the new file.
  await expect
    .poll(async () => {
      if (await page.getByTestId('env-file').locator('option', { hasText: 'tools/echo.ts' }).count()) return true;
      await page.getByTestId('nav-start').click();
      await page.getByTestId('nav-editor').click();
      return false;
    })
    .toBe(true);
  await page.getByTestId('env-file').selectOption('tools/echo.ts');
  await expect
    .poll(() => page.evaluate(() => (window as unknown as { __arborEditor: { getValue(): string } }).__arborEditor.getValue()))
    .toContain("name: 'echo'");
}

/** The scripted degeneration flagged at the step it starts, its link to that step's trajectories, and a chart click. */
async function degenerationAndChartClick(page: Page, runId: string): Promise<void> {
  await page.getByTestId('nav-runs').click();
  await page.locator(`[data-run-id="${runId}"] a`).first().click({ noWaitAfter: true });
  await page.getByTestId('learn-degeneration').waitFor();
  for (const kind of ['length_rising', 'truncation_rising', 'format_falling', 'repeated_ngrams'])
    expect(await page.getByTestId(`degeneration-${kind}`).getAttribute('data-step'), kind).toBe(String(DEGENERATES_AT));
  expect(await page.getByTestId('degeneration-length_rising').innerText()).toMatch(/response length rising/);
  await page.getByTestId('degeneration-length_rising').getByTestId('degeneration-open').click({ noWaitAfter: true });
  await page.getByTestId('view-trajectories').waitFor();
  await expect.poll(() => page.getByTestId('traj-step').inputValue()).toBe(String(DEGENERATES_AT));
  await page.getByTestId('turns').waitFor();
  await reviewShot(page, 'degeneration-trajectories');

  // A chart click: Trajectories at the step under the pointer (read from the chart's legend while
  // hovering), listed by the charted quantity (KL: by |KL|).
  await page.getByTestId('nav-run').click();
  const chart = page.getByTestId('chart-actor/kl');
  await chart.scrollIntoViewIfNeeded();
  const over = chart.locator('.u-over');
  const box = (await over.boundingBox())!;
  const x = box.x + box.width * 0.35;
  const y = box.y + box.height / 2;
  await page.mouse.move(x, y);
  const legendStep = chart.locator('.u-legend .u-series').first().locator('.u-value');
  await expect.poll(async () => Number(await legendStep.innerText())).toBeGreaterThan(1);
  const step = Number(await legendStep.innerText());
  expect(step).toBeLessThan(DEGENERATES_AT + 2);
  await page.mouse.down();
  await page.mouse.up();
  await page.getByTestId('view-trajectories').waitFor();
  await expect.poll(() => page.getByTestId('traj-step').inputValue()).toBe(String(step));
  expect(await page.evaluate(() => window.location.hash)).toContain(`step=${step}`);
  expect(await page.getByTestId('traj-sort').inputValue()).toBe('kl');
  await page.getByTestId('turns').waitFor();
  // A drag (uPlot's zoom) is not a click: the Run view stays.
  await page.getByTestId('nav-run').click();
  await over.scrollIntoViewIfNeeded();
  const box2 = (await over.boundingBox())!;
  await page.mouse.move(box2.x + box2.width * 0.2, box2.y + box2.height / 2);
  await page.mouse.down();
  await page.mouse.move(box2.x + box2.width * 0.6, box2.y + box2.height / 2, { steps: 4 });
  await page.mouse.up();
  await page.waitForTimeout(200);
  expect(await page.getByTestId('view-run').count()).toBe(1);
}

describe('every view from every other view, with no page or console error and no accessibility violation', () => {
  it('on an empty workspace, then on one with runs (a scripted degeneration flagged at its step; a chart click opens its step)', async () => {
    // The engine and the browser start together (each is assigned as it comes, so afterEach closes what started).
    await Promise.all([startEngine().then((e) => (engine = e)), openBrowser().then((b) => (browser = b))]);
    if (!engine || !browser) throw new Error('engine or browser did not start');
    const { page, errors } = browser;
    await page.goto(engine.url);
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    const pairs = everyPair(VIEWS);
    const star = throughEditor(VIEWS);
    const all = VIEWS.length * (VIEWS.length - 1);
    const starMoves = 2 * (VIEWS.length - 1);

    expect(await tour(browser, star, 'empty, no file open', { axe: true })).toBe(starMoves);
    await openEditorFile(page, engine.home);
    expect(await tour(browser, star, 'empty, tools/echo.ts open')).toBe(starMoves);

    // Runs in the workspace: an imported verl dump and the scripted degeneration. A reload shows them (and closes the file).
    await seedImportedRun(engine);
    const degen = await seedDegeneratingRun(engine.home);
    await page.reload();
    await page.getByTestId('engine-status').getByText('connected').waitFor();
    await degenerationAndChartClick(page, degen);
    expect(await tour(browser, star, 'with runs, no file open')).toBe(starMoves);
    await openEditorFile(page, engine.home);
    expect(await tour(browser, pairs, 'with runs, tools/echo.ts open', { axe: true })).toBe(all);
    expect(errors).toEqual([]);
    expect(violations).toEqual({});
  });
});
