// All hardening of the Electron shell in one place (Electron's security checklist, as Actual
// Budget's security.ts does): the app:// protocol instead of file://, a CSP, no navigation or
// new windows, no permission grants, and a sender check for every IPC message.
import { existsSync } from 'node:fs';
import { extname, join, normalize, relative, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ElectronMain, IpcMainEvent, WebContents } from './electron-api';

export const APP_SCHEME = 'app';
export const APP_ORIGIN = `${APP_SCHEME}://arbor`;
export const APP_URL = `${APP_ORIGIN}/index.html`;

/**
 * Content-Security-Policy of the renderer. Monaco's workers are bundled files served from
 * app:// ('self'); `blob:` covers Monaco creating workers from blobs. No 'unsafe-eval'.
 * connect-src allows only the local engine (web mode) — in Electron the data path is the MessagePort.
 */
export const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "worker-src 'self' blob:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'none'",
].join('; ');

/** Must run before app.ready. */
export function registerAppScheme(electron: ElectronMain): void {
  electron.protocol.registerSchemesAsPrivileged([{ scheme: APP_SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } }]);
}

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ttf': 'font/ttf',
  '.woff2': 'font/woff2',
  '.wasm': 'application/wasm',
};

/** Resolve an app:// URL to a file inside `root`, or null if it escapes it. */
export function resolveAppPath(root: string, url: string): string | null {
  const u = new URL(url);
  if (u.host !== 'arbor') return null;
  const rel = normalize(decodeURIComponent(u.pathname)).replace(/^[/\\]+/, '') || 'index.html';
  const file = join(root, rel);
  const r = relative(root, file);
  if (r.startsWith('..') || r.split(sep).includes('..')) return null;
  return file;
}

/** Serve the built renderer (renderer/dist) over app://arbor/, with the CSP on every response. */
export function serveRenderer(electron: ElectronMain, rendererDist: string): void {
  electron.protocol.handle(APP_SCHEME, async (req) => {
    const file = resolveAppPath(rendererDist, req.url);
    if (!file || !existsSync(file)) return new Response('not found', { status: 404 });
    const res = await electron.net.fetch(pathToFileURL(file).toString());
    const headers = new Headers(res.headers);
    headers.set('Content-Type', MIME[extname(file)] ?? 'application/octet-stream');
    headers.set('Content-Security-Policy', CSP);
    headers.set('X-Content-Type-Options', 'nosniff');
    return new Response(res.body, { status: 200, headers });
  });
}

/** True when an IPC message comes from our own page (not a navigated-away or injected frame). */
export function isTrustedSender(e: IpcMainEvent): boolean {
  const url = e.senderFrame?.url;
  if (!url) return false;
  try {
    return new URL(url).origin === APP_ORIGIN || url.startsWith(`${APP_ORIGIN}/`);
  } catch {
    return false;
  }
}

/** Block navigation, new windows and permission requests for every web contents created. */
export function hardenWebContents(electron: ElectronMain): void {
  electron.app.on('web-contents-created', (_e, wc: WebContents) => {
    wc.on('will-navigate', (ev, url) => {
      if (!url.startsWith(`${APP_ORIGIN}/`)) ev.preventDefault();
    });
    wc.on('will-redirect', (ev, url) => {
      if (!url.startsWith(`${APP_ORIGIN}/`)) ev.preventDefault();
    });
    wc.setWindowOpenHandler(({ url }) => {
      // Links to documentation open in the user's browser, never inside the app.
      if (/^https:\/\//.test(url)) void electron.shell.openExternal(url);
      return { action: 'deny' };
    });
    wc.session.setPermissionRequestHandler((_wc, _permission, cb) => cb(false));
    wc.session.setPermissionCheckHandler(() => false);
  });
}

/** webPreferences every window gets; the defaults spelled out so a reader sees them. */
export function secureWebPreferences(preload: string): Record<string, unknown> {
  return {
    preload,
    contextIsolation: true,
    sandbox: true,
    nodeIntegration: false,
    nodeIntegrationInWorker: false,
    webSecurity: true,
    allowRunningInsecureContent: false,
    webviewTag: false,
    spellcheck: false,
  };
}
