/**
 * Builds the engine: the server over the workspace database, with the run templates and the
 * handlers that other areas provide (training jobs, sandbox, playground).
 */
import { join } from 'node:path';
import '../builtins'; // every built-in estimator, loss, format and task kind, before a config is read
import { EngineServer } from './server';
import { builtinTemplates, registerAreaHandlers } from './templates';
import { registerPlayground } from './playground';
import { registerReplay } from './replay';
import { registerModels } from './models';

export async function createEngine(opts: { home: string; dbPath?: string }): Promise<EngineServer> {
  const engine = new EngineServer({ home: opts.home, dbPath: opts.dbPath ?? join(opts.home, 'arbor.db'), templates: await builtinTemplates(opts.home) });
  await registerAreaHandlers(engine);
  registerPlayground(engine);
  registerReplay(engine);
  registerModels(engine);
  return engine;
}
