// The multihop task's tokenizer goes through the HF code path (tokenizer.json + chat template),
// and the files checkpoints carry reproduce exactly the ids the task trains on.
import { describe, expect, it } from 'vitest';
import { generateQuestions, generateWorld } from '../../../engine/tasks/multihop/world';
import { HfTokenizer } from '../../../engine/model/tokenizer';
import { multihopTokenizer, multihopTokenizerFolder } from '../../../engine/tasks/multihop/kit';

describe('multihop tokenizer', () => {
  const tok = multihopTokenizer();

  it('gives token i the id i of the vocabulary, keeps tags whole and words lower-cased, no unknowns on task text', () => {
    expect(tok.encode(tok.vocab.slice(0, 12).join(' '))).toEqual([...Array(12).keys()]);
    const unk = tok.vocab.indexOf('<unk>');
    const world = generateWorld(5);
    for (const p of world.passages) expect(tok.encode(p.text)).not.toContain(unk);
    const q = generateQuestions(world, 5, [2], 22)[0]!;
    const ids = tok.encode(`<search> ${q.question} </search>`);
    expect(tok.vocab[ids[0]!]).toBe('<search>');
    expect(tok.vocab[ids.at(-1)!]).toBe('</search>');
    expect(tok.decode(tok.encode('Alvin, Bella.'))).toBe('alvin , bella .');
    // Characters outside the task's alphabet are dropped, not turned into <unk>.
    expect(tok.encode('alvin\'s "x"')).toEqual(tok.encode('alvin s x'));
  });

  it('loads from the folder copied into checkpoints with identical ids and renders the task prompt', () => {
    const hf = HfTokenizer.load(multihopTokenizerFolder());
    const world = generateWorld(9);
    for (const p of world.passages.slice(0, 40)) expect(hf.encode(p.text)).toEqual(tok.encode(p.text));
    expect(hf.eosTokenId).toBe(tok.vocab.indexOf('<eos>'));
    expect(hf.renderChat([{ role: 'user', content: 'where was alvin born ?' }])).toBe('question : where was alvin born ?');
  });
});

describe('trained checkpoints in arbor rollout', () => {
  it('get the same prompt tokens from the ToolEnv path (rollout CLI) as from the training kit', async () => {
    const { openMultihop, TASK_PROMPT_TEMPLATE } = await import('../../../engine/tasks/multihop/task');
    const { multihopTask } = await import('../../../engine/tasks/multihop/kit');
    const { Bm25Index, searchTool } = await import('../../../engine/env/search');
    const hf = HfTokenizer.load(multihopTokenizerFolder());
    expect(hf.chatTemplate).toBe(TASK_PROMPT_TEMPLATE);
    const mt = openMultihop({ worldSeed: 1001, questionSeed: 3, questions: 4, hops: [1, 2], mode: 'tools', instruction: '' }, hf);
    const tools = new Map([['search', searchTool(new Bm25Index(mt.world.passages), { topK: 2 })]]);
    for (const q of mt.questions) {
      const viaEnv = await mt.createEnv(q).prompt();
      const viaKit = await multihopTask(q, tools).createEnv().prompt();
      expect(viaEnv.ids).toEqual(viaKit.ids);
    }
  });
});
