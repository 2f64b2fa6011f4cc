// An agent program that Arbor can train as it is: the official `openai` client, its own tools
// (a lookup over ../tools-task/world.json and a calculator), its own loop (`solve`). Two ways to run:
// - one process per episode (environment.agent.mode: process): Arbor starts it with
//   OPENAI_BASE_URL, OPENAI_API_KEY and ARBOR_TASK (the task row as JSON) in its environment; the
//   last line it prints is its answer. Outside training it runs against any OpenAI-compatible
//   server, e.g. `npx arbor serve-model <checkpoint>`:
//     OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=x ARBOR_TASK='{"prompt": "…"}' node agent.ts
// - long-lived (environment.agent.mode: serve, ARBOR_AGENT_MODE=serve): started once, it is handed
//   episodes by `serve` below (a JSON line on stdin each: {id, task, base_url, api_key}) and runs
//   them concurrently, answering each with a JSON line {id, answer} on stdout.
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const facts = (JSON.parse(readFileSync(join(here, '..', 'tools-task', 'world.json'), 'utf8')) as { facts: Record<string, string> }).facts;

function lookup(entity: string): string {
  const key = entity.trim().toLowerCase().replace(/^the /, '');
  return facts[key] ?? `no entry for ${key}`;
}

// + - * / and parentheses, parsed (never evaluated as code).
function calculator(expression: string): string {
  const toks = expression.match(/\d+(?:\.\d+)?|[-+*/()]|\S/g) ?? [];
  let i = 0;
  const primary = (): number => {
    const t = toks[i++];
    if (t === '-') return -primary();
    if (t === '(') {
      const v = sum();
      if (toks[i++] !== ')') throw new Error('missing )');
      return v;
    }
    if (t !== undefined && /^\d/.test(t)) return Number(t);
    throw new Error(`unexpected ${t ?? 'end'}`);
  };
  const product = (): number => {
    let v = primary();
    while (toks[i] === '*' || toks[i] === '/') v = toks[i++] === '*' ? v * primary() : v / primary();
    return v;
  };
  const sum = (): number => {
    let v = product();
    while (toks[i] === '+' || toks[i] === '-') v = toks[i++] === '+' ? v + product() : v - product();
    return v;
  };
  try {
    const v = sum();
    if (i < toks.length || !Number.isFinite(v)) throw new Error('not an arithmetic expression');
    return String(Math.round(v * 1e6) / 1e6);
  } catch (e) {
    return `error: ${(e as Error).message}`;
  }
}

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'lookup',
      description: 'the fact about an organisation or a person',
      parameters: { type: 'object', properties: { entity: { type: 'string' } }, required: ['entity'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'calculator',
      description: 'evaluate arithmetic',
      parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
    },
  },
];

type Task = { prompt?: string; question?: string };
let modelId: Promise<string> | undefined;

async function solve(task: Task, client: OpenAI): Promise<string> {
  const model = await (modelId ??= process.env.OPENAI_MODEL ? Promise.resolve(process.env.OPENAI_MODEL) : client.models.list().then((l) => l.data[0]!.id));
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: task.prompt ?? task.question ?? '' }];
  for (let turn = 0; turn < 6; turn++) {
    const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 48 });
    const msg = r.choices[0]!.message;
    // Sent back verbatim: the server continues from the ids it sampled (no re-tokenisation).
    messages.push({ role: 'assistant', content: msg.content, ...(msg.tool_calls?.length ? { tool_calls: msg.tool_calls } : {}) });
    if (!msg.tool_calls?.length) {
      const text = msg.content ?? '';
      return (/<answer>([\s\S]*?)(<\/answer>|$)/.exec(text)?.[1] ?? text).trim();
    }
    for (const call of msg.tool_calls) {
      if (call.type !== 'function') continue;
      let args: Record<string, unknown> = {};
      try {
        args = JSON.parse(call.function.arguments) as Record<string, unknown>;
      } catch {
        // Left empty: the tool answers with an error the model reads.
      }
      const result =
        call.function.name === 'lookup'
          ? lookup(String(args.entity ?? ''))
          : call.function.name === 'calculator'
            ? calculator(String(args.expression ?? ''))
            : `error: unknown tool ${call.function.name}`;
      messages.push({ role: 'tool', tool_call_id: call.id, content: result });
    }
  }
  return '';
}

// The whole long-lived mode: episodes in as JSON lines, run concurrently, answers out as JSON lines.
type Episode = { id: string; task: Task; base_url: string; api_key: string };
function serve(handle: (ep: Episode) => Promise<string>): void {
  createInterface({ input: process.stdin }).on('line', (line) => {
    const ep = JSON.parse(line) as Episode;
    void handle(ep)
      .then(
        (answer) => ({ id: ep.id, answer }),
        (e: unknown) => ({ id: ep.id, error: String(e) }),
      )
      .then((r) => process.stdout.write(`${JSON.stringify(r)}\n`));
  });
}

if (process.env.ARBOR_AGENT_MODE === 'serve') serve((ep) => solve(ep.task, new OpenAI({ baseURL: ep.base_url, apiKey: ep.api_key, maxRetries: 0 })));
else console.log(await solve(JSON.parse(process.env.ARBOR_TASK ?? '{}') as Task, new OpenAI({ maxRetries: 0 }))); // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
