// A fresh install has no renderer build: `arbor serve` builds the workbench page on first use
// (with Vite's progress on stderr) before it prints the URL, and the URL opens the workbench.
// ARBOR_RENDERER_DIR points at an empty folder, so the build `npm run test:e2e` made beforehand
// for the other UI tests cannot mask a serve that does not build.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openBrowser, ROOT, screenshotIfFailed, type Browser } from './harness';

let proc: ChildProcess | undefined;
let browser: Browser | undefined;
afterEach(async (ctx) => {
  await screenshotIfFailed(ctx, browser?.page, browser?.errors);
  await browser?.close();
  proc?.kill('SIGTERM');
  browser = proc = undefined;
});

describe('install leaves the workbench runnable', () => {
  it('`arbor serve` without a renderer build builds it, then serves a page that loads in Chromium', async () => {
    const dist = join(mkdtempSync(join(tmpdir(), 'arbor-dist-')), 'dist');
    const home = mkdtempSync(join(tmpdir(), 'arbor-e2e-home-'));
    proc = spawn(process.execPath, [join(ROOT, 'bin/arbor.mjs'), 'serve', '--port', '0'], {
      cwd: ROOT,
      env: { ...process.env, ARBOR_HOME: home, ARBOR_RENDERER_DIR: dist },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout!.on('data', (d) => (out += d));
    proc.stderr!.on('data', (d) => (out += d));
    const url = await new Promise<string>((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`no URL within 170 s:\n${out}`)), 170_000);
      const check = () => {
        const m = /(http:\/\/127\.0\.0\.1:\d+\/\S*token=[\w-]+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          res(m[1]!);
        }
      };
      proc!.stdout!.on('data', check);
      proc!.stderr!.on('data', check);
      proc!.on('exit', (code) => rej(new Error(`arbor serve exited with code ${code}:\n${out}`)));
    });
    expect(out).toMatch(/Building the workbench page \(there is no build of the workbench page yet\)/);
    expect(out).toMatch(/modules transformed/);
    expect(existsSync(join(dist, 'index.html'))).toBe(true);
    browser = await openBrowser();
    await browser.page.goto(url);
    await browser.page.getByTestId('engine-status').getByText('connected').waitFor();
    expect(browser.errors).toEqual([]);
  }, 200_000);
});
