/**
 * `arbor models` and the workbench's model picker: the models of the Hugging Face cache (one entry
 * per snapshot, named org/name or org/name@ref) and the latest checkpoint of each Arbor run, each
 * with its architecture, parameter count, size on disk and whether Arbor can load it — or the
 * field or file it refuses, found with the loader's own checks (config.json through parseHfConfig,
 * the safetensors headers against the architecture's tensor names and shapes) without reading
 * the weights.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { INDEX_FILE, readModelConfig } from '../model/checkpoint';
import { parameterCount, weightShapes } from '../model/config';
import { readPeftConfig } from '../model/peft';
import { readSafetensorsHeader } from '../model/safetensors';
import { scanCache, treeBytes } from './cache';

type Env = Record<string, string | undefined>;

export interface ModelEntry {
  /** What model.path takes: org/name[@ref] for the cache, the folder for a run's checkpoint. */
  name: string;
  /** How a person reads it: org/name[@ref], or the run's name and step. */
  label: string;
  source: 'hub' | 'run';
  path: string;
  /** hub: the ref (main, a tag) or the commit; run: the checkpoint's step as step-N. */
  revision: string;
  commit?: string;
  runId?: string;
  checkpointId?: string;
  step?: number;
  sizeBytes: number;
  architecture?: string;
  parameters?: number;
  loadable: boolean;
  /** Why Arbor refuses it (the loader's message, naming the field or file). */
  refusal?: string;
}

function readJson(file: string): Record<string, unknown> {
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
}

/** Bytes of the files a folder's entries point to (links followed). */
function folderBytes(dir: string, files: string[]): number {
  let n = 0;
  for (const f of files) {
    try {
      n += statSync(join(dir, f)).size;
    } catch {
      /* a dangling link */
    }
  }
  return n;
}

/** The weight files of a model folder (model.safetensors or the index's shards), or an error. */
function weightFiles(folder: string): string[] {
  if (existsSync(join(folder, 'model.safetensors'))) return ['model.safetensors'];
  if (!existsSync(join(folder, INDEX_FILE))) throw new Error(`model folder ${folder}: neither model.safetensors nor ${INDEX_FILE} found`);
  const map = readJson(join(folder, INDEX_FILE)).weight_map as Record<string, string> | undefined;
  if (!map || typeof map !== 'object') throw new Error(`${join(folder, INDEX_FILE)}: invalid index (no weight_map object)`);
  const shards = [...new Set(Object.values(map))];
  for (const s of shards) if (!existsSync(join(folder, s))) throw new Error(`${join(folder, INDEX_FILE)}: shard '${s}' is missing from ${folder}`);
  return shards;
}

/** A folder as Arbor's loader sees it, from config.json and the safetensors headers only. */
export function inspectModel(folder: string): Pick<ModelEntry, 'architecture' | 'parameters' | 'loadable' | 'refusal' | 'sizeBytes'> {
  if (existsSync(join(folder, 'adapter_config.json')) && !existsSync(join(folder, 'config.json'))) {
    const size = folderBytes(folder, ['adapter_config.json', 'adapter_model.safetensors']);
    try {
      const { spec, baseModel } = readPeftConfig(folder);
      return { architecture: `LoRA adapter (rank ${spec.rank}${baseModel ? ` on ${baseModel}` : ''})`, loadable: true, sizeBytes: size };
    } catch (e) {
      return { loadable: false, refusal: (e as Error).message, sizeBytes: size };
    }
  }
  let files: string[] = [];
  try {
    const config = readModelConfig(folder);
    const out = { architecture: config.architecture, parameters: parameterCount(config) };
    try {
      files = weightFiles(folder);
      const shapes = weightShapes(config);
      const seen = new Map<string, number[]>();
      for (const f of files) for (const [name, info] of readSafetensorsHeader(join(folder, f)).tensors) seen.set(name, info.shape);
      for (const [name, shape] of Object.entries(shapes)) {
        const got = seen.get(name);
        if (!got) throw new Error(`${folder}: missing tensor '${name}' (expected shape [${shape}])`);
        if (got.join() !== shape.join()) throw new Error(`tensor '${name}' has shape [${got}], expected [${shape}]`);
      }
      for (const name of seen.keys())
        if (!(name in shapes) && !/\.rotary_emb\.inv_freq$/.test(name) && !(name === 'lm_head.weight' && config.tieWordEmbeddings))
          throw new Error(`unexpected tensor '${name}', not part of a ${config.architecture} with this config.json`);
      if (!existsSync(join(folder, 'tokenizer.json'))) throw new Error(`${folder}: no tokenizer.json (Arbor reads the fast-tokenizer file)`);
      return { ...out, loadable: true, sizeBytes: folderBytes(folder, ['config.json', ...files]) };
    } catch (e) {
      return { ...out, loadable: false, refusal: (e as Error).message, sizeBytes: folderBytes(folder, ['config.json', ...files]) };
    }
  } catch (e) {
    return { loadable: false, refusal: (e as Error).message, sizeBytes: folderBytes(folder, ['config.json']) };
  }
}

/** The run checkpoints to list: one per run (its latest), as the store has them. */
export interface RunCheckpoint {
  id: string;
  runId: string;
  runName?: string;
  step: number;
  path: string;
}

export function listModels(o: { env?: Env; checkpoints?: RunCheckpoint[] } = {}): ModelEntry[] {
  const out: ModelEntry[] = [];
  for (const repo of scanCache(o.env)) {
    for (const snap of repo.snapshots) {
      const ref = snap.refs.includes('main') ? 'main' : (snap.refs[0] ?? snap.commit);
      const info = inspectModel(snap.folder);
      if (!existsSync(join(snap.folder, 'config.json')) && !existsSync(join(snap.folder, 'adapter_config.json'))) continue;
      out.push({
        name: ref === 'main' ? repo.repoId : `${repo.repoId}@${ref}`,
        label: ref === 'main' ? repo.repoId : `${repo.repoId}@${ref}`,
        source: 'hub',
        path: snap.folder,
        revision: ref,
        commit: snap.commit,
        ...info,
        // Size on disk: every file of the snapshot, not only those the loader reads.
        sizeBytes: treeBytes(snap.folder),
      });
    }
  }
  const latest = new Map<string, RunCheckpoint>();
  for (const c of o.checkpoints ?? []) if ((latest.get(c.runId)?.step ?? -Infinity) <= c.step) latest.set(c.runId, c);
  for (const c of latest.values()) {
    out.push({
      name: c.path,
      label: `${c.runName ?? c.runId} step ${c.step}`,
      source: 'run',
      path: c.path,
      revision: `step-${c.step}`,
      runId: c.runId,
      checkpointId: c.id,
      step: c.step,
      ...inspectModel(c.path),
    });
  }
  return out;
}
