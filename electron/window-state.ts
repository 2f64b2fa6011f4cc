// Remembers the window's size, position and maximised state between launches (userData/window-state.json).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { BrowserWindow, Rectangle } from './electron-api';

export interface WindowState {
  bounds: Rectangle | null;
  maximized: boolean;
}

export const DEFAULT_STATE: WindowState = { bounds: null, maximized: false };

export function loadWindowState(file: string): WindowState {
  try {
    const s = JSON.parse(readFileSync(file, 'utf8')) as Partial<WindowState>;
    const b = s.bounds;
    const ok = b && [b.x, b.y, b.width, b.height].every((n) => Number.isFinite(n)) && b.width >= 400 && b.height >= 300;
    return { bounds: ok ? b! : null, maximized: s.maximized === true };
  } catch {
    return DEFAULT_STATE;
  }
}

export function trackWindowState(win: BrowserWindow, file: string): void {
  let timer: NodeJS.Timeout | null = null;
  const save = () => {
    if (win.isDestroyed() || win.isMinimized()) return;
    const state: WindowState = {
      bounds: win.isMaximized() ? (loadWindowState(file).bounds ?? win.getBounds()) : win.getBounds(),
      maximized: win.isMaximized(),
    };
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(state));
  };
  const later = () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(save, 400);
  };
  win.on('resize', later);
  win.on('move', later);
  win.on('close', save);
}
