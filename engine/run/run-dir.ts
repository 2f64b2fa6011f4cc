/**
 * Run folders and the top-level train / SFT drivers shared by the CLI and the run manager's job.
 *
 * A run lives in <ARBOR_HOME>/runs/<id>/ with config.json (the resolved config), metrics.jsonl,
 * checkpoints/ and sft/ (the warm-start checkpoint). The drivers take a `TaskSession` (the model,
 * environment and rollout wiring for the configured task) so they do not care where it came from.
 */
import type { Trajectory } from '../rollout/types';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, isAbsolute, join, resolve } from 'node:path';
import { arborHome } from '../store/db';
import { loadPlugins, validateLoaded, type ExperimentConfig, type LoadedConfig } from '../config/experiment';
import type { TokenizerPort } from '../rollout/ports';
import type { Demo, SftPort } from '../train/sft';
import type { LoopPorts } from '../train/loop';
import type { EvalSummary } from '../tasks/kit';

export function runsRoot(): string {
  return join(arborHome(), 'runs');
}

/** The file a run folder records its config's folder in: relative paths of the stored config resolve against it. */
const BASE_FILE = 'base.json';

/** Write the run's config and the folder its relative paths resolve against (its config file's, else the run folder). */
function writeStored(dir: string, cfg: ExperimentConfig, configDir: string | undefined): void {
  writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg, null, 2));
  writeFileSync(join(dir, BASE_FILE), `${JSON.stringify({ baseDir: configDir ?? dir })}\n`);
}

/**
 * The folder a stored config's relative paths resolve against: the one recorded when the run
 * started, else the run folder itself; never the process's working folder (a foreign run folder's
 * `workspace: resources/…` must not land in whatever checkout it is resumed from).
 */
export function storedBaseDir(dir: string): string {
  try {
    const j = JSON.parse(readFileSync(join(dir, BASE_FILE), 'utf8')) as { baseDir?: unknown };
    if (typeof j.baseDir === 'string' && isAbsolute(j.baseDir)) return j.baseDir;
  } catch {
    /* none recorded (a run from before, or from elsewhere): the run folder */
  }
  return resolve(dir);
}

/**
 * A new run folder named after the config and the time (unique within the second by suffix), or
 * `explicit`. `configDir`: the folder the config was read from (LoadedConfig.dir), recorded for its relative paths.
 */
export function createRunDir(cfg: ExperimentConfig, configDir: string | undefined, explicit?: string): { id: string; dir: string } {
  if (explicit) {
    const dir = resolve(explicit);
    mkdirSync(dir, { recursive: true });
    writeStored(dir, cfg, configDir);
    return { id: basename(dir), dir };
  }
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const base = `${cfg.name ?? 'run'}-${stamp}`;
  let id = base;
  for (let k = 2; existsSync(join(runsRoot(), id)); k++) id = `${base}-${k}`;
  const dir = join(runsRoot(), id);
  mkdirSync(dir, { recursive: true });
  writeStored(dir, cfg, configDir);
  return { id, dir };
}

/** Find a run by id (under the runs root) or by path; returns its folder and saved config (`loaded`: with the folder it resolves against). */
export function openRun(idOrPath: string): { id: string; dir: string; cfg: ExperimentConfig; loaded: LoadedConfig } {
  const candidates = isAbsolute(idOrPath) || idOrPath.includes('/') ? [resolve(idOrPath)] : [join(runsRoot(), idOrPath), resolve(idOrPath)];
  const dir = candidates.find((d) => existsSync(join(d, 'config.json')));
  if (!dir) throw new Error(`run not found: ${idOrPath} (looked in ${candidates.join(', ')}; a run folder holds config.json)`);
  const file = join(dir, 'config.json');
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`run ${basename(dir)}: cannot read its config ${file} (${(e as Error).message})`);
  }
  const loaded = validateLoaded(raw, { file, job: 'stored', baseDir: storedBaseDir(dir) });
  return { id: basename(dir), dir, cfg: loaded.cfg, loaded };
}

/** openRun for a run whose config names `plugins:` (loaded first, asked for as a config's are). */
export async function openRunWithPlugins(idOrPath: string): Promise<ReturnType<typeof openRun>> {
  const candidates = isAbsolute(idOrPath) || idOrPath.includes('/') ? [resolve(idOrPath)] : [join(runsRoot(), idOrPath), resolve(idOrPath)];
  const dir = candidates.find((d) => existsSync(join(d, 'config.json')));
  if (dir) {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    } catch {
      raw = undefined; // openRun names the unreadable file
    }
    await loadPlugins(raw, storedBaseDir(dir), `run ${basename(dir)}`);
  }
  return openRun(idOrPath);
}

/** The model + task wiring a run needs; built by ./compose.ts from the configured task's kit. */
export interface TaskSession {
  ports: Omit<LoopPorts, 'sink'>;
  sft: SftPort;
  /** The task kit's tokenizer (a run's stored trajectories decode with it), when the session has a kit. */
  tokenizer?: TokenizerPort;
  /** Demonstrations for the warm start (scripted expert or sft.demos_path). */
  demos(): Promise<Demo[]>;
  /** Held-out evaluation of the current policy (greedy unless eval.temperature > 0). */
  evaluate(n: number, onProgress?: (done: number, total: number) => void): Promise<EvalSummary>;
  /** The validation split's metrics (eval.validation training questions held back), when the config holds one back. */
  validate?(): Promise<Record<string, number>>;
  /**
   * The evaluation harness's episodes (`arbor eval --k`): `k` samples per question at `temperature`
   * over the held-out tasks (the first `n`), or with `all` over every task the kit has (the whole task
   * file or dataset, training rows too).
   */
  sampleEval?(o: { k: number; temperature: number; n?: number; all?: boolean; onProgress?: (done: number, total: number) => void }): Promise<Trajectory[]>;
  /** Naive RAG baseline on the same held-out questions: one retrieval with the question, then answer. */
  evaluateNaiveRag?(n: number): Promise<EvalSummary>;
  /** Load an HF checkpoint folder into the policy (weights and optimizer state; not the reference). */
  loadPolicy(dir: string): Promise<void>;
  /**
   * Set the KL reference (when there is one) to the policy's current weights, or to the weights
   * of the checkpoint folder `dir` (without touching the policy): after the SFT warm start the
   * reference is the SFT model, as in verl/Agent-R1, not the model SFT started from.
   */
  setReference?(dir?: string): Promise<void>;
  /** Problems found while opening the task (e.g. prompts with out-of-vocabulary words), for the run log. */
  warnings?: string[];
  /** Console output of the user's sandboxed tools and reward since the last call. */
  takeLogs?(): string[];
  close(): Promise<void>;
}
