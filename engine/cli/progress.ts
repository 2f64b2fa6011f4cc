/**
 * Terminal output of long jobs: one shared progress helper for every command (demo, sft, train,
 * rollout, eval, import, export). On a TTY a live bar (cli-progress) with elapsed and remaining
 * time; elsewhere (CI logs, pipes, files) a plain line at most every few seconds, at each 5% of
 * the work, with elapsed and remaining time, and the last one; --json runs print nothing on
 * stderr. Writes to a closed pipe are dropped (engine/cli/lifecycle.ts ends or stops the job).
 */
import cliProgress from 'cli-progress';

export interface Progress {
  update(done: number, fields?: Record<string, string | number>): void;
  stop(): void;
  /** The job turned out to have this many items (e.g. fewer held-out questions than asked for). */
  setTotal(total: number): void;
}

export interface ProgressOptions {
  quiet?: boolean;
  fields?: string[];
  /** Force the bar (true) or the plain lines (false); default: whether stderr is a TTY. */
  tty?: boolean;
  /** Plain lines: the least time between two lines (default 3 s; the first and last always print). */
  minIntervalMs?: number;
  /** Plain lines: a line after this long even without 5% more done (default 30 s). */
  maxIntervalMs?: number;
  /** Where to write (default process.stderr). */
  stream?: NodeJS.WritableStream & { isTTY?: boolean };
}

/** Seconds as 1m05s / 12.3s. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)}s`;
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = Math.floor(seconds % 60);
  return h ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m${String(s).padStart(2, '0')}s`;
}

export function progressBar(label: string, total: number, opts: ProgressOptions = {}): Progress {
  const fields = opts.fields ?? [];
  if (opts.quiet) return { update() {}, stop() {}, setTotal() {} };
  const stream = opts.stream ?? process.stderr;
  const write = (text: string) => {
    if (!(stream as { destroyed?: boolean }).destroyed) stream.write(text);
  };
  const t0 = Date.now();
  if (!(opts.tty ?? !!stream.isTTY)) {
    const minGap = opts.minIntervalMs ?? 3000;
    const maxGap = opts.maxIntervalMs ?? 30_000;
    let lastAt = -Infinity;
    let lastPct = -Infinity;
    let lastDone = -1;
    let pending: { done: number; f: Record<string, string | number> } | null = null;
    const line = (done: number, f: Record<string, string | number>) => {
      const now = Date.now();
      const elapsed = (now - t0) / 1000;
      const pct = total > 0 ? (100 * done) / total : 0;
      const remaining = done > 0 && total > 0 ? (elapsed * (total - done)) / done : NaN;
      const extra = fields.map((k) => `${k}=${fmt(f[k])}`).join(' ');
      write(
        `${label} ${done}/${total} ${pct.toFixed(0)}% elapsed ${formatDuration(elapsed)} remaining ${done >= total ? '0s' : formatDuration(remaining)}${extra ? ' ' + extra : ''}\n`,
      );
      lastAt = now;
      lastPct = pct;
      lastDone = done;
      pending = null;
    };
    return {
      update(done, f = {}) {
        if (done === lastDone) return;
        const now = Date.now();
        const pct = total > 0 ? (100 * done) / total : 0;
        const first = lastDone < 0;
        const last = total > 0 && done >= total;
        if (first || last || (now - lastAt >= minGap && Math.floor(pct / 5) > Math.floor(lastPct / 5)) || now - lastAt >= maxGap) line(done, f);
        else pending = { done, f };
      },
      stop() {
        // The final position is always shown once (a stopped job's last step).
        if (pending) line(pending.done, pending.f);
      },
      setTotal(n) {
        total = n;
      },
    };
  }
  const bar = new cliProgress.SingleBar(
    {
      format: `${label.padEnd(10)} [{bar}] {value}/{total} {duration_formatted} elapsed, {eta_formatted} left ${fields.map((k) => `${k} {${k}}`).join(' ')}`,
      stream: stream as NodeJS.WriteStream,
      hideCursor: true,
      clearOnComplete: false,
      etaBuffer: 20,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, Object.fromEntries(fields.map((k) => [k, '-'])));
  return {
    update(done, f = {}) {
      bar.update(done, Object.fromEntries(Object.entries(f).map(([k, v]) => [k, fmt(v)])));
    },
    stop() {
      bar.stop();
    },
    setTotal(n) {
      bar.setTotal(n);
    },
  };
}

function fmt(v: unknown): string {
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : v.toFixed(3);
  return v === undefined ? '-' : String(v);
}

/** A plain-text table with a header rule; numbers right-aligned. */
/** A run's held-out metrics as a table: one value column, or the SFT warm start's beside them. */
export function evalTable(metrics: Record<string, number>, sftAlone?: Record<string, number>): string {
  const rows = Object.entries(metrics);
  return sftAlone
    ? renderTable(
        ['held-out metric', 'SFT alone', 'after RL'],
        rows.map(([k, v]) => [k, sftAlone[k] ?? '-', v]),
      )
    : renderTable(['held-out metric', 'value'], rows);
}

export function renderTable(headers: string[], rows: (string | number)[][]): string {
  const cells = rows.map((r) => r.map((c) => (typeof c === 'number' ? (Number.isInteger(c) ? String(c) : c.toFixed(3)) : c)));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[], numeric: boolean[]) => r.map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  const numericCol = headers.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number'));
  return [line(headers, numericCol), widths.map((w) => '─'.repeat(w)).join('  '), ...cells.map((r) => line(r, numericCol))].join('\n');
}
