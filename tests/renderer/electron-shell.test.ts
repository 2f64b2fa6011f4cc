// The Electron shell cannot run here (no Electron binary), so its decisions are plain functions
// tested directly: the restart budget, app:// path resolution, IPC sender checks, window state.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_RESTARTS, RESTART_WINDOW_MS, mayRestart } from '../../electron/engine-host';
import { CSP, isTrustedSender, resolveAppPath } from '../../electron/security';
import { loadWindowState } from '../../electron/window-state';

describe('engine restart budget', () => {
  it(`allows ${MAX_RESTARTS} restarts within the window, then refuses`, () => {
    const now = 1_000_000;
    const history: number[] = [];
    for (let i = 0; i < MAX_RESTARTS; i++) {
      expect(mayRestart(history, now + i)).toBe(true);
      history.push(now + i);
    }
    expect(mayRestart(history, now + MAX_RESTARTS)).toBe(false);
    expect(mayRestart(history, now + RESTART_WINDOW_MS + MAX_RESTARTS)).toBe(true);
  });
});

describe('app:// protocol', () => {
  const root = '/opt/arbor/renderer/dist';
  it('maps URLs into the renderer folder', () => {
    expect(resolveAppPath(root, 'app://arbor/index.html')).toBe(join(root, 'index.html'));
    expect(resolveAppPath(root, 'app://arbor/')).toBe(join(root, 'index.html'));
    expect(resolveAppPath(root, 'app://arbor/assets/x.js')).toBe(join(root, 'assets/x.js'));
  });
  it('refuses paths that escape it and other hosts', () => {
    // `..` is clamped at the root of the URL path, so the file stays inside the renderer folder.
    const p = resolveAppPath(root, 'app://arbor/%2e%2e/%2e%2e/etc/passwd');
    expect(p === null || p.startsWith(root + '/')).toBe(true);
    expect(resolveAppPath(root, 'app://arbor/a/..%2f..%2f..%2fetc/passwd') ?? root + '/').toMatch(new RegExp(`^${root}/`));
    expect(resolveAppPath(root, 'app://evil/index.html')).toBeNull();
  });
  it('lets Monaco workers run without allowing eval', () => {
    expect(CSP).toContain("worker-src 'self' blob:");
    expect(CSP).not.toContain('unsafe-eval');
  });
});

describe('IPC sender check', () => {
  const ev = (url: string | null) => ({ senderFrame: url === null ? null : { url }, sender: {} as never });
  it('accepts only frames of the app origin', () => {
    expect(isTrustedSender(ev('app://arbor/index.html'))).toBe(true);
    expect(isTrustedSender(ev('https://example.com/'))).toBe(false);
    expect(isTrustedSender(ev('file:///tmp/x.html'))).toBe(false);
    expect(isTrustedSender(ev(null))).toBe(false);
  });
});

describe('window state', () => {
  it('restores saved bounds and ignores corrupt or tiny ones', () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-ws-'));
    const f = join(dir, 'w.json');
    writeFileSync(f, JSON.stringify({ bounds: { x: 10, y: 20, width: 1200, height: 800 }, maximized: true }));
    expect(loadWindowState(f)).toEqual({ bounds: { x: 10, y: 20, width: 1200, height: 800 }, maximized: true });
    writeFileSync(f, JSON.stringify({ bounds: { x: 0, y: 0, width: 10, height: 10 } }));
    expect(loadWindowState(f).bounds).toBeNull();
    writeFileSync(f, '{not json');
    expect(loadWindowState(f)).toEqual({ bounds: null, maximized: false });
  });
});
