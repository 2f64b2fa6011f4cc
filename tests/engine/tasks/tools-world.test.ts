import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  expertMistake,
  factOf,
  generateToolsQuestions,
  generateToolsWorlds,
  toolsExampleFiles,
  toolsExpertTurn,
  toolsVocabulary,
  hermesCall,
} from '../../../engine/tasks/tools/world';
import { calculate } from '../../../engine/env/calculator';
import { buildByteWordTokenizer, byteWordTokenizer, JSON_PUNCTUATION } from '../../../engine/model/tiny-tokenizer';
import { HfTokenizer } from '../../../engine/model/tokenizer';
import { SandboxHost } from '../../../engine/env/sandbox-host';
import type { EpisodeSummary, ToolCallTrace } from '../../../engine/env/rewards';

const EXAMPLE = join(__dirname, '..', '..', '..', 'resources', 'examples', 'tools-task');

/** Runs the expert against the world's facts and arithmetic directly (no model, no sandbox). */
function solve(question: string, world: ReturnType<typeof generateToolsWorlds>['train'], seed: number, mistakeRate = 0) {
  const obs: string[] = [];
  const turns: string[] = [];
  for (let i = 0; i < 8; i++) {
    const t = toolsExpertTurn(question, obs, turns, seed, { mistakeRate });
    turns.push(t);
    const ans = /<answer> (.*) <\/answer>/.exec(t);
    if (ans) return { answer: ans[1]!, turns };
    const call = JSON.parse(/<tool_call>(.*)<\/tool_call>/.exec(t)![1]!) as { name: string; arguments: Record<string, string> };
    if (call.name === 'lookup')
      obs.push(
        ` <tool_response> ${call.arguments.entity ? (factOf(world, call.arguments.entity) ?? 'no entry') : 'Error: invalid arguments'} </tool_response> `,
      );
    else obs.push(` <tool_response> ${calculate(call.arguments.expression!)} </tool_response> `);
  }
  return { answer: undefined, turns };
}

describe('two-tool world', () => {
  it('is seeded, and the training and held-out worlds share no entity', () => {
    const a = generateToolsWorlds(3);
    expect(generateToolsWorlds(3)).toEqual(a);
    expect(generateToolsWorlds(4)).not.toEqual(a);
    const names = (w: typeof a.train) => new Set([...w.orgs.map((o) => o.name), ...w.people.map((p) => p.name)]);
    const heldout = names(a.heldout);
    expect([...names(a.train)].filter((n) => heldout.has(n))).toEqual([]);
    for (const o of a.train.orgs) {
      const founder = a.train.people.find((p) => p.name === o.founder)!;
      expect(o.founded - founder.born).toBeGreaterThanOrEqual(18);
    }
  });

  it('questions have the answers their facts give, and need both tools', () => {
    const { heldout } = generateToolsWorlds(3);
    const qs = generateToolsQuestions(heldout, 60, 9);
    expect(qs).toHaveLength(60);
    expect(new Set(qs.map((q) => q.kind))).toEqual(new Set(['founder-age', 'person-age']));
    for (const q of qs) {
      expect(String(calculate(q.expression))).toBe(q.answers[0]);
      for (const e of q.entities) expect(factOf(heldout, e)).toBeDefined();
    }
  });

  it('the expert without mistakes answers every question right, with two lookups and one calculator call', () => {
    const { heldout } = generateToolsWorlds(5);
    for (const [i, q] of generateToolsQuestions(heldout, 80, 1).entries()) {
      const r = solve(q.question, heldout, i);
      expect(r.answer).toBe(q.answers[0]);
      expect(r.turns.filter((t) => t.includes('"name": "lookup"'))).toHaveLength(2);
      expect(r.turns.filter((t) => t.includes('"name": "calculator"'))).toHaveLength(1);
    }
  });

  it('the expert makes each kind of mistake at about the given rate; recovered ones still answer right', () => {
    const { train } = generateToolsWorlds(5);
    const qs = generateToolsQuestions(train, 400, 2);
    const kinds = new Map<string, number>();
    let right = 0;
    for (const [i, q] of qs.entries()) {
      const m = expertMistake(i, 0.4) ?? 'none';
      kinds.set(m, (kinds.get(m) ?? 0) + 1);
      const r = solve(q.question, train, i, 0.4);
      const ok = r.answer === q.answers[0];
      right += ok ? 1 : 0;
      if (m === 'none' || m === 'wrong-lookup' || m === 'bad-arguments') expect(ok).toBe(true);
      else expect(ok).toBe(false);
      if (m === 'bad-arguments') expect(r.turns[0]).toContain('"arguments": {"name"');
      if (m === 'no-calculator') expect(r.turns.some((t) => t.includes('calculator'))).toBe(false);
    }
    expect(kinds.get('none')! / qs.length).toBeGreaterThan(0.5);
    expect(kinds.get('none')! / qs.length).toBeLessThan(0.7);
    for (const k of ['wrong-lookup', 'bad-arguments', 'no-calculator', 'added']) expect(kinds.get(k)).toBeGreaterThan(15);
    expect(right / qs.length).toBeGreaterThan(0.7);
    expect(right / qs.length).toBeLessThan(0.9);
  });

  it('the shipped example files are the generator output', () => {
    for (const [name, text] of Object.entries(toolsExampleFiles())) expect(readFileSync(join(EXAMPLE, name), 'utf8'), name).toBe(text);
  });
});

