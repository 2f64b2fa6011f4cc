/**
 * playground.chat on a real engine with a real model folder from `arbor init-model --tiny
 * --task multihop`. To make the model's behaviour known, its layers are silenced (attention and
 * MLP output projections zero) so the next token depends only on the current one, and an untied
 * lm_head is set to a bigram table: assistant → <search> → <city> → </search>, then after the
 * observation </information> → <answer> → <country> → </answer>. Everything else is the real
 * path: HF folder loading, the chat template, KV-cache decoding through the rollout engine,
 * the BM25 search tool over the run's held-out world, Search-R1 parsing, streamed events.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initTinyModel } from '../../../engine/cli/commands/init-model';
import { generateWorld } from '../../../engine/tasks/multihop/world';
import { createEngine } from '../../../engine/server/engine';
import { chatSettings } from '../../../engine/playground/playground';
import { createClient, EngineError, inProcessTransport } from '../../../engine/server/client';
import type { Method } from '../../../engine/server/protocol';
import type { EngineServer } from '../../../engine/server/server';
import { bigramModel } from '../server/fixtures/bigram-model';

const home = mkdtempSync(join(tmpdir(), 'arbor-playground-'));
const modelDir = join(home, 'model');
const WORLD = 1001;
const world = generateWorld(WORLD);
const city = world.cities[0]!.name.toLowerCase();
const country = world.cities[0]!.country.toLowerCase();
let engine: EngineServer;
let checkpointId: string;

/**
 * One protocol request through the protocol client (results and events checked against the
 * protocol on receipt); collects the chat events it pushes.
 */
async function request(method: Method, params: unknown) {
  const c = createClient(inProcessTransport(engine), {
    onProtocolError: (m) => {
      throw new Error(m);
    },
  });
  const events: Record<string, unknown>[] = [];
  c.on('chat', (d) => events.push(d));
  try {
    const result: any = await (c.request as (m: Method, p: unknown) => Promise<unknown>)(method, params);
    return { reply: { result } as { result?: any; error?: { message: string } }, events };
  } catch (e) {
    if (e instanceof EngineError && e.code !== 'bad_result')
      return { reply: { error: { message: e.message } } as { result?: any; error?: { message: string } }, events };
    throw e;
  } finally {
    c.close();
  }
}

/**
 * playground.chat that the client cancels the moment the first chat event of type `on` reaches it
 * (inside the engine's send, so before the engine goes on): the reply, the chat events and the
 * cancel's answer.
 */
async function chatCancelledOn(on: string, params: { checkpoint: string; messages: { role: string; content: string }[]; chatId: string }) {
  const events: Record<string, unknown>[] = [];
  let cancelReply: unknown;
  const reply = await new Promise<{ result?: any; error?: { message: string } }>((resolve) => {
    const client = {
      send(m: any) {
        if (m.event === 'chat') {
          events.push(m.data);
          if (m.data.type === on && cancelReply === undefined) {
            cancelReply = null;
            void engine.handle(client, { id: 2, method: 'playground.cancel', params: { chatId: params.chatId } });
          }
        } else if (m.id === 2) cancelReply = m.result;
        else if (m.id === 1) resolve(m);
      },
    };
    void engine.handle(client, { id: 1, method: 'playground.chat', params });
  });
  return { reply, events, cancelReply };
}

beforeAll(async () => {
  initTinyModel(modelDir, { task: 'multihop', seed: 5, hidden: 32, layers: 1, heads: 4, maxLength: 256 });
  bigramModel(modelDir, [
    ['assistant', '<search>'],
    ['<search>', city],
    [city, '</search>'],
    ['</information>', '<answer>'],
    ['<answer>', country],
    [country, '</answer>'],
  ]);
  engine = await createEngine({ home });
  const store = engine.store!;
  const runId = store.createRun({
    name: 'trained',
    template: 'multihop',
    config: { task: { kind: 'multihop', eval_seed: WORLD }, rollout: { max_turns: 3, max_new_tokens: 8, max_total_length: 256 }, eval: { temperature: 0 } },
  });
  checkpointId = store.addCheckpoint(runId, 4, modelDir);
});

