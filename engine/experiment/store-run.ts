/**
 * CLI runs recorded in the workspace store, so `arbor train`, `arbor sft` and `arbor demo` runs
 * appear in `arbor runs`, `arbor show` and the workbench next to runs started from the UI. The
 * store run id is the run folder's id, so `arbor train --resume <run>` continues the same store run.
 */
import { openDatabase } from '../store/db';
import { HEARTBEAT_MS, Store } from '../store/store';
import type { ExperimentConfig } from '../config/experiment';
import { existsSync, rmSync } from 'node:fs';
import { createRunDir } from './run-dir';
import { resolveProviders } from '../tensor/ort';
import { decoderFor, openTaskSession } from './open';
import { signalSettings, storeSink, type StoreSink } from './store-sink';

export interface CliStoreRun {
  store: Store;
  runId: string;
  sink: StoreSink;
  finish(status: 'completed' | 'stopped' | 'failed', error?: string): void;
}

/**
 * Create (or, on resume, reopen) the store run for a CLI run folder, make this process its one
 * owner (refused, naming the owner, while another live process writes it) and mark it running.
 * Opening the workspace first turns runs whose owner died into `interrupted`. A heartbeat keeps
 * the ownership visible to other processes until `finish`.
 */
export function openCliStoreRun(id: string, cfg: ExperimentConfig, opts: { resume: boolean; template: string; dir: string }): CliStoreRun {
  const store = new Store(openDatabase());
  let beat: NodeJS.Timeout | undefined;
  try {
    store.recoverOrphans();
    let exists = true;
    try {
      store.getRun(id);
    } catch {
      exists = false;
    }
    if (!exists) {
      store.createRun({ id, name: cfg.name ?? id, template: opts.template, config: cfg as unknown as Record<string, unknown>, seed: cfg.seed, tags: ['cli'] });
      store.addArtifact(id, 'run-folder', opts.dir);
    }
    store.claimRun(id);
    store.setStatus(id, 'running');
    beat = setInterval(() => store.heartbeat(), HEARTBEAT_MS);
    beat.unref();
    if (opts.resume) store.log(id, 'info', `resumed from the CLI (${opts.dir}, pid ${process.pid})`);
  } catch (e) {
    store.db.close();
    throw e;
  }
  // The decoder (tokenizer, dataset) is built on first use: a task that cannot be set up fails in
  // openTaskSession, which the caller records on this run as failed.
  let decode: ((ids: number[]) => string) | undefined;
  const sink = storeSink(store, id, {
    decode: (ids) => (decode ??= decoderFor(cfg))(ids),
    fullTrajectoriesEvery: cfg.logging.full_trajectories_every,
    signal: signalSettings(cfg),
  });
  let done = false;
  return {
    store,
    runId: id,
    sink,
    finish(status, error) {
      if (done) return;
      done = true;
      clearInterval(beat);
      sink.flush();
      if (error) store.log(id, 'error', error);
      store.setStatus(id, status, error);
      store.releaseRun(id);
      store.db.close();
    },
  };
}

/**
 * Claim a run and open its task, as `arbor train` and `arbor sft` do: the run is claimed first
 * (a second writer is refused here, naming the owner), so a failure from then on (a bad dataset,
 * a tool the format cannot call) is recorded on it as failed; without a store record, a folder
 * this call created is removed again (never a --run-dir that existed).
 */
export async function claimRunAndOpenTask(
  cfg: ExperimentConfig,
  o: { store: boolean; template: string; runDir?: string; run?: { id: string; dir: string } },
): Promise<{ id: string; dir: string; rec?: CliStoreRun; session: Awaited<ReturnType<typeof openTaskSession>> }> {
  // The device is checked before the run exists: `device: webgpu` with no adapter fails here, naming the fix.
  if (cfg.backend === 'ort') await resolveProviders(cfg.device);
  const fresh = !o.run && !(o.runDir && existsSync(o.runDir));
  const { id, dir } = o.run ?? createRunDir(cfg, o.runDir);
  let rec: CliStoreRun | undefined;
  try {
    rec = o.store ? openCliStoreRun(id, cfg, { resume: !!o.run, template: o.template, dir }) : undefined;
  } catch (e) {
    if (fresh) rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  try {
    return { id, dir, rec, session: await openTaskSession(cfg) };
  } catch (e) {
    if (rec) rec.finish('failed', e instanceof Error ? e.message : String(e));
    else if (fresh) rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
