/**
 * models.list / models.pull / models.cancelPull: the workbench's model picker and its "Download…"
 * (engine/hub). A pull runs in the engine and pushes `pull` events to every client; cancelling
 * aborts its request and keeps the partial blob, so the next pull of the repo continues from it.
 */
import { parseRepoRef } from '../hub/cache';
import { listModels } from '../hub/models';
import { pull, type PullProgress } from '../hub/pull';
import type { PullProgressEvent } from './protocol';
import type { EngineHost } from './host';

export function registerModels(engine: EngineHost): void {
  const running = new Map<string, AbortController>();
  engine.on('models.list', () => {
    const checkpoints = engine.store ? engine.store.checkpoints() : [];
    const names = new Map<string, string>();
    if (engine.store)
      for (const c of checkpoints)
        if (!names.has(c.runId))
          try {
            names.set(c.runId, engine.store.getRun(c.runId).name);
          } catch {
            /* a checkpoint row of a deleted run */
          }
    return listModels({ checkpoints: checkpoints.map((c) => ({ ...c, runName: names.get(c.runId) })) });
  });
  engine.on('models.pull', async (p) => {
    const ref = parseRepoRef(p.repo);
    if (!ref) throw new Error(`repo: "${p.repo}" is not a Hub model id (org/name or org/name@revision)`);
    const revision = p.revision ?? ref.revision;
    const key = `${ref.repoId}@${revision}`;
    if (running.has(key)) throw new Error(`${key} is already being pulled`);
    const abort = new AbortController();
    running.set(key, abort);
    const samples: [number, number][] = [];
    let last: PullProgress | undefined;
    let lastSent = 0;
    let trailing: ReturnType<typeof setTimeout> | undefined;
    const send = (p: PullProgress, phase: PullProgressEvent['phase'] = p.phase, error?: string) => {
      const now = Date.now();
      samples.push([now, p.transferred]);
      while (samples.length > 2 && now - samples[0]![0] > 5000) samples.shift();
      const [t0, b0] = samples[0]!;
      const rate = now > t0 ? ((p.transferred - b0) * 1000) / (now - t0) : 0;
      engine.broadcast({
        event: 'pull',
        data: {
          repo: key,
          phase,
          file: p.file,
          filesDone: p.filesDone,
          files: p.files,
          bytes: p.bytes,
          totalBytes: p.totalBytes,
          transferred: p.transferred,
          rate,
          error,
        },
      });
    };
    try {
      const r = await pull({
        repoId: ref.repoId,
        revision,
        include: p.include,
        signal: abort.signal,
        onProgress: (q) => {
          last = q;
          // At most ~10 events a second, every phase change, and the latest one always (a stalled transfer shows where it stands).
          if (q.phase === 'download' && Date.now() - lastSent < 100) {
            trailing ??= setTimeout(() => {
              trailing = undefined;
              lastSent = Date.now();
              if (last) send(last);
            }, 100);
            return;
          }
          if (trailing) clearTimeout(trailing);
          trailing = undefined;
          lastSent = Date.now();
          send(q);
        },
      });
      if (trailing) clearTimeout(trailing);
      return { repo: key, revision, commit: r.commit, folder: r.folder, files: r.files.length, transferred: r.transferred };
    } catch (e) {
      if (trailing) clearTimeout(trailing);
      const empty: PullProgress = { phase: 'metadata', filesDone: 0, files: 0, bytes: 0, totalBytes: 0, transferred: 0 };
      if (abort.signal.aborted) {
        send(last ?? empty, 'cancelled');
        throw new Error(`pull of ${key} cancelled; pull again to continue where it stopped`);
      }
      send(last ?? empty, 'failed', (e as Error).message);
      throw e;
    } finally {
      running.delete(key);
    }
  });
  engine.on('models.cancelPull', (p) => {
    const ref = parseRepoRef(p.repo);
    const key = ref ? `${ref.repoId}@${ref.revision}` : p.repo;
    const c = running.get(key) ?? running.get(p.repo);
    c?.abort();
    return { cancelled: !!c };
  });
}
