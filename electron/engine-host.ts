// Runs the engine as an Electron utility process and hands the renderer a MessagePort to it
// (the VS Code pattern: main sets up the channel and stays off the data path). When the engine
// dies unexpectedly it is restarted, at most MAX_RESTARTS times within RESTART_WINDOW_MS, and the
// renderer is told at each change so it can show a banner and reload when the engine is back.
import type { ElectronMain, UtilityProcess, WebContents } from './electron-api';

export const MAX_RESTARTS = 3;
export const RESTART_WINDOW_MS = 60_000;

export type EngineStateMessage = { state: 'open' } | { state: 'engine-crashed'; message: string; restarting: boolean; attempt?: number };

export interface EngineHostOptions {
  /** the ESM bootstrap run in the utility process (electron/engine-entry.mjs) */
  entry: string;
  env: Record<string, string | undefined>;
  log: (line: string) => void;
}

/** Restart budget: true if another restart is allowed at time `now` given past restart times. */
export function mayRestart(history: number[], now: number, max = MAX_RESTARTS, windowMs = RESTART_WINDOW_MS): boolean {
  return history.filter((t) => now - t < windowMs).length < max;
}

export class EngineHost {
  private child: UtilityProcess | null = null;
  private restarts: number[] = [];
  private stopping = false;
  private renderer: WebContents | null = null;
  private lastStderr: string[] = [];

  constructor(
    private readonly electron: ElectronMain,
    private readonly opts: EngineHostOptions,
  ) {}

  start(): void {
    this.stopping = false;
    const child = this.electron.utilityProcess.fork(this.opts.entry, [], { serviceName: 'Arbor engine', env: this.opts.env, stdio: 'pipe' });
    this.child = child;
    this.lastStderr = [];
    child.stdout?.on('data', (d: Buffer) => this.opts.log(`[engine] ${String(d).trimEnd()}`));
    child.stderr?.on('data', (d: Buffer) => {
      const text = String(d).trimEnd();
      this.opts.log(`[engine:err] ${text}`);
      this.lastStderr = [...this.lastStderr, ...text.split('\n')].slice(-8);
    });
    child.on('spawn', () => this.connectRenderer());
    child.on('exit', (code) => this.onExit(child, code));
  }

  /** Attach (or re-attach after a reload) the window whose renderer talks to the engine. */
  attach(renderer: WebContents): void {
    this.renderer = renderer;
    if (this.child) this.connectRenderer();
  }

  /** Give the renderer a fresh port to the running engine. */
  connectRenderer(): void {
    const wc = this.renderer;
    if (!this.child || !wc || wc.isDestroyed()) return;
    const { port1, port2 } = new this.electron.MessageChannelMain();
    this.child.postMessage({ type: 'arbor:connect' }, [port1]);
    wc.postMessage('arbor:engine-port', null, [port2]);
    this.send({ state: 'open' });
  }

  stop(): void {
    this.stopping = true;
    this.child?.kill();
    this.child = null;
  }

  private onExit(child: UtilityProcess, code: number): void {
    if (child !== this.child) return;
    this.child = null;
    if (this.stopping) return;
    const detail = this.lastStderr.filter(Boolean).slice(-3).join(' | ');
    const message = `exit code ${code}${detail ? ` — ${detail}` : ''}`;
    const now = Date.now();
    if (mayRestart(this.restarts, now)) {
      this.restarts = [...this.restarts.filter((t) => now - t < RESTART_WINDOW_MS), now];
      this.send({ state: 'engine-crashed', message, restarting: true, attempt: this.restarts.length });
      this.opts.log(`engine exited (${message}); restart ${this.restarts.length}/${MAX_RESTARTS}`);
      setTimeout(() => this.start(), 500 * this.restarts.length);
    } else {
      this.send({ state: 'engine-crashed', message, restarting: false });
      this.opts.log(`engine exited (${message}); giving up after ${MAX_RESTARTS} restarts in ${RESTART_WINDOW_MS / 1000}s`);
    }
  }

  private send(m: EngineStateMessage): void {
    const wc = this.renderer;
    if (wc && !wc.isDestroyed()) wc.send('arbor:engine-state', m);
  }
}
