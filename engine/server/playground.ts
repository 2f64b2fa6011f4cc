// The playground's engine methods: playground.chat and playground.cancel (engine/playground/).
import { Playground, type ChatRequest } from '../playground/playground';
import type { Client } from './host';
import type { EngineServer } from './server';

/** Register playground.chat and playground.cancel on the engine. */
export function registerPlayground(engine: EngineServer): Playground {
  const p = new Playground(engine);
  engine.on('playground.chat', (params: ChatRequest, client: Client) => p.chat(params, client));
  engine.on('playground.cancel', (params: { chatId: string }) => p.cancel(params.chatId));
  return p;
}
