// Electron main process: single instance, window (with remembered state), menu, lifecycle, and
// the engine utility process. It is not on the data path: the renderer talks to the engine
// through a MessagePort that engine-host.ts hands over.
import { createRequire } from 'node:module';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserWindow, ElectronMain, MenuItemOptions } from './electron-api';
import { EngineHost } from './engine-host';
import { APP_URL, hardenWebContents, isTrustedSender, registerAppScheme, secureWebPreferences, serveRenderer } from './security';
import { loadWindowState, trackWindowState } from './window-state';

const electron = createRequire(import.meta.url)('electron') as ElectronMain;
const { app, BrowserWindow: Window, ipcMain, Menu } = electron;
const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');

if (!app.requestSingleInstanceLock()) {
  app.quit();
  process.exit(0);
}
registerAppScheme(electron);
hardenWebContents(electron);

let win: BrowserWindow | null = null;
const log = (line: string) => process.stdout.write(`${line}\n`);

// better-sqlite3 (13+) and onnxruntime-node are N-API addons with prebuilt binaries: the same
// node_modules copy loads in Node (CLI, tests, `arbor serve`) and in Electron's utility process.
const engine = new EngineHost(electron, {
  entry: join(here, 'engine-entry.mjs'),
  env: { ...process.env, ARBOR_HOME: process.env.ARBOR_HOME },
  log,
});

function createWindow(): void {
  const stateFile = join(app.getPath('userData'), 'window-state.json');
  const state = loadWindowState(stateFile);
  win = new Window({
    ...(state.bounds ?? { width: 1440, height: 900 }),
    minWidth: 900,
    minHeight: 600,
    show: false,
    backgroundColor: '#14161b',
    title: 'Arbor',
    webPreferences: secureWebPreferences(join(here, 'preload.cjs')),
  });
  if (state.maximized) win.maximize();
  trackWindowState(win, stateFile);
  win.once('ready-to-show', () => win?.show());
  // Every (re)load of the page gets a fresh port to the engine.
  win.webContents.on('did-finish-load', () => win && engine.attach(win.webContents));
  win.on('closed', () => (win = null));
  void win.loadURL(APP_URL);
}

function buildMenu(): void {
  const isMac = process.platform === 'darwin';
  const template: MenuItemOptions[] = [
    ...(isMac ? [{ role: 'appMenu' }] : []),
    { role: 'fileMenu' },
    { role: 'editMenu' },
    {
      label: 'View',
      submenu: [
        { role: 'reload' },
        { role: 'toggleDevTools' },
        { type: 'separator' },
        { role: 'resetZoom' },
        { role: 'zoomIn' },
        { role: 'zoomOut' },
        { type: 'separator' },
        { role: 'togglefullscreen' },
      ],
    },
    {
      label: 'Engine',
      submenu: [
        {
          label: 'Restart engine',
          click: () => {
            engine.stop();
            engine.start();
          },
        },
      ],
    },
    { role: 'windowMenu' },
  ];
  Menu.setApplicationMenu(Menu.buildFromTemplate(template));
}

// The renderer asks for a port again when its first one was lost (e.g. it loaded before the engine spawned).
ipcMain.on('arbor:request-port', (e) => {
  if (!isTrustedSender(e)) return;
  engine.connectRenderer();
});

app.on('second-instance', () => {
  if (!win) return;
  if (win.isMinimized()) win.restore();
  win.focus();
});

void app.whenReady().then(() => {
  serveRenderer(electron, join(root, 'renderer', 'dist'));
  buildMenu();
  engine.start();
  createWindow();
  app.on('activate', () => {
    if (Window.getAllWindows().length === 0) createWindow();
  });
});

app.on('window-all-closed', () => {
  if (process.platform !== 'darwin') app.quit();
});
app.on('before-quit', () => engine.stop());
