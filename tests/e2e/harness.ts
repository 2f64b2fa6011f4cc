// E2E fixtures: a real engine (`arbor serve --port 0`) with a fresh ARBOR_HOME per test, and
// Debian's Chromium driven by playwright-core with a fresh profile. Screenshots of failing
// tests land in test-results/.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { createClient, EngineError, webSocketTransport } from '../../engine/server/client';

export const ROOT = resolve(import.meta.dirname, '../..');
export const CHROMIUM = process.env.ARBOR_CHROMIUM ?? '/usr/bin/chromium';

export interface Engine {
  url: string;
  home: string;
  proc: ChildProcess;
  output: () => string;
  stop(): Promise<void>;
}

/** Start `arbor serve` on a free port with a fresh workspace; resolves with the printed URL (with token). */
export async function startEngine(env: Record<string, string> = {}): Promise<Engine> {
  const home = mkdtempSync(join(tmpdir(), 'arbor-e2e-home-'));
  const proc = spawn(process.execPath, [join(ROOT, 'bin/arbor.mjs'), 'serve', '--port', '0'], {
    cwd: ROOT,
    env: { ...process.env, ARBOR_HOME: home, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const url = await new Promise<string>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`arbor serve printed no URL within 60 s:\n${out}`)), 60_000);
    const check = () => {
      const m = /(http:\/\/127\.0\.0\.1:\d+\/\S*token=[\w-]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        res(m[1]);
      }
    };
    proc.stdout!.on('data', check);
    proc.stderr!.on('data', check);
    proc.on('exit', (code) => {
      clearTimeout(timer);
      rej(new Error(`arbor serve exited with code ${code}:\n${out}`));
    });
  });
  return {
    url,
    home,
    proc,
    output: () => out,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (proc.exitCode === null) proc.kill('SIGKILL');
      }
      rmSync(home, { recursive: true, force: true });
    },
  };
}

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** console errors and page errors seen so far */
  errors: string[];
  close(): Promise<void>;
}

export async function openBrowser(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'arbor-e2e-profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1440, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  // As in Electron, which does not implement window.prompt() and throws when it is called: the
  // workbench must ask its questions in its own dialogs (renderer/src/components/Modal.tsx, PromptDialog.tsx).
  await context.addInitScript(() => {
    window.prompt = () => {
      throw new Error('prompt() is and will not be supported.');
    };
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}${process.env.ARBOR_E2E_STACKS === '1' ? `\n${e.stack}` : ''}`));
  page.on('console', (m) => m.type() === 'error' && errors.push(`console: ${m.text()}`));
  return {
    context,
    page,
    errors,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Save a full-page screenshot under test-results/ when the test has failed. Call it from
 * afterEach BEFORE closing the browser: vitest runs onTestFailed hooks after afterEach, when
 * the page is already gone.
 */
export async function screenshotIfFailed(
  ctx: { task: { name: string; result?: { state?: string } } },
  page: Page | undefined,
  errors: string[] = [],
): Promise<void> {
  if (!page || ctx.task.result?.state !== 'fail') return;
  await shot(page, `FAILED-${ctx.task.name}`);
  // What the page logged is often the reason (a render error leaves a blank page).
  if (errors.length) console.error(`page errors in "${ctx.task.name}":\n${errors.join('\n')}`);
}

/** A full-page screenshot under test-results/<name>.png (always on failure; on success with ARBOR_E2E_SHOTS=1, for looking at every view). */
export async function shot(page: Page, name: string): Promise<void> {
  const dir = join(ROOT, 'test-results');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name.replace(/[^\w-]+/g, '_').slice(0, 120)}.png`), fullPage: true }).catch(() => {});
}

/** A screenshot for review, only when ARBOR_E2E_SHOTS=1. */
export async function reviewShot(page: Page, name: string): Promise<void> {
  if (process.env.ARBOR_E2E_SHOTS === '1') await shot(page, `view-${name}`);
}

/** Click an Editor "New …" button and answer its in-app path dialog. */
export async function newWorkspaceFile(page: Page, button: 'New tool' | 'New reward' | 'New MCP servers', path: string): Promise<void> {
  await page.getByRole('button', { name: button, exact: true }).click();
  const dialog = page.getByTestId('prompt-dialog');
  await dialog.getByTestId('prompt-input').fill(path);
  await dialog.getByTestId('prompt-ok').click();
  await dialog.waitFor({ state: 'detached' });
}

/** Numbers shown in a locator's text, e.g. "12 pts · last 0.53" → [12, 0.53]. */
export function numbersIn(text: string): number[] {
  return (text.match(/-?\d+(\.\d+)?(e-?\d+)?/g) ?? []).map(Number);
}

/** One protocol request to the engine from the test process, through the protocol client the renderer and the CLI use. */
export async function engineRequest(
  engine: Engine,
  method: string,
  params?: unknown,
): Promise<{ result?: unknown; error?: { message: string; code?: string } }> {
  const { WebSocket } = await import('ws');
  const u = new URL(engine.url);
  const transport = webSocketTransport(`ws://${u.host}/ws?token=${u.searchParams.get('token')}`, WebSocket as unknown as typeof globalThis.WebSocket, {
    reconnect: false,
  });
  const client = createClient(transport);
  try {
    return { result: await (client.request as (m: string, p?: unknown) => Promise<unknown>)(method, params) };
  } catch (e) {
    if (e instanceof EngineError && e.code !== 'bad_result' && e.code !== 'disconnected') return { error: { message: e.message, code: e.code } };
    throw e;
  } finally {
    client.close();
  }
}

/** The axe-core rules the workbench is held to: WCAG 2.0/2.1 A and AA (contrast, names and labels, …) and the landmark rules. */
export const AXE_RULES = {
  runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
  rules: {
    region: { enabled: true },
    'landmark-one-main': { enabled: true },
    'landmark-unique': { enabled: true },
    'landmark-no-duplicate-main': { enabled: true },
    'landmark-main-is-top-level': { enabled: true },
    'landmark-complementary-is-top-level': { enabled: true },
    'landmark-banner-is-top-level': { enabled: true },
  },
} as const;

/**
 * axe-core's violations on the page as it is now, one line per rule and element ("rule: target —
 * summary"). axe's source is evaluated in the page (page.evaluate is not subject to the page's CSP).
 */
export async function axeViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) {
    const { source } = (await import('axe-core')).default as unknown as { source: string };
    await page.evaluate(source);
  }
  return page.evaluate(
    async (opts) => {
      const axe = (
        window as unknown as {
          axe: { run(ctx: Document, o: unknown): Promise<{ violations: { id: string; nodes: { target: unknown[]; failureSummary?: string }[] }[] }> };
        }
      ).axe;
      const r = await axe.run(document, opts);
      return r.violations.flatMap((v) =>
        v.nodes.map((n) => `${v.id}: ${JSON.stringify(n.target)} — ${(n.failureSummary ?? '').replace(/\s+/g, ' ').slice(0, 200)}`),
      );
    },
    AXE_RULES as unknown as Record<string, unknown>,
  );
}