afterAll(async () => {
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('playground.chat', () => {
  it('runs the checkpoint with its tools and streams tokens, the tool call, the observation and the end', async () => {
    const { reply, events } = await request('playground.chat', {
      checkpoint: checkpointId,
      messages: [{ role: 'user', content: `where is ${city} ?` }],
      chatId: 'c1',
    });
    expect(reply.error).toBeUndefined();
    expect(events.every((e) => e.chatId === 'c1')).toBe(true);
    const kinds = events.map((e) => e.type);
    expect(kinds.filter((k) => k !== 'token')).toEqual(['turn', 'tool_call', 'observation', 'turn', 'done']);
    // Streamed text of each turn adds up to the turn's exact text.
    let streamed = '';
    const turns: string[] = [];
    for (const e of events) {
      if (e.type === 'token') streamed += e.text as string;
      if (e.type === 'turn') {
        expect(streamed).toBe(e.text);
        turns.push(e.text as string);
        streamed = '';
      }
    }
    expect(kinds.indexOf('token')).toBeLessThan(kinds.indexOf('turn'));
    expect(turns).toEqual([`<search> ${city} </search>`, `<answer> ${country} </answer>`]);
    const call = events.find((e) => e.type === 'tool_call')!;
    expect(call).toMatchObject({ name: 'search', args: { query: city } });
    // The observation is real BM25 output over the run's held-out world: passages naming the city.
    const obs = events.find((e) => e.type === 'observation')!;
    expect(obs.error).toBeUndefined();
    expect(obs.content).toMatch(/<information>[\s\S]*<\/information>/);
    expect(String(obs.content).toLowerCase()).toContain(city);
    const passage = world.passages.find((p) => p.text.toLowerCase().includes(city))!;
    expect(String(obs.content)).toContain(passage.text.slice(0, 20));
    expect(events[events.length - 1]).toMatchObject({ type: 'done', text: `<answer> ${country} </answer>` });
    expect(reply.result).toMatchObject({ chatId: 'c1', world: WORLD, checkpoint: { id: checkpointId, step: 4 } });
    expect(reply.result.transcript.map((t: { role: string }) => t.role)).toEqual(['assistant', 'tool_call', 'tool', 'assistant']);
  });

  it('continues a conversation; a switched-off tool becomes an error observation', async () => {
    const { reply, events } = await request('playground.chat', {
      checkpoint: checkpointId,
      messages: [
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: `<answer> ${country} </answer>` },
        { role: 'user', content: `and ${city} ?` },
      ],
      tools: [],
    });
    expect(reply.error).toBeUndefined();
    const obs = events.find((e) => e.type === 'observation')!;
    expect(obs.error).toMatch(/unknown tool "search"/);
    // The error observation also ends with </information>, so the model answers on its second turn.
    expect(events[events.length - 1]).toMatchObject({ type: 'done', text: `<answer> ${country} </answer>` });
    expect(reply.result.transcript.map((t: { role: string }) => t.role)).toEqual(['assistant', 'tool_call', 'tool', 'assistant']);
  });

  it("stops at the run's turn limit when the model never answers", async () => {
    // A second folder whose chain loops on searching: three turns (rollout.max_turns) then a limit stop.
    const loopDir = join(home, 'loop');
    initTinyModel(loopDir, { task: 'multihop', seed: 6, hidden: 32, layers: 1, heads: 4, maxLength: 256 });
    bigramModel(loopDir, [
      ['assistant', '<search>'],
      ['<search>', city],
      [city, '</search>'],
      ['</information>', '<search>'],
    ]);
    const store = engine.store!;
    const runId = store.createRun({
      name: 'loops',
      template: 'multihop',
      config: { task: { kind: 'multihop', eval_seed: WORLD }, rollout: { max_turns: 3, max_new_tokens: 8, max_total_length: 256 } },
    });
    const ck = store.addCheckpoint(runId, 1, loopDir);
    const { reply, events } = await request('playground.chat', { checkpoint: ck, messages: [{ role: 'user', content: city }] });
    expect(reply.error).toBeUndefined();
    expect(events.filter((e) => e.type === 'tool_call')).toHaveLength(3);
    expect(events[events.length - 1]).toMatchObject({ type: 'done', reason: expect.stringMatching(/stopped at a limit \(3 turns/) });
  });

  it("searches a qa run's dataset contexts instead of a world", async () => {
    const file = join(home, 'qa.jsonl');
    const ctx = [
      [`${city} notes`, [`${city} is a quiet harbour town on the north coast .`]],
      ['second', ['nothing here .']],
      ['third', ['still nothing .']],
    ];
    writeFileSync(file, [0, 1, 2, 3, 4].map((i) => JSON.stringify({ question: `q${i} ?`, answer: 'x', context: ctx })).join('\n') + '\n');
    const store = engine.store!;
    const runId = store.createRun({
      name: 'qa',
      template: 'qa',
      config: { task: { kind: 'qa', dataset: file }, rollout: { max_turns: 3, max_new_tokens: 8, max_total_length: 256 } },
    });
    const ck = store.addCheckpoint(runId, 1, modelDir);
    const { reply, events } = await request('playground.chat', { checkpoint: ck, messages: [{ role: 'user', content: city }] });
    expect(reply.error).toBeUndefined();
    expect(reply.result).toMatchObject({ dataset: file });
    expect(reply.result.world).toBeUndefined();
    expect(String(events.find((e) => e.type === 'observation')!.content)).toContain('quiet harbour town on the north coast');
  });

  it('stops a running chat on playground.cancel, keeps the partial answer, and serves the next chat', async () => {
    // A folder whose chain never ends a turn (city → city …) under a 200-token turn limit.
    const longDir = join(home, 'long');
    initTinyModel(longDir, { task: 'multihop', seed: 7, hidden: 32, layers: 1, heads: 4, maxLength: 256 });
    bigramModel(longDir, [
      ['assistant', city],
      [city, city],
    ]);
    const store = engine.store!;
    const runId = store.createRun({
      name: 'long',
      template: 'multihop',
      config: { task: { kind: 'multihop', eval_seed: WORLD }, rollout: { max_turns: 1, max_new_tokens: 200, max_total_length: 256 } },
    });
    const ck = store.addCheckpoint(runId, 1, longDir);
    // Cancel from the client as soon as the first token arrives.
    const { reply, events, cancelReply } = await chatCancelledOn('token', { checkpoint: ck, messages: [{ role: 'user', content: city }], chatId: 'long' });
    expect(reply.error).toBeUndefined();
    expect(cancelReply).toEqual({ cancelled: true });
    const tokens = events.filter((e) => e.type === 'token');
    expect(tokens.length).toBeGreaterThan(0);
    expect(tokens.length).toBeLessThan(100); // stopped long before the 200-token limit
    const done = events[events.length - 1]!;
    expect(done).toMatchObject({ type: 'done', reason: 'stopped by the user', stopped: true });
    const partial = tokens.map((e) => e.text).join('');
    expect(done.text).toBe(partial);
    expect(partial).toContain(city);
    expect(reply.result).toMatchObject({ chatId: 'long', stopped: true, reason: 'stopped by the user', world: WORLD });
    expect(reply.result.transcript).toEqual([{ role: 'assistant', content: partial, tokens: expect.any(Number) }]);
    // A finished chat cannot be cancelled; the playground serves the next chat normally.
    expect((await request('playground.cancel', { chatId: 'long' })).reply.result).toEqual({ cancelled: false });
    const next = await request('playground.chat', { checkpoint: checkpointId, messages: [{ role: 'user', content: `where is ${city} ?` }], chatId: 'after' });
    expect(next.reply.error).toBeUndefined();
    expect(next.events[next.events.length - 1]).toMatchObject({ type: 'done', text: `<answer> ${country} </answer>` });
    expect(next.reply.result.stopped).toBeUndefined();
  });

  it('stops a chat cancelled after a finished turn, before its tool calls run (no error)', async () => {
    // The first turn ("<search> city </search>") is complete; its call has not run yet.
    const { reply, events, cancelReply } = await chatCancelledOn('turn', {
      checkpoint: checkpointId,
      messages: [{ role: 'user', content: `where is ${city} ?` }],
      chatId: 'mid',
    });
    expect(reply.error).toBeUndefined();
    expect(cancelReply).toEqual({ cancelled: true });
    expect(events.some((e) => e.type === 'error')).toBe(false);
    expect(events.some((e) => e.type === 'tool_call' || e.type === 'observation')).toBe(false);
    expect(events[events.length - 1]).toEqual({
      chatId: 'mid',
      type: 'done',
      text: `<search> ${city} </search>`,
      reason: 'stopped by the user',
      stopped: true,
    });
    expect(reply.result).toMatchObject({ chatId: 'mid', stopped: true, checkpoint: { id: checkpointId, step: 4 } });
    expect(reply.result.transcript).toEqual([{ role: 'assistant', content: `<search> ${city} </search>`, tokens: expect.any(Number) }]);
  });

  it('stops a queued chat before it starts, without touching the one running', async () => {
    const got: Record<string, any> = {};
    const events: Record<string, unknown>[] = [];
    await new Promise<void>((resolve) => {
      const client = {
        send(m: any) {
          if (m.event === 'chat') events.push(m.data);
          else if (m.id === 12 || m.id === 13 || m.id === 14) {
            got[m.id] = m;
            if (got[12] && got[13] && got[14]) resolve();
          }
        },
      };
      void engine.handle(client, {
        id: 12,
        method: 'playground.chat',
        params: { checkpoint: checkpointId, messages: [{ role: 'user', content: `where is ${city} ?` }], chatId: 'first' },
      });
      // Chats run one at a time: 'queued' waits behind 'first' and is cancelled while waiting.
      void engine.handle(client, {
        id: 13,
        method: 'playground.chat',
        params: { checkpoint: checkpointId, messages: [{ role: 'user', content: city }], chatId: 'queued' },
      });
      void engine.handle(client, { id: 14, method: 'playground.cancel', params: { chatId: 'queued' } });
    });
    expect(got[14].result).toEqual({ cancelled: true });
    expect(got[12].error).toBeUndefined();
    expect(got[12].result.stopped).toBeUndefined();
    expect(got[12].result.transcript.map((t: { role: string }) => t.role)).toEqual(['assistant', 'tool_call', 'tool', 'assistant']);
    expect(got[13].error).toBeUndefined();
    expect(got[13].result).toMatchObject({ chatId: 'queued', stopped: true, transcript: [], checkpoint: { id: checkpointId } });
    expect(events.filter((e) => e.chatId === 'queued')).toEqual([{ chatId: 'queued', type: 'done', text: '', reason: 'stopped by the user', stopped: true }]);
  });

  it('names the checkpoint it cannot find, as an error event and a failed request', async () => {
    const { reply, events } = await request('playground.chat', { checkpoint: 'nope:1', messages: [{ role: 'user', content: 'hi' }] });
    expect(reply.error?.message).toMatch(/no checkpoint "nope:1" in this workspace/);
    expect(events).toEqual([expect.objectContaining({ type: 'error', message: reply.error!.message })]);
  });

  it('reads limits and the world from the run config, with defaults for what is missing', () => {
    expect(chatSettings({ task: { eval_seed: 7 }, rollout: { max_turns: 2 } })).toEqual({
      world: 7,
      maxTurns: 2,
      maxNewTokens: 32,
      maxTotalLength: 384,
      temperature: 0,
    });
    expect(chatSettings({ task: { eval_seed: 'x' } }).world).toBe(1001);
    expect(chatSettings({ task: { kind: 'qa', dataset: '/d.jsonl' } }).dataset).toBe('/d.jsonl');
    expect(chatSettings({ task: { kind: 'multihop', dataset: '/d.jsonl' } }).dataset).toBeUndefined();
  });
});
