/**
 * MCP servers in the playground: a chat with a checkpoint of a run whose config has
 * environment.mcp_servers gets those servers' tools next to the run's own (BM25 search), starts
 * the servers once for the chat and closes them when it ends. The model is a bigram-table tiny
 * model (tests/engine/server/fixtures/bigram-model.ts) whose vocabulary has the tags format's
 * `<stats>` tags: assistant → <stats> → </stats>, then after the observation (which the word
 * tokenizer reads as `<` unk `>` … since only the model's tags are its words) > →
 * <answer> → country → </answer>. The call runs on the real test MCP server over stdio.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TASK_VOCABULARIES } from '../../../engine/cli/commands/init-model';
import { initWeights, saveCheckpoint } from '../../../engine/model/checkpoint';
import { tinyConfig } from '../../../engine/model/config';
import { writeWordTokenizer } from '../../../engine/model/tokenizer';
import { generateWorld } from '../../../engine/tasks/multihop/world';
import { createEngine } from '../../../engine/server/engine';
import { createClient, EngineError, inProcessTransport } from '../../../engine/server/client';
import { playgroundMcpServers } from '../../../engine/playground/playground';
import type { EngineServer } from '../../../engine/server/server';
import { bigramModel } from '../server/fixtures/bigram-model';

const SERVER = join(__dirname, '..', 'interop', 'fixtures', 'test-mcp-server.mjs');
const home = mkdtempSync(join(tmpdir(), 'arbor-mcp-playground-'));
const modelDir = join(home, 'model');
const callLog = join(home, 'calls.log');
const WORLD = 1001;
const country = generateWorld(WORLD).cities[0]!.country.toLowerCase();
let engine: EngineServer;

async function chat(params: Record<string, unknown>) {
  const c = createClient(inProcessTransport(engine), {
    onProtocolError: (m) => {
      throw new Error(m);
    },
  });
  const events: Record<string, any>[] = [];
  c.on('chat', (d) => events.push(d as Record<string, any>));
  try {
    return { result: (await c.request('playground.chat', params as never)) as any, events, error: undefined as string | undefined };
  } catch (e) {
    if (e instanceof EngineError) return { result: undefined, events, error: e.message };
    throw e;
  } finally {
    c.close();
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(async () => {
  mkdirSync(modelDir, { recursive: true });
  const tok = writeWordTokenizer(modelDir, [...TASK_VOCABULARIES.multihop!(), '<stats>', '</stats>']);
  const config = tinyConfig({
    vocabSize: tok.vocabSize,
    hiddenSize: 32,
    layers: 1,
    heads: 4,
    maxPositionEmbeddings: 384,
    eosTokenId: tok.eosTokenId ?? null,
    padTokenId: tok.padTokenId,
    bosTokenId: null,
  });
  saveCheckpoint(modelDir, config, initWeights(config, 5));
  bigramModel(modelDir, [
    ['assistant', '<stats>'],
    ['<stats>', '</stats>'],
    ['>', '<answer>'],
    ['<answer>', country],
    [country, '</answer>'],
  ]);
  writeFileSync(
    join(home, 'mcp.json'),
    JSON.stringify({
      mcpServers: {
        t: { command: process.execPath, args: [SERVER], env: { ARBOR_TEST_CALL_LOG: callLog, ARBOR_TEST_VALUE: 'from-config' }, tools: ['stats', 'add'] },
      },
    }),
  );
  engine = await createEngine({ home });
});

afterAll(async () => {
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('playground.chat with environment.mcp_servers', () => {
  it("calls the run's MCP tool, gets its result as the observation, and stops the server after the chat", async () => {
    const store = engine.store!;
    const runId = store.createRun({
      name: 'mcp',
      template: 'multihop',
      config: {
        task: { kind: 'multihop', eval_seed: WORLD },
        environment: { format: 'tags', mcp_servers: join(home, 'mcp.json') },
        rollout: { max_turns: 3, max_new_tokens: 8, max_total_length: 384 },
      },
    });
    const ck = store.addCheckpoint(runId, 1, modelDir);
    const { result, events, error } = await chat({ checkpoint: ck, messages: [{ role: 'user', content: 'stats ?' }], chatId: 'm1' });
    expect(error).toBeUndefined();
    expect(events.filter((e) => e.type !== 'token').map((e) => e.type)).toEqual(['turn', 'tool_call', 'observation', 'turn', 'done']);
    expect(events.find((e) => e.type === 'tool_call')).toMatchObject({ name: 'stats', args: {} });
    const obs = events.find((e) => e.type === 'observation')!;
    expect(obs.error).toBeUndefined();
    // The server's own answer: one call served, the env from the config, its pid.
    const stats = JSON.parse(/<result>\s*(\{.*\})\s*<\/result>/s.exec(obs.content)![1]!);
    expect(stats).toMatchObject({ cancelled: 0, env: 'from-config' });
    expect(events.at(-1)).toMatchObject({ type: 'done', text: `<answer> ${country} </answer>` });
    expect(result).toMatchObject({ chatId: 'm1', format: 'tags' });
    // One process started for the chat, it served the call, and it is gone once the chat ended.
    const log = readFileSync(callLog, 'utf8').trim().split('\n');
    expect(log).toEqual([`${stats.pid} start`]); // stats is not logged by the fixture; only the start
    expect(alive(stats.pid)).toBe(false);
    // A second chat starts the server again (per chat) and works the same.
    const again = await chat({ checkpoint: ck, messages: [{ role: 'user', content: 'stats ?' }], chatId: 'm2' });
    expect(again.error).toBeUndefined();
    const stats2 = JSON.parse(/<result>\s*(\{.*\})\s*<\/result>/s.exec(again.events.find((e) => e.type === 'observation')!.content)![1]!);
    expect(stats2.pid).not.toBe(stats.pid);
    expect(alive(stats2.pid)).toBe(false);
  });

  it('names a bad mcp_servers entry of the run, as a failed chat', async () => {
    const store = engine.store!;
    const runId = store.createRun({
      name: 'bad',
      template: 'multihop',
      config: {
        task: { kind: 'multihop', eval_seed: WORLD },
        environment: { format: 'tags', mcp_servers: { t: { command: process.execPath, args: [SERVER], tools: ['nope'] } } },
      },
    });
    const ck = store.addCheckpoint(runId, 1, modelDir);
    const { error, events } = await chat({ checkpoint: ck, messages: [{ role: 'user', content: 'stats ?' }] });
    expect(error).toMatch(/nope/);
    expect(events.at(-1)).toMatchObject({ type: 'error' });
  });

  it('reads mcp_servers inline or from a file, resolving cwd, and names the field it cannot read', () => {
    expect(playgroundMcpServers({ s: { command: 'x', cwd: 'sub' } }, '/base').s).toMatchObject({ command: 'x', cwd: '/base/sub' });
    expect(playgroundMcpServers(join(home, 'mcp.json'), '/base').t).toMatchObject({ tools: ['stats', 'add'], cwd: '/base' });
    expect(() => playgroundMcpServers('missing.json', home)).toThrow(/environment\.mcp_servers: cannot read .*missing\.json/);
    expect(() => playgroundMcpServers({ s: { args: [] } }, home)).toThrow(/environment\.mcp_servers\.s\.command/);
  });
});
