/**
 * Terminal output of long training jobs: a live progress bar (cli-progress) on a TTY, one line per
 * step otherwise (CI logs, --json runs print nothing on stdout), and plain-text result tables.
 */
import cliProgress from 'cli-progress';

export interface Progress {
  update(done: number, fields?: Record<string, string | number>): void;
  stop(): void;
}

export function progressBar(label: string, total: number, opts: { quiet?: boolean; fields?: string[] } = {}): Progress {
  const fields = opts.fields ?? [];
  if (opts.quiet) return { update() {}, stop() {} };
  if (!process.stderr.isTTY) {
    let last = -1;
    return {
      update(done, f = {}) {
        if (done === last) return;
        last = done;
        const extra = fields.map((k) => `${k}=${fmt(f[k])}`).join(' ');
        process.stderr.write(`${label} ${done}/${total} ${extra}\n`);
      },
      stop() {},
    };
  }
  const bar = new cliProgress.SingleBar(
    {
      format: `${label.padEnd(10)} [{bar}] {value}/{total} {eta_formatted} ${fields.map((k) => `${k} {${k}}`).join(' ')}`,
      stream: process.stderr,
      hideCursor: true,
      clearOnComplete: false,
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
  };
}

function fmt(v: unknown): string {
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : v.toFixed(3);
  return v === undefined ? '-' : String(v);
}

/** A plain-text table with a header rule; numbers right-aligned. */
export function renderTable(headers: string[], rows: (string | number)[][]): string {
  const cells = rows.map((r) => r.map((c) => (typeof c === 'number' ? (Number.isInteger(c) ? String(c) : c.toFixed(3)) : c)));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[], numeric: boolean[]) => r.map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  const numericCol = headers.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number'));
  return [line(headers, numericCol), widths.map((w) => '─'.repeat(w)).join('  '), ...cells.map((r) => line(r, numericCol))].join('\n');
}
