/** Which model a replay or a playground chat runs: a stored checkpoint or a model folder. */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { modelArg, parseRepoRef } from '../hub/cache';
import type { Store } from '../store/store';

/**
 * A checkpoint of the workspace (its store id) or a model folder path (an HF model, or a LoRA run's
 * PEFT adapter folder), with the config of the run that made it (undefined for a bare folder).
 */
export function resolveCheckpoint(
  store: Store,
  checkpoint: string,
): { id: string; path: string; step?: number; runId?: string; config?: Record<string, unknown> } {
  const ck = store.checkpoints().find((c) => c.id === checkpoint);
  if (ck) {
    if (!existsSync(join(ck.path, 'config.json')) && !existsSync(join(ck.path, 'adapter_config.json')))
      throw new Error(`checkpoint "${checkpoint}": its folder ${ck.path} has no config.json (was it deleted?)`);
    let config: Record<string, unknown> | undefined;
    try {
      config = store.getRun(ck.runId).config;
    } catch {
      config = undefined;
    }
    return { id: ck.id, path: ck.path, step: ck.step, runId: ck.runId, config };
  }
  if (existsSync(checkpoint) && statSync(checkpoint).isDirectory()) {
    if (!existsSync(join(checkpoint, 'config.json')) && !existsSync(join(checkpoint, 'adapter_config.json')))
      throw new Error(`checkpoint folder ${checkpoint} has no config.json (nor adapter_config.json)`);
    return { id: checkpoint, path: checkpoint };
  }
  // A model of the Hugging Face cache (org/name[@revision]; the workbench's model picker), read without the network.
  if (parseRepoRef(checkpoint)) return { id: checkpoint, path: modelArg(checkpoint, 'checkpoint') };
  throw new Error(`no checkpoint "${checkpoint}" in this workspace (checkpoints.list shows the stored ones; a model folder path also works)`);
}
