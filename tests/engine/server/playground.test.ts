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
import { loadCheckpoint, saveCheckpoint } from '../../../engine/model/checkpoint';
import { HfTokenizer } from '../../../engine/model/tokenizer';
import { generateWorld } from '../../../engine/env/multihop';
import { createEngine } from '../../../engine/server/engine';
import { chatSettings } from '../../../engine/server/playground';
import type { EngineServer } from '../../../engine/server/server';

const home = mkdtempSync(join(tmpdir(), 'arbor-playground-'));
const modelDir = join(home, 'model');
const WORLD = 1001;
const world = generateWorld(WORLD);
const city = world.cities[0]!.name.toLowerCase();
const country = world.cities[0]!.country.toLowerCase();
let engine: EngineServer;
let checkpointId: string;

/** Rewrite the folder's weights so greedy decoding follows `bigrams` (current token → next token). */
function bigramModel(folder: string, bigrams: [string, string][]) {
  const tok = HfTokenizer.load(folder);
  const id = (t: string) => {
    const i = tok.tokenId(t);
    if (i === undefined) throw new Error(`token ${t} not in the vocabulary`);
    return i;
  };
  const { config, weights } = loadCheckpoint(folder);
  const D = config.hiddenSize;
  for (const [name, w] of weights) if (/o_proj\.weight$|down_proj\.weight$/.test(name)) w.fill(0);
  const emb = weights.get('model.embed_tokens.weight')!;
  const head = new Float32Array(config.vocabSize * D);
  for (const [from, to] of bigrams) {
    const f = id(from);
    const row = emb.subarray(f * D, (f + 1) * D);
    const norm = Math.hypot(...row);
    for (let d = 0; d < D; d++) head[id(to) * D + d] += (20 * row[d]!) / norm;
  }
  weights.set('lm_head.weight', head);
  saveCheckpoint(folder, { ...config, tieWordEmbeddings: false }, weights);
}

/** One protocol request through the engine as a client would send it; collects the events it pushes. */
async function request(method: string, params: unknown) {
  const events: { event: string; data: Record<string, unknown> }[] = [];
  const reply = await new Promise<{ result?: any; error?: { message: string } }>((resolve) => {
    const client = {
      send(m: any) {
        if (m.event) events.push(m);
        else if (m.id === 7) resolve(m);
      },
    };
    void engine.handle(client, { id: 7, method, params });
  });
  return { reply, events: events.filter((e) => e.event === 'chat').map((e) => e.data) };
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
  const runId = store.createRun({ name: 'trained', template: 'multihop', config: { task: { kind: 'multihop', eval_seed: WORLD }, rollout: { max_turns: 3, max_new_tokens: 8, max_total_length: 256 }, eval: { temperature: 0 } } });
  checkpointId = store.addCheckpoint(runId, 4, modelDir);
});

afterAll(async () => {
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('playground.chat', () => {
  it('runs the checkpoint with its tools and streams tokens, the tool call, the observation and the end', async () => {
    const { reply, events } = await request('playground.chat', { checkpoint: checkpointId, messages: [{ role: 'user', content: `where is ${city} ?` }], chatId: 'c1' });
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
      messages: [{ role: 'user', content: 'hello' }, { role: 'assistant', content: `<answer> ${country} </answer>` }, { role: 'user', content: `and ${city} ?` }],
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
    bigramModel(loopDir, [['assistant', '<search>'], ['<search>', city], [city, '</search>'], ['</information>', '<search>']]);
    const store = engine.store!;
    const runId = store.createRun({ name: 'loops', template: 'multihop', config: { task: { kind: 'multihop', eval_seed: WORLD }, rollout: { max_turns: 3, max_new_tokens: 8, max_total_length: 256 } } });
    const ck = store.addCheckpoint(runId, 1, loopDir);
    const { reply, events } = await request('playground.chat', { checkpoint: ck, messages: [{ role: 'user', content: city }] });
    expect(reply.error).toBeUndefined();
    expect(events.filter((e) => e.type === 'tool_call')).toHaveLength(3);
    expect(events[events.length - 1]).toMatchObject({ type: 'done', reason: expect.stringMatching(/stopped at a limit \(3 turns/) });
  });

  it("searches a qa run's dataset contexts instead of a world", async () => {
    const file = join(home, 'qa.jsonl');
    const ctx = [[`${city} notes`, [`${city} is a quiet harbour town on the north coast .`]], ['second', ['nothing here .']], ['third', ['still nothing .']]];
    writeFileSync(file, [0, 1, 2, 3, 4].map((i) => JSON.stringify({ question: `q${i} ?`, answer: 'x', context: ctx })).join('\n') + '\n');
    const store = engine.store!;
    const runId = store.createRun({ name: 'qa', template: 'qa', config: { task: { kind: 'qa', dataset: file }, rollout: { max_turns: 3, max_new_tokens: 8, max_total_length: 256 } } });
    const ck = store.addCheckpoint(runId, 1, modelDir);
    const { reply, events } = await request('playground.chat', { checkpoint: ck, messages: [{ role: 'user', content: city }] });
    expect(reply.error).toBeUndefined();
    expect(reply.result).toMatchObject({ dataset: file });
    expect(reply.result.world).toBeUndefined();
    expect(String(events.find((e) => e.type === 'observation')!.content)).toContain('quiet harbour town on the north coast');
  });

  it('names the checkpoint it cannot find, as an error event and a failed request', async () => {
    const { reply, events } = await request('playground.chat', { checkpoint: 'nope:1', messages: [{ role: 'user', content: 'hi' }] });
    expect(reply.error?.message).toMatch(/no checkpoint "nope:1" in this workspace/);
    expect(events).toEqual([expect.objectContaining({ type: 'error', message: reply.error!.message })]);
  });

  it('reads limits and the world from the run config, with defaults for what is missing', () => {
    expect(chatSettings({ task: { eval_seed: 7 }, rollout: { max_turns: 2 } })).toEqual({ world: 7, maxTurns: 2, maxNewTokens: 32, maxTotalLength: 384, temperature: 0 });
    expect(chatSettings({ task: { eval_seed: 'x' } }).world).toBe(1001);
    expect(chatSettings({ task: { kind: 'qa', dataset: '/d.jsonl' } }).dataset).toBe('/d.jsonl');
    expect(chatSettings({ task: { kind: 'multihop', dataset: '/d.jsonl' } }).dataset).toBeUndefined();
  });
});
