/**
 * Run templates and area handlers plugged into the engine server.
 */
import type { RunTemplate } from './runs';
import type { EngineServer } from './server';

export async function builtinTemplates(): Promise<RunTemplate[]> {
  return [];
}

export async function registerAreaHandlers(_engine: EngineServer): Promise<void> {}
