/**
 * `arbor pull <org/name> [--revision R] [--include GLOB]... [--json]`: a model repository from the
 * Hub (HF_ENDPOINT: a mirror) into the Hugging Face cache, in huggingface_hub's layout
 * (engine/hub/pull.ts). A progress bar with bytes and rate on a terminal, a line every few
 * seconds elsewhere; an interrupted pull continues where it stopped when run again.
 */
import type { Command } from 'commander';
import cliProgress from 'cli-progress';
import { parseRepoRef } from '../../hub/cache';
import { pull, type PullProgress } from '../../hub/pull';
import { formatDuration } from '../progress';

export function formatBytes(n: number): string {
  if (!Number.isFinite(n)) return '?';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(n < 10 ? 2 : 1)} ${units[i]}`;
}

/** Bytes per second over the last few seconds of samples. */
export function rateMeter(windowMs = 5000): (bytes: number) => number {
  const samples: [number, number][] = [];
  return (bytes) => {
    const now = Date.now();
    samples.push([now, bytes]);
    while (samples.length > 2 && now - samples[0]![0] > windowMs) samples.shift();
    const [t0, b0] = samples[0]!;
    return now > t0 ? ((bytes - b0) * 1000) / (now - t0) : 0;
  };
}

function progressPrinter(quiet: boolean): { update(p: PullProgress): void; stop(): void } {
  if (quiet) return { update() {}, stop() {} };
  const rate = rateMeter();
  const stream = process.stderr;
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format: 'pull [{bar}] {percentage}% {got}/{size} {rate}/s {eta_formatted} left  {file}',
        stream,
        hideCursor: true,
        clearOnComplete: false,
        etaBuffer: 50,
      },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      update(p) {
        if (p.phase === 'metadata') return;
        const fields = { got: formatBytes(p.bytes), size: formatBytes(p.totalBytes), rate: formatBytes(rate(p.transferred)), file: p.file ?? '' };
        if (!started) {
          bar.start(Math.max(p.totalBytes, 1), p.bytes, fields);
          started = true;
        } else bar.update(p.bytes, fields);
      },
      stop: () => started && bar.stop(),
    };
  }
  let last = 0;
  const t0 = Date.now();
  let lastP: PullProgress | undefined;
  const line = (p: PullProgress) => {
    last = Date.now();
    const pct = p.totalBytes ? ((100 * p.bytes) / p.totalBytes).toFixed(0) : '0';
    stream.write(
      `pull ${formatBytes(p.bytes)}/${formatBytes(p.totalBytes)} ${pct}% ${formatBytes(rate(p.transferred))}/s elapsed ${formatDuration((last - t0) / 1000)} files ${p.filesDone}/${p.files}${p.file ? ` ${p.file}` : ''}\n`,
    );
  };
  return {
    update(p) {
      if (p.phase === 'metadata') return;
      lastP = p;
      if (Date.now() - last >= 3000 || p.phase === 'done') line(p);
    },
    stop: () => lastP && lastP.phase !== 'done' && line(lastP),
  };
}

export function register(program: Command): void {
  program
    .command('pull')
    .description(
      'download a model repository from the Hugging Face Hub (HF_ENDPOINT: a mirror) into the Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub), shared with transformers and huggingface-cli; an interrupted pull resumes',
    )
    .argument('<repo>', 'org/name, or org/name@revision')
    .option('--revision <rev>', 'branch, tag or commit (default: main, or the @revision of <repo>)')
    .option(
      '--include <glob>',
      'only files matching this glob (repeatable; default: config.json, generation_config.json, the tokenizer files, *.safetensors and their index)',
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option('--json', 'print the result as JSON (no progress)')
    .action(async (repo: string, o: { revision?: string; include?: string[]; json?: boolean }) => {
      const ref = parseRepoRef(repo);
      if (!ref) throw new Error(`<repo>: "${repo}" is not a Hub model id (org/name or org/name@revision)`);
      if (o.revision && repo.includes('@')) throw new Error(`--revision: give the revision once (<repo> already names @${ref.revision})`);
      const abort = new AbortController();
      const onSignal = () => abort.abort();
      process.once('SIGINT', onSignal);
      const bar = progressPrinter(!!o.json);
      try {
        const r = await pull({
          repoId: ref.repoId,
          revision: o.revision ?? ref.revision,
          include: o.include,
          signal: abort.signal,
          onProgress: (p) => bar.update(p),
        });
        bar.stop();
        if (o.json) return console.log(JSON.stringify(r, null, 2));
        if (r.offline) return console.log(`${r.repoId}@${r.revision}: HF_HUB_OFFLINE is set; the cached snapshot ${r.folder}`);
        const got = r.files.filter((f) => f.how === 'downloaded' || f.how === 'resumed').length;
        console.log(
          `${r.repoId}@${r.revision} (commit ${r.commit}): ${r.files.length} files, ${got} downloaded (${formatBytes(r.transferred)}), ${r.files.length - got} already cached\n${r.folder}\nuse it as model.path: ${r.repoId}${r.revision === 'main' ? '' : `@${r.revision}`}`,
        );
      } catch (e) {
        bar.stop();
        if (abort.signal.aborted) throw new Error(`pull ${repo} interrupted; run it again to continue where it stopped`);
        throw e;
      } finally {
        process.off('SIGINT', onSignal);
      }
    });
}
