// Every view reached from every other view, with no console error and no page error: Start, Runs,
// Run, Compare, Trajectories, Editor (with no file open, then with a file open) and Playground, on
// an empty workspace and on one with a run. The Editor's text is typed into each time it is shown
// (Monaco's inline completions and markers start work on its model), since leaving an edited
// Editor is where Monaco threw when the text model was disposed before the editor.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { openBrowser, ROOT, screenshotIfFailed, startEngine, type Browser, type Engine } from './harness';

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

/** A run in the workspace: a small verl rollout dump through `arbor import-verl` (stored metrics and trajectories). */
function seedRun(home: string): void {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-e2e-views-'));
  const rows = [0, 1, 2, 3].map((i) => ({
    input: `<|im_start|>user\nWhich river runs through city ${i}?<|im_end|>\n<|im_start|>assistant\n`,
    output: `<search>city ${i} river</search>\n<answer>River ${i % 2}</answer>`,
    gts: `River ${i % 2}`,
    score: i % 2 === 0 ? 1 : 0,
    step: 2,
  }));
  writeFileSync(join(dir, '2.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const r = spawnSync(process.execPath, [join(ROOT, 'bin/arbor.mjs'), 'import-verl', dir, '--name', 'views-run'], {
    cwd: ROOT,
    env: { ...process.env, ARBOR_HOME: home },
    encoding: 'utf8',
  });
  rmSync(dir, { recursive: true, force: true });
  if (r.status !== 0) throw new Error(`arbor import-verl failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
}

async function tour(b: Browser, label: string): Promise<number> {
  const { page, errors } = b;
  const seq = everyPair(VIEWS);
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
      await page.keyboard.type(`// ${label} ${i}\n`);
    }
    // Let pending work (the editor's, a view's first loads) surface its errors before the next move.
    await page.waitForTimeout(150);
    expect(errors, `after ${seq[i - 1] ?? '(load)'} → ${v} (${label})`).toEqual([]);
  }
  return moves;
}

async function visitAll(withRun: boolean) {
  engine = await startEngine();
  if (withRun) seedRun(engine.home);
  browser = await openBrowser();
  const { page, errors } = browser;
  await page.goto(engine.url);
  await page.getByTestId('engine-status').getByText('connected').waitFor();
  if (withRun) {
    // The run opened, so Run, Compare and Trajectories show it.
    await page.getByTestId('nav-runs').click();
    await page.getByTestId('run-row').getByRole('link', { name: 'views-run' }).click();
    await page.getByTestId('view-run').waitFor();
  }
  const label = withRun ? 'with a run' : 'empty';
  expect(await tour(browser, `${label}, no file open`)).toBe(VIEWS.length * (VIEWS.length - 1));
  // Then with a file open in the Editor: a tool file of the workspace.
  mkdirSync(join(engine.home, 'workspace', 'tools'), { recursive: true });
  writeFileSync(join(engine.home, 'workspace', 'tools', 'echo.ts'), "export const tool = { name: 'echo' };\n");
  await page.getByTestId('nav-editor').click();
  await page.getByTestId('env-file').locator('option', { hasText: 'tools/echo.ts' }).waitFor({ state: 'attached' });
  await page.getByTestId('env-file').selectOption('tools/echo.ts');
  await expect
    .poll(() => page.evaluate(() => (window as unknown as { __arborEditor: { getValue(): string } }).__arborEditor.getValue()))
    .toContain("name: 'echo'");
  expect(await tour(browser, `${label}, tools/echo.ts open`)).toBe(VIEWS.length * (VIEWS.length - 1));
  expect(errors).toEqual([]);
}

describe('every view from every other view, with no page or console error', () => {
  it('on an empty workspace', async () => {
    await visitAll(false);
  });

  it('on a workspace with a run', async () => {
    await visitAll(true);
  });
});
