/**
 * CLI runs recorded in the workspace store, so `arbor train`, `arbor sft` and `arbor demo` runs
 * appear in `arbor runs`, `arbor show` and the workbench next to runs started from the UI. The
 * store run id is the run folder's id, so `arbor train --resume <run>` continues the same store run.
 */
import { openDatabase } from '../store/db';
import { HEARTBEAT_MS, Store } from '../store/store';
import { assignRunToRunGroup } from '../store/groups';
import type { ExperimentConfig, LoadedConfig } from '../config/experiment';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRunDir, type TaskSession } from './run-dir';
import { resolveProviders } from '../tensor/ort';
import { decoderFor, openTaskSession } from './open';
import { signalSettings, storeSink, type StoreSink } from './store-sink';
import { recordedRun } from './sinks';

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
export function openCliStoreRun(
  id: string,
  cfg: ExperimentConfig,
  opts: {
    resume: boolean;
    template: string;
    dir: string;
    runGroup?: { id: string; cell: string };
    parentId?: string;
    tags?: string[];
    /** The run's task session once it is open (its tokenizer decodes the stored trajectories; else the task kind's). */
    session?: () => TaskSession | undefined;
  },
): CliStoreRun {
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
      store.createRun({
        id,
        name: cfg.name ?? id,
        template: opts.template,
        config: cfg as unknown as Record<string, unknown>,
        seed: cfg.seed,
        tags: ['cli', ...(opts.tags ?? [])],
        parentId: opts.parentId,
      });
      store.addArtifact(id, 'run-folder', opts.dir);
      // A run of a seed sweep or grid (`arbor sweep`): its group and configuration cell.
      if (opts.runGroup) assignRunToRunGroup(store, id, opts.runGroup.id, opts.runGroup.cell);
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
    decode: (ids) => (decode ??= decoderFor(cfg, () => opts.session?.()))(ids),
    fullTrajectoriesEvery: cfg.logging.full_trajectories_every,
    signal: signalSettings(cfg),
  });
  let done = false;
  return {
    store,
    runId: id,
    // An SFT run's step is its SFT step (the store keeps sft/* keys off an RL run's step).
    sink: opts.template === 'sft' ? { ...sink, metrics: (step, v) => (sink.metrics(step, v), store.advanceStep(id, step)) } : sink,
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
 * Open a run's task and claim the run, as `arbor train` and `arbor sft` do. A new run's input is
 * validated first (the task opened: its dataset, task file, tools and reward load), so a bad
 * input leaves no run row and no folder; only then are the folder and the row created. A resumed
 * run is claimed first (a second writer is refused, naming the owner) and a failure to open its
 * task is recorded on it as failed. Without a store record, a folder this call created is removed
 * again (never a --run-dir that existed).
 */
export async function claimRunAndOpenTask(
  loaded: LoadedConfig,
  o: { store: boolean; template: string; runDir?: string; run?: { id: string; dir: string }; runGroup?: { id: string; cell: string } },
): Promise<{ id: string; dir: string; rec?: CliStoreRun; session: TaskSession }> {
  const { cfg } = loaded;
  // The device is checked before the run exists: `device: webgpu` with no adapter fails here, naming the fix.
  if (cfg.backend === 'ort') await resolveProviders(cfg.device);
  const fresh = !o.run && !(o.runDir && existsSync(o.runDir));
  if (!o.run) {
    const session = await openTaskSession(loaded);
    const { id, dir } = createRunDir(cfg, loaded.dir, o.runDir);
    try {
      const rec = o.store ? openCliStoreRun(id, cfg, { resume: false, template: o.template, dir, runGroup: o.runGroup, session: () => session }) : undefined;
      return { id, dir, rec, session };
    } catch (e) {
      await session.close();
      if (fresh) rmSync(dir, { recursive: true, force: true });
      throw e;
    }
  }
  const { id, dir } = o.run;
  let session: TaskSession | undefined;
  const rec = o.store ? openCliStoreRun(id, cfg, { resume: true, template: o.template, dir, session: () => session }) : undefined;
  return recordedRun(rec, async () => {
    const before = JSON.stringify(cfg.rollout);
    const opened = await openTaskSession(loaded);
    session = opened;
    // Limits sized from the task (engine/run/limits.ts) are the run's: its config.json (what a
    // resume reads) and its store record say what it trains with.
    if (JSON.stringify(cfg.rollout) !== before) {
      if (!o.run) writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg, null, 2));
      rec?.store.db.prepare('UPDATE runs SET config = ? WHERE id = ?').run(JSON.stringify(cfg), id);
      for (const w of opened.warnings ?? []) if (w.startsWith('limits sized')) rec?.store.log(id, 'info', w);
    }
    return { id, dir, rec, session: opened };
  });
}
