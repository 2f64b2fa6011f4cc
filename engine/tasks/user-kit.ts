/**
 * A user environment's files in the sandbox for a whole run: the researcher's tool files (any
 * number, any tool names) and reward file, read from the workspace and loaded into one capped
 * worker (engine/env/sandbox-host.ts). Every task kind takes them through engine/tasks/env-setup.ts:
 * the tools join the task's built-in tools (a same-named one replaces it) and are called in the
 * config's `environment.format`; the reward function receives the whole episode and its value is
 * the training reward (its components are stored next to exact_match, which stays the evaluation
 * metric; its per-call `steps` become process rewards). A reward that throws stops the run with
 * the file and line.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { SandboxHost } from '../env/sandbox-host';
import type { ExperimentConfig } from '../config/experiment';
import type { TaskKit } from './kit';
import { openTaskKit } from './registry';

/** Workspace files of a user environment (paths relative to the workspace, e.g. tools/search.ts). */
export interface UserEnvironmentFiles {
  tools?: string[];
  reward?: string;
  /** environment.sandbox: `process` runs them in V8 (asked about like a plugin). */
  sandbox?: 'quickjs' | 'process';
}

/** Read the files and load them into a sandbox host (throws naming the file and line). */
export async function openUserEnvironment(files: UserEnvironmentFiles, workspace: string): Promise<SandboxHost> {
  const read = (p: string) => {
    const full = isAbsolute(p) ? p : join(workspace, p);
    try {
      return { path: p, source: readFileSync(full, 'utf8') };
    } catch (e) {
      throw new Error(`environment: cannot read ${p} (${(e as Error).message})`);
    }
  };
  const tools = (files.tools ?? []).map(read);
  const reward = files.reward ? read(files.reward) : undefined;
  const { ensureConsent, sandboxedFileItem } = await import('../env/consent');
  const full = (p: string) => (isAbsolute(p) ? p : join(workspace, p));
  const engine = files.sandbox ?? 'quickjs';
  await ensureConsent(`the environment in ${workspace}`, [
    ...tools.map((f) => sandboxedFileItem('tool', full(f.path), f.source, engine, f.path)),
    ...(reward ? [sandboxedFileItem('reward', full(reward.path), reward.source, engine, reward.path)] : []),
  ]);
  return SandboxHost.open({ tools, reward }, undefined, workspace, { engine });
}

/** The config's task kit with the user's tools and reward (the host stays open for the run; close it after). */
export function userEnvKit(cfg: ExperimentConfig, host: SandboxHost): TaskKit {
  return openTaskKit(cfg, { host });
}
