/**
 * Builds the engine: the server over the workspace database, with the run templates and the
 * handlers that other areas provide (training jobs, sandbox, playground).
 */
import { join } from 'node:path';
import { EngineServer } from './server';
import { builtinTemplates, registerAreaHandlers } from './templates';
import { registerPlayground } from './playground';
import { registerReplay } from './replay';
import { registerModels } from './models';

export async function createEngine(opts: { home: string; dbPath?: string }): Promise<EngineServer> {
  const engine = new EngineServer({ home: opts.home, dbPath: opts.dbPath ?? join(opts.home, 'arbor.db'), templates: await builtinTemplates(opts.home) });
  await registerAreaHandlers(engine);
  const playground = registerPlayground(engine);
  registerReplay(engine);
  registerModels(engine);
  // The playground keeps a model (ORT worker threads) loaded; release it with the engine.
  const close = engine.close.bind(engine);
  engine.close = () => {
    void playground.close();
    close();
  };
  return engine;
}
