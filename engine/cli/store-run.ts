/**
 * CLI runs recorded in the workspace store, so `arbor train`, `arbor sft` and `arbor demo` runs
 * appear in `arbor runs`, `arbor show` and the workbench next to runs started from the UI. The
 * store run id is the run folder's id, so `arbor train --resume <run>` continues the same store run.
 */
import { openDatabase } from '../store/db';
import { Store } from '../store/store';
import type { ExperimentConfig } from '../train/config';
import { decoderFor } from '../train/wiring';
import { storeSink, type StoreSink } from '../train/store-sink';

export interface CliStoreRun {
  store: Store;
  runId: string;
  sink: StoreSink;
  finish(status: 'completed' | 'stopped' | 'failed', error?: string): void;
}

/** Create (or, on resume, reopen) the store run for a CLI run folder and mark it running. */
export function openCliStoreRun(id: string, cfg: ExperimentConfig, opts: { resume: boolean; template: string; dir: string }): CliStoreRun {
  const store = new Store(openDatabase());
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
  store.setStatus(id, 'running');
  if (opts.resume) store.log(id, 'info', `resumed from the CLI (${opts.dir})`);
  const sink = storeSink(store, id, { decode: decoderFor(cfg), fullTrajectoriesEvery: cfg.logging.full_trajectories_every });
  return {
    store,
    runId: id,
    sink,
    finish(status, error) {
      sink.flush();
      if (error) store.log(id, 'error', error);
      store.setStatus(id, status, error);
      store.db.close();
    },
  };
}
