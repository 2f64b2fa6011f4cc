/**
 * Acceptance (#23): the official `openai` npm client against `arbor serve-model`'s endpoint on a
 * tiny model folder: models list, chat completions with tools, logprobs/top_logprobs (one entry
 * per completion token, usage.completion_tokens their count), return_token_ids, streamed chunks
 * equal to the non-streamed greedy text, n: 2 with a seed reproducible, 401 / 400 / 404, a
 * foreign Host refused, and concurrent requests decoded in shared batches.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveLora } from '../../../engine/model/lora';
import { PolicyModel } from '../../../engine/model/runtime';
import { resolveModelFolder, serveModel, type ServedModel } from '../../../engine/openai/serve-model';
import { readTokenDemos } from '../../../engine/train/sft';
import { TOOLS, toolsModelFolder } from './helpers';

const home = mkdtempSync(join(tmpdir(), 'arbor-openai-'));
const folder = join(home, 'tiny-tools');
let served: ServedModel;
let client: OpenAI;
const KEY = 'sk-test-123';

beforeAll(async () => {
  toolsModelFolder(folder);
  served = await serveModel(folder, { apiKey: KEY, device: 'cpu', threads: 1, maxBatch: 8, name: 'tiny' });
  client = new OpenAI({ baseURL: served.url, apiKey: KEY, maxRetries: 0 });
}, 60_000);
afterAll(async () => {
  await served?.close();
  rmSync(home, { recursive: true, force: true });
});

const user = [{ role: 'user' as const, content: 'how old was alvin knox when the iron bridge guild was founded ?' }];

describe('the OpenAI-compatible endpoint through the official client', () => {
  it('lists the model', async () => {
    const list = await client.models.list();
    expect(list.data.map((m) => m.id)).toEqual(['tiny']);
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });

  it('chat with tools, logprobs and top_logprobs, return_token_ids: one entry per completion token, exact usage', async () => {
    const r = await client.chat.completions.create({
      model: 'tiny',
      messages: user,
      tools: TOOLS,
      temperature: 0,
      max_tokens: 12,
      logprobs: true,
      top_logprobs: 3,
      // @ts-expect-error vLLM's extra field, passed through by the client
      return_token_ids: true,
    });
    const c = r.choices[0]!;
    const entries = c.logprobs!.content!;
    expect(entries.length).toBe(r.usage!.completion_tokens);
    expect(entries.length).toBeGreaterThan(0);
    for (const e of entries) {
      expect(e.top_logprobs.length).toBe(3);
      expect(e.logprob).toBeLessThanOrEqual(0);
      // Greedy: the sampled token is the most likely one.
      expect(e.logprob).toBeCloseTo(e.top_logprobs[0]!.logprob, 5);
    }
    const raw = r as unknown as { prompt_token_ids: number[]; choices: { token_ids: number[] }[] };
    expect(raw.prompt_token_ids.length).toBe(r.usage!.prompt_tokens);
    expect(raw.choices[0]!.token_ids.length).toBe(r.usage!.completion_tokens);
    expect(r.usage!.total_tokens).toBe(r.usage!.prompt_tokens + r.usage!.completion_tokens);
    expect(['stop', 'length', 'tool_calls']).toContain(c.finish_reason);
  });

  it('forces a named tool: the turn is a lookup call, finish_reason tool_calls', async () => {
    const r = await client.chat.completions.create({
      model: 'tiny',
      messages: user,
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'lookup' } },
      temperature: 0,
      max_tokens: 40,
      stop: ['}</tool_call>'],
    });
    // The forced opening makes any continuation of the tiny random model parse as a call only when
    // it closes the JSON; the request itself must succeed and report what the model did.
    const c = r.choices[0]!;
    if (c.finish_reason === 'tool_calls') expect(c.message.tool_calls![0]!.type === 'function' && c.message.tool_calls![0]!.function.name).toBe('lookup');
    else expect(c.message.content).toContain('<tool_call>{"name": "lookup", "arguments": ');
  });

  it('streams chunks whose text equals the non-streamed greedy text', async () => {
    const args = { model: 'tiny', messages: user, temperature: 0, max_tokens: 16 };
    const whole = await client.chat.completions.create(args);
    const stream = await client.chat.completions.create({ ...args, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      for (const ch of chunk.choices) {
        text += ch.delta.content ?? '';
        if (ch.finish_reason) finish = ch.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(usage).toEqual(whole.usage);
  });

  it('n: 2 with a seed is reproducible', async () => {
    const args = { model: 'tiny', messages: user, n: 2, seed: 7, temperature: 1, max_tokens: 10, logprobs: true };
    const a = await client.chat.completions.create(args);
    const b = await client.chat.completions.create(args);
    expect(a.choices.length).toBe(2);
    const ids = (r: OpenAI.ChatCompletion) => r.choices.map((c) => c.logprobs!.content!.map((e) => e.token).join('|'));
    expect(ids(a)).toEqual(ids(b));
    expect(a.choices.map((c) => c.message.content)).toEqual(b.choices.map((c) => c.message.content));
    expect(a.usage!.completion_tokens).toBe(a.choices.reduce((s, c) => s + c.logprobs!.content!.length, 0));
  });

  it('completions: a prompt string and token ids', async () => {
    const r = await client.completions.create({ model: 'tiny', prompt: 'the iron bridge guild', max_tokens: 5, temperature: 0, logprobs: 2 });
    expect(r.usage!.completion_tokens).toBe(r.choices[0]!.logprobs!.tokens!.length);
    const ids = await client.completions.create({
      model: 'tiny',
      prompt: [5, 6, 7] as unknown as string,
      max_tokens: 4,
      temperature: 0,
      // @ts-expect-error vLLM's extra field
      return_token_ids: true,
    });
    const raw = ids as unknown as { choices: { prompt_token_ids: number[]; token_ids: number[] }[] };
    expect(raw.choices[0]!.prompt_token_ids).toEqual([5, 6, 7]);
    expect(raw.choices[0]!.token_ids.length).toBe(ids.usage!.completion_tokens);
  });

  it('401 without the key, 400 naming the field, 404 for an unknown model', async () => {
    const anon = new OpenAI({ baseURL: served.url, apiKey: 'wrong', maxRetries: 0 });
    await expect(anon.models.list()).rejects.toMatchObject({ status: 401 });
    await expect(client.chat.completions.create({ model: 'tiny', messages: user, temperature: 5 })).rejects.toMatchObject({
      status: 400,
      error: expect.objectContaining({ param: 'temperature', type: 'invalid_request_error' }),
    });
    await expect(
      // @ts-expect-error an unknown parameter
      client.chat.completions.create({ model: 'tiny', messages: user, best_of: 3 }),
    ).rejects.toMatchObject({ status: 400, error: expect.objectContaining({ param: 'best_of' }) });
    await expect(client.chat.completions.create({ model: 'gpt-4o', messages: user })).rejects.toMatchObject({ status: 404 });
  });

  it('refuses a request whose Host is not a loopback name', async () => {
    const port = Number(new URL(served.url).port);
    const status = await new Promise<number>((resolve, reject) => {
      const r = request({ host: '127.0.0.1', port, path: '/v1/models', headers: { host: 'evil.example', authorization: `Bearer ${KEY}` } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      r.on('error', reject);
      r.end();
    });
    expect(status).toBe(403);
  });

  it('decodes concurrent requests in shared batches', async () => {
    const before = { ...served.server.o.requests.stats };
    await Promise.all(
      Array.from({ length: 6 }, (_, i) => client.chat.completions.create({ model: 'tiny', messages: user, seed: i, max_tokens: 8, temperature: 1 })),
    );
    const s = served.server.o.requests.stats;
    const meanBatch = (s.rowSum - before.rowSum) / (s.calls - before.calls);
    // More rows than calls: some decode calls served several requests at once (how many depends on
    // when the requests arrive, so the test asks only that they were batched, not queued one by one).
    expect(meanBatch).toBeGreaterThan(1);
  });
});

describe('serve-model on a LoRA checkpoint, recording conversations', () => {
  it('serves a PEFT adapter folder on its base; --record writes token-exact trajectories that SFT reads', async () => {
    const base = join(home, 'base');
    const adapter = join(home, 'adapter');
    const record = join(home, 'recorded.jsonl');
    toolsModelFolder(base, 3);
    const m = PolicyModel.load(base, { lora: resolveLora({ rank: 2, alpha: 4, dropout: 0, target_modules: 'all-linear' }) });
    m.save(adapter);
    await m.dispose();
    expect(existsSync(join(adapter, 'adapter_config.json'))).toBe(true);
    expect(existsSync(join(adapter, 'config.json'))).toBe(false);
    const s = await serveModel(adapter, { device: 'cpu', threads: 1, maxBatch: 4, record });
    let first: OpenAI.ChatCompletion;
    try {
      expect(s.model.lora?.rank).toBe(2);
      const c = new OpenAI({ baseURL: s.url, apiKey: 'none', maxRetries: 0 });
      const messages: OpenAI.ChatCompletionMessageParam[] = [...user];
      first = await c.chat.completions.create({ model: 'adapter', messages, temperature: 0, max_tokens: 6 });
      messages.push({ role: 'assistant', content: first.choices[0]!.message.content }, { role: 'user', content: 'and then ?' });
      await c.chat.completions.create({ model: 'adapter', messages, temperature: 0, max_tokens: 6 });
    } finally {
      await s.close();
    }
    const demos = readTokenDemos(record);
    expect(demos.length).toBe(1);
    const mask = [...demos[0]!.lossMask];
    // Two sampled turns (mask 1) with the new user message between them (mask 0).
    const runs = mask.map(String).join('').match(/1+/g) ?? [];
    expect(runs.length).toBe(2);
    expect(runs[0]!.length).toBe(first!.usage!.completion_tokens);
  }, 60_000);
});

describe('serve-model <run>', () => {
  it("resolves a run folder to its latest checkpoint (the SFT warm start's when RL saved none)", async () => {
    const run = join(home, 'run');
    const ck = (sub: string, step: number) => {
      const dir = join(run, sub, `step-${String(step).padStart(6, '0')}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'config.json'), '{}');
      writeFileSync(join(dir, 'trainer_state.json'), JSON.stringify({ step, phase: sub.startsWith('sft') ? 'sft' : 'rl', seed: 0 }));
      return dir;
    };
    const sft = ck(join('sft', 'checkpoints'), 40);
    expect(await resolveModelFolder(run)).toBe(sft);
    ck('checkpoints', 2);
    const last = ck('checkpoints', 4);
    expect(await resolveModelFolder(run)).toBe(last);
    expect(await resolveModelFolder(last)).toBe(last);
    await expect(resolveModelFolder(join(home, 'nothing-here'))).rejects.toThrow(/no such model folder, checkpoint or run/);
  });
});
