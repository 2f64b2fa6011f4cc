// The slice of Electron's API the shell uses, typed here so electron/ typechecks where the
// `electron` package (an optional dependency with a downloaded binary) is not installed.
// main.ts loads the real module at runtime with `require('electron')` and views it through these types.

export interface Rectangle {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface IpcMainEvent {
  senderFrame: { url: string } | null;
  sender: WebContents;
}

export interface WebContents {
  id: number;
  send(channel: string, ...args: unknown[]): void;
  postMessage(channel: string, message: unknown, transfer?: MessagePortMain[]): void;
  setWindowOpenHandler(h: (d: { url: string }) => { action: 'deny' | 'allow' }): void;
  on(event: 'will-navigate' | 'will-redirect', l: (e: { preventDefault(): void; url?: string }, url: string) => void): void;
  on(event: 'did-finish-load' | 'render-process-gone', l: (...args: unknown[]) => void): void;
  session: Session;
  isDestroyed(): boolean;
  openDevTools(): void;
  reload(): void;
}

export interface Session {
  setPermissionRequestHandler(h: ((wc: WebContents, permission: string, cb: (ok: boolean) => void) => void) | null): void;
  setPermissionCheckHandler(h: ((wc: WebContents | null, permission: string) => boolean) | null): void;
  webRequest: {
    onHeadersReceived(
      l: (d: { responseHeaders?: Record<string, string[]>; url: string }, cb: (r: { responseHeaders?: Record<string, string[]> }) => void) => void,
    ): void;
  };
}

export interface BrowserWindow {
  webContents: WebContents;
  getBounds(): Rectangle;
  isMaximized(): boolean;
  isMinimized(): boolean;
  maximize(): void;
  restore(): void;
  focus(): void;
  show(): void;
  loadURL(url: string): Promise<void>;
  on(event: 'close' | 'closed' | 'ready-to-show' | 'resize' | 'move', l: () => void): void;
  once(event: 'ready-to-show', l: () => void): void;
  isDestroyed(): boolean;
}

export interface BrowserWindowConstructor {
  new (opts: Record<string, unknown>): BrowserWindow;
  getAllWindows(): BrowserWindow[];
}

export interface MessagePortMain {
  postMessage(message: unknown): void;
  start(): void;
  close(): void;
  on(event: 'message', l: (e: { data: unknown }) => void): void;
}

export interface UtilityProcess {
  pid: number | undefined;
  postMessage(message: unknown, transfer?: MessagePortMain[]): void;
  kill(): boolean;
  on(event: 'exit', l: (code: number) => void): void;
  on(event: 'spawn', l: () => void): void;
  on(event: 'message', l: (m: unknown) => void): void;
  stdout: NodeJS.ReadableStream | null;
  stderr: NodeJS.ReadableStream | null;
}

export interface MenuItemOptions {
  label?: string;
  role?: string;
  type?: 'separator' | 'normal';
  accelerator?: string;
  click?: () => void;
  submenu?: MenuItemOptions[];
}

export interface ElectronMain {
  app: {
    isPackaged: boolean;
    requestSingleInstanceLock(): boolean;
    quit(): void;
    exit(code?: number): void;
    whenReady(): Promise<void>;
    getPath(name: 'userData' | 'home' | 'logs'): string;
    getAppPath(): string;
    on(event: 'second-instance' | 'window-all-closed' | 'activate' | 'before-quit' | 'will-quit', l: (...args: unknown[]) => void): void;
    on(event: 'web-contents-created', l: (e: unknown, wc: WebContents) => void): void;
  };
  BrowserWindow: BrowserWindowConstructor;
  ipcMain: { on(channel: string, l: (e: IpcMainEvent, ...args: unknown[]) => void): void };
  Menu: { buildFromTemplate(t: MenuItemOptions[]): unknown; setApplicationMenu(m: unknown): void };
  MessageChannelMain: new () => { port1: MessagePortMain; port2: MessagePortMain };
  utilityProcess: {
    fork(
      modulePath: string,
      args?: string[],
      opts?: { serviceName?: string; env?: Record<string, string | undefined>; stdio?: 'pipe' | 'inherit'; execArgv?: string[] },
    ): UtilityProcess;
  };
  protocol: {
    registerSchemesAsPrivileged(s: { scheme: string; privileges: Record<string, boolean> }[]): void;
    handle(scheme: string, h: (req: Request) => Response | Promise<Response>): void;
  };
  net: { fetch(url: string): Promise<Response> };
  shell: { openExternal(url: string): Promise<void> };
  dialog: { showErrorBox(title: string, content: string): void };
}
