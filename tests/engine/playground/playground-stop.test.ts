// The Playground's Stop through the real client: the zustand store talks WebSocket to a real
// engine (createEngine: playground registered) chatting with a real model folder whose greedy
// decoding never ends a turn (a bigram loop, 200-token turn limit). Stop must end the chat
// early, keep the streamed partial answer as a finished assistant message with a "Stopped" note,
// and leave the store ready for the next message.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTinyModel } from '../../../engine/cli/commands/init-model';
import { generateWorld } from '../../../engine/tasks/multihop/world';
import { createEngine } from '../../../engine/server/engine';
import type { EngineServer } from '../../../engine/server/server';
import type { WebServer } from '../../../engine/server/transports';
import type { Transport } from '../../../renderer/src/api/transports';
import type { ArborStore } from '../../../renderer/src/store';
import { bigramModel } from '../server/fixtures/bigram-model';
import { storeOverWebSocket, until } from '../server/fixtures/ws-store';

let home: string;
let engine: EngineServer;
let web: WebServer;
let transport: Transport;
let store: ArborStore;
let checkpoint: string;
const city = generateWorld(1001).cities[0]!.name.toLowerCase();

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'arbor-stop-'));
  const dir = join(home, 'model');
  initTinyModel(dir, { task: 'multihop', seed: 7, hidden: 32, layers: 1, heads: 4, maxLength: 256 });
  bigramModel(dir, [
    ['assistant', city],
    [city, city],
  ]);
  engine = await createEngine({ home });
  const runId = engine.store!.createRun({
    name: 'long',
    template: 'multihop',
    config: { task: { kind: 'multihop', eval_seed: 1001 }, rollout: { max_turns: 1, max_new_tokens: 200, max_total_length: 256 } },
  });
  checkpoint = engine.store!.addCheckpoint(runId, 1, dir);
  ({ web, transport, store } = await storeOverWebSocket(engine));
});

afterAll(async () => {
  transport?.close();
  await web?.close();
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('playground Stop', () => {
  it('ends a running chat with the partial answer and a note, then accepts the next message', async () => {
    const s = () => store.getState();
    await s().playgroundActions.loadCheckpoints();
    s().playgroundActions.setCheckpoint(checkpoint);
    const sent = s().playgroundActions.send(city);
    await until(() => s().playground.transcript.some((t) => t.kind === 'assistant' && t.text.length > 0), 'the first streamed tokens');
    expect(s().playground.chatting).toBe(true);
    expect(s().playground.chatId).toMatch(/^chat-/);
    await s().playgroundActions.stop();
    await sent;
    expect(s().playground.chatting).toBe(false);
    expect(s().playground.chatId).toBeNull();
    const items = s().playground.transcript;
    expect(items.map((t) => t.kind)).toEqual(['user', 'assistant', 'note']);
    const answer = items[1] as { kind: 'assistant'; text: string; done: boolean };
    expect(answer.done).toBe(true);
    expect(answer.text).toContain(city);
    // Far fewer than the 200 tokens the turn limit allows (each token is the city's name).
    expect(answer.text.split(city).length - 1).toBeLessThan(100);
    expect((items[2] as { text: string }).text).toMatch(/^Stopped/);
    // Stop with nothing running is a no-op; a new message starts a new chat.
    await s().playgroundActions.stop();
    const again = s().playgroundActions.send(city);
    await until(() => s().playground.transcript.filter((t) => t.kind === 'assistant').length === 2 && s().playground.chatting, 'the second chat');
    await s().playgroundActions.stop();
    await again;
    expect(s().playground.transcript.filter((t) => t.kind === 'note')).toHaveLength(2);
    expect(s().playground.transcript.some((t) => t.kind === 'error')).toBe(false);
  });
});