describe('byte-level word tokenizer', () => {
  const opts = {
    added: ['<pad>', '<|im_end|>', '<tool_call>', '</tool_call>'],
    special: ['<pad>', '<|im_end|>'],
    eos: '<|im_end|>',
    pad: '<pad>',
    pieces: JSON_PUNCTUATION,
  };
  const tok = byteWordTokenizer([...toolsVocabulary(), 'lookup', 'calculator'], opts);

  it('writes Hermes JSON calls exactly, with whole words and numbers as single tokens', () => {
    const call = hermesCall('lookup', { entity: 'golden river institute' }) + hermesCall('calculator', { expression: '1923 - 1871' });
    const ids = tok.encode(call);
    expect(tok.decode(ids)).toBe(call);
    expect(JSON.parse(/<tool_call>(.*?)<\/tool_call>/.exec(tok.decode(ids))![1]!)).toEqual({ name: 'lookup', arguments: { entity: 'golden river institute' } });
    const pieces = ids.map((i) => tok.decode([i]));
    for (const w of [' lookup', ' river', ' institute', ' 1923', ' 1871', '{"', '":', '"}}']) expect(pieces).toContain(w);
    // A word copied from running text into a JSON string is the same token in both places.
    const inText = tok.encode(' the golden river institute was founded in 1923');
    const inJson = tok.encode('{"entity": "golden river institute"}{"expression": "1923 - 1871"}');
    for (const w of [' golden', ' 1923']) {
      const id = inText.find((i) => tok.decode([i]) === w)!;
      expect(id).toBeDefined();
      expect(inJson).toContain(id);
    }
    expect(ids.length).toBe(38);
  });

  it('falls back to bytes for anything else: nothing is unknown, every text round-trips', () => {
    for (const text of ['héllo wörld 😀 {"a": [1, 2.5e3]}\n\tend', 'zzyzx qwerty', '  two  spaces ', '</tool_call><tool_call>']) {
      const ids = tok.encode(text);
      expect(tok.decode(ids)).toBe(text);
      expect(ids.every((i) => i >= 0 && i < tok.vocabSize)).toBe(true);
    }
  });

  it('is an HF tokenizer.json (BPE, ByteLevel, ignore_merges) that loads through HfTokenizer with its eos', () => {
    const { tokenizer, config, vocab } = buildByteWordTokenizer(['lookup'], opts);
    expect((tokenizer.model as { type: string; ignore_merges: boolean }).type).toBe('BPE');
    expect((tokenizer.model as { ignore_merges: boolean }).ignore_merges).toBe(true);
    const hf = new HfTokenizer(JSON.parse(JSON.stringify(tokenizer)), config);
    expect(hf.eosTokenId).toBe(1);
    expect(hf.vocabSize).toBe(vocab.length);
    expect(vocab.length).toBe(4 + 256 + 2 + JSON_PUNCTUATION.filter((p) => p.length > 1).length);
  });
});

describe("the example's reward file (resources/examples/tools-task/reward.ts, in the sandbox)", () => {
  const task = {
    id: 'train-q0',
    prompt: 'how old was the founder of the iron bridge guild when it was founded ?',
    answers: ['40'],
    meta: { entities: ['iron bridge guild', 'alvin knox'], expression: '1804 - 1764' },
  };
  const call = (name: string, args: unknown, success = true): ToolCallTrace => ({
    name,
    args,
    success,
    result: success ? 'ok' : 'error',
    ...(success ? {} : { error: 'error' }),
  });
  const episode = (calls: ToolCallTrace[], answer?: string): EpisodeSummary => ({
    task,
    history: [...calls.map((c) => ({ text: '', calls: [c], errors: [] })), ...(answer ? [{ text: '', calls: [], errors: [], answer }] : [])],
    answer,
    golds: task.answers,
    turns: [],
    formatOk: true,
    toolCalls: calls.length,
    toolErrors: calls.filter((c) => !c.success).length,
    retrieved: [],
    supporting: [],
  });

  it('scores exact match + 0.1 per expected call; steps +1 an expected call, -1 a failed one, 0 a successful unexpected or repeated one', async () => {
    const path = join(EXAMPLE, 'reward.ts');
    const host = await SandboxHost.open({ reward: { path, source: readFileSync(path, 'utf8') } }, undefined, EXAMPLE);
    try {
      const right = await host.reward(
        episode(
          [
            call('lookup', { entity: 'the iron bridge guild' }),
            call('lookup', { entity: 'red apple institute' }),
            call('lookup', { name: 'alvin knox' }, false),
            call('lookup', { entity: 'alvin knox' }),
            call('lookup', { entity: 'alvin knox' }),
            call('calculator', { expression: '1804 - 1764' }),
          ],
          '40',
        ),
      );
      expect(right.reward).toBeCloseTo(1.3);
      expect(right.steps).toEqual([1, 0, -1, 1, 0, 1]);
      expect(right.components).toEqual({ answer_right: 1, right_calls: 3, failed_calls: 1 });
      // No calls: no steps to gain or lose, and a wrong answer scores only its expected calls.
      expect(await host.reward(episode([], '41'))).toMatchObject({ reward: 0, steps: [] });
      const wrong = await host.reward(episode([call('calculator', { expression: '1804 + 1764' })], '3568'));
      expect(wrong.reward).toBe(0);
      expect(wrong.steps).toEqual([0]);
      // An external agent's calls: success only says a result came back; the result text says the call failed.
      const agent = await host.reward(
        episode([
          { ...call('lookup', { entity: 'iron bridge guild' }), result: 'no entry for iron bridge guid' },
          { ...call('calculator', { expression: '1804 - 1764' }), result: 'error: unexpected x' },
          { ...call('lookup', { entity: 'iron bridge guild' }), result: 'the iron bridge guild was founded in 1804 by alvin knox .' },
        ]),
      );
      expect(agent.steps).toEqual([-1, -1, 1]);
      expect(agent.components).toEqual({ answer_right: 0, right_calls: 1, failed_calls: 2 });
    } finally {
      await host.close();
    }
  });
});
