/**
 * A config's `plugins:`: module files (TypeScript or JavaScript, paths relative to the config)
 * loaded before the config is validated. A plugin adds to Arbor's registries by calling their
 * `register…` functions when it is imported: registerEstimator (engine/rl/index.ts),
 * registerPolicyLoss (engine/rl/policy-losses.ts), registerFormat (engine/env/formats.ts),
 * registerTaskKit (engine/tasks/registry.ts). Its names and option sections then validate like
 * the built-in ones (README "Write your own …").
 *
 * A plugin is code that runs in Arbor's own process (its numerics are part of the training
 * step), not in the tool sandbox: it is asked for like an MCP server command (engine/env/consent.ts,
 * item kind "plugin"; Arbor's resources/ are trusted) before it is imported, and a run's stored
 * config names it, so resuming or forking the run loads it again (asking again if it changed).
 */
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ensureConsent, fileItem } from '../env/consent';
import { ConfigError } from './errors';

const loaded = new Set<string>();

/** The plugin paths a raw config lists, made absolute against its folder (non-strings are left to the schema to refuse). */
export function pluginPaths(raw: unknown, baseDir: string): { field: string; path: string }[] {
  const list = raw && typeof raw === 'object' ? (raw as { plugins?: unknown }).plugins : undefined;
  if (!Array.isArray(list)) return [];
  return list.flatMap((p, i) => (typeof p === 'string' && p ? [{ field: `plugins[${i}]`, path: isAbsolute(p) ? p : resolve(baseDir, p) }] : []));
}

/** Whether this process has imported the plugin at `path` (absolute). */
export function pluginLoaded(path: string): boolean {
  return loaded.has(path);
}

/**
 * Import the plugins a raw config lists (each once per process), after asking for the ones this
 * workspace has not approved. Errors name the `plugins[i]` entry and the file.
 */
export async function loadPlugins(raw: unknown, baseDir: string, origin: string, file?: string): Promise<void> {
  const todo = pluginPaths(raw, baseDir).filter((p) => !loaded.has(p.path));
  if (todo.length === 0) return;
  const missing = todo.filter((p) => !existsSync(p.path));
  if (missing.length)
    throw new ConfigError(
      missing.map((p) => ({ field: p.field, message: `file not found: ${p.path}` })),
      file,
    );
  await ensureConsent(
    origin,
    todo.map((p) => fileItem('plugin', p.path, readFileSync(p.path, 'utf8'))),
  );
  for (const p of todo) {
    try {
      await import(pathToFileURL(p.path).href);
    } catch (e) {
      throw new ConfigError([{ field: p.field, message: `${p.path} failed to load: ${(e as Error).message}` }], file);
    }
    loaded.add(p.path);
  }
}
