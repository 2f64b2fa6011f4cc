// The playground's engine methods: playground.chat and playground.cancel (engine/playground/).
import { Playground, type ChatRequest } from '../playground/playground';
import type { Client, EngineHost } from './host';

/** Register playground.chat and playground.cancel on the engine; the loaded model (ORT worker threads) is released with it. */
export function registerPlayground(engine: EngineHost): void {
  const p = new Playground(engine);
  engine.on('playground.chat', (params: ChatRequest, client: Client) => p.chat(params, client));
  engine.on('playground.cancel', (params: { chatId: string }) => p.cancel(params.chatId));
  engine.onClose(() => void p.close());
}
