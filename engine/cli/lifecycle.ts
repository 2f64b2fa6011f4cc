/**
 * How a CLI process ends. Long jobs (train, sft, demo) stop after the current step and save a
 * checkpoint on SIGINT (Ctrl-C), SIGTERM, SIGHUP (the terminal closed) and on a closed output
 * pipe (EPIPE on stdout/stderr, e.g. `arbor train … | head` or a dead `tee`); a second signal
 * quits at once. Any other command ends quietly when its output pipe closes (`arbor runs | head`):
 * no stack trace, exit code 0.
 */

const PIPE_CODES = new Set(['EPIPE', 'EIO', 'ERR_STREAM_DESTROYED', 'ECONNRESET']);
const stopHandlers = new Set<() => void>();
let guarded = false;
let closed = false;

/** Whether stdout or stderr has closed under us (writes are then dropped). */
export function outputClosed(): boolean {
  return closed;
}

/** Write to stderr unless it has closed. */
export function note(text: string): void {
  if (!closed) process.stderr.write(text);
}

/**
 * Install the closed-pipe handling on stdout and stderr (once per process): a long job that
 * registered a stop handler stops after its step; otherwise the process exits quietly.
 */
export function guardOutput(): void {
  if (guarded) return;
  guarded = true;
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (!PIPE_CODES.has(e.code ?? '')) throw e;
      if (closed) return;
      closed = true;
      if (stopHandlers.size) for (const h of [...stopHandlers]) h();
      else process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
    });
  }
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const SIGNAL_CODE: Record<(typeof SIGNALS)[number], number> = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 };

/**
 * The stop signal of a long job: aborted by the first SIGINT/SIGTERM/SIGHUP or by a closed output
 * pipe (`onFirst` is told which, unless the output is gone); a second signal exits at once.
 */
export function interruptSignal(onFirst: (why: string) => void): { signal: AbortSignal; dispose: () => void } {
  guardOutput();
  const ac = new AbortController();
  const stop = (why: string) => {
    if (ac.signal.aborted) return;
    if (!closed) {
      try {
        onFirst(why);
      } catch {
        // the terminal went away while we said so
      }
    }
    ac.abort(new Error(why));
  };
  const handlers = SIGNALS.map((sig) => {
    const h = () => {
      if (ac.signal.aborted && sig !== 'SIGHUP') process.exit(SIGNAL_CODE[sig]);
      stop(sig);
    };
    process.on(sig, h);
    return [sig, h] as const;
  });
  const onPipe = () => stop('output closed');
  stopHandlers.add(onPipe);
  return {
    signal: ac.signal,
    dispose: () => {
      for (const [sig, h] of handlers) process.off(sig, h);
      stopHandlers.delete(onPipe);
    },
  };
}
