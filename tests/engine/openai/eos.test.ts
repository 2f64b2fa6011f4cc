/**
 * Acceptance (#41): a completion whose first sampled token is the stop token (an undertrained model
 * does that often) is an empty message with finish_reason "stop", never a 500 — chat (with and
 * without tools, streamed or not) and /v1/completions; the empty turn is recorded and can be sent
 * back and continued. What an undertrained model writes and the endpoint returns (a call with an
 * empty name) is taken back, never a 400.
 */
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { EpisodeRecorder, episodeTrajectories } from '../../../engine/openai/episodes';
import { RequestSource } from '../../../engine/openai/requests';
import { ModelServer } from '../../../engine/openai/server';
import { toolsTokenizer } from '../../../engine/tasks/tools/kit';
import { TOOLS } from './helpers';
import { ScriptedBackend } from './scripted';

let server: ModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('first sampled token is EOS', () => {
  const tok = toolsTokenizer().hf;
  const end = tok.tokenId('<|im_end|>')!;

  async function open(scripts: number[][]) {
    const backend = new ScriptedBackend(tok.vocabSize, scripts);
    const requests = new RequestSource(backend, (ids) => tok.decode(ids));
    server = new ModelServer({ modelId: 'm', tokenizer: tok, requests, stopTokenIds: [end] });
    await server.listen();
    const rec = new EpisodeRecorder();
    const url = server.openEpisode('e', rec);
    return { client: new OpenAI({ baseURL: url, apiKey: 'x', maxRetries: 0 }), rec };
  }

  it('chat, completions and streams answer an empty message with finish_reason stop', async () => {
    const { client, rec } = await open([[end], [end], [end], [end], [...tok.encode('<answer> 4 </answer>'), end]]);
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'what is 2 + 2 ?' }];
    const a = await client.chat.completions.create({ model: 'm', messages, tools: TOOLS, temperature: 0, logprobs: true });
    expect(a.choices[0]!.finish_reason).toBe('stop');
    expect(a.choices[0]!.message.content).toBe('');
    expect(a.choices[0]!.message.tool_calls ?? []).toEqual([]);
    expect(a.choices[0]!.logprobs!.content!.length).toBe(1);
    expect(a.usage!.completion_tokens).toBe(1);

    const b = await client.chat.completions.create({ model: 'm', messages, temperature: 0 });
    expect(b.choices[0]!.finish_reason).toBe('stop');
    expect(b.choices[0]!.message.content).toBe('');

    const stream = await client.chat.completions.create({ model: 'm', messages, tools: TOOLS, temperature: 0, stream: true });
    let text = '';
    let finish: string | null = null;
    for await (const ch of stream) {
      text += ch.choices[0]?.delta.content ?? '';
      finish = ch.choices[0]?.finish_reason ?? finish;
    }
    expect(text).toBe('');
    expect(finish).toBe('stop');

    const c = await client.completions.create({ model: 'm', prompt: 'what is 2 + 2 ?', temperature: 0, max_tokens: 8 });
    expect(c.choices[0]!.finish_reason).toBe('stop');
    expect(c.choices[0]!.text).toBe('');

    // The empty turn sent back verbatim is continued from its sampled id.
    messages.push({ role: 'assistant', content: a.choices[0]!.message.content }, { role: 'user', content: 'answer please' });
    const d = await client.chat.completions.create({ model: 'm', messages, tools: TOOLS, temperature: 0 });
    expect(d.choices[0]!.message.content).toBe('<answer> 4 </answer>');
    expect(rec.calls).toHaveLength(5);
    expect(rec.calls[0]!.choices[0]!.ids).toEqual([end]);
    expect(rec.calls[4]!.parent).toEqual({ call: rec.calls[0]!.id, choice: 0 });
    const ts = episodeTrajectories(rec.calls, {
      taskId: 't',
      group: 0,
      firstSample: 0,
      seed: 0,
      outcome: { reward: 0, components: {} },
      decode: (ids) => (ids.length ? tok.decode(ids) : ''),
    });
    const long = ts.find((t) => t.turns.filter((u) => u.role === 'model').length === 2)!;
    expect(long.turns[0]!.tokenIds).toEqual([end]);
    expect(long.turns[0]!.lossMask).toEqual([1]);
  });

  it('a call with an empty function name, as the model wrote it, is taken back when sent back verbatim', async () => {
    const { client, rec } = await open([[...tok.encode('<tool_call>{"name": "", "arguments": {}}</tool_call>'), end], [end]]);
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'what is 2 + 2 ?' }];
    const a = await client.chat.completions.create({ model: 'm', messages, tools: TOOLS, temperature: 0 });
    const call = a.choices[0]!.message.tool_calls![0]!;
    expect(call.type === 'function' && call.function.name).toBe('');
    messages.push(
      { role: 'assistant', content: a.choices[0]!.message.content, tool_calls: a.choices[0]!.message.tool_calls },
      { role: 'tool', tool_call_id: call.id, content: 'error: unknown tool' },
    );
    const b = await client.chat.completions.create({ model: 'm', messages, tools: TOOLS, temperature: 0 });
    expect(b.choices[0]!.finish_reason).toBe('stop');
    expect(rec.calls[1]!.parent).toEqual({ call: rec.calls[0]!.id, choice: 0 });
  });
});
