// User QA datasets in JSONL: HotpotQA-style contexts become the searchable corpus; bad lines
// name the file, line and field.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadQaDataset, qaEnvTask } from '../../../engine/env/dataset';
import { searchR1Format } from '../../../engine/env/formats';
import { Bm25Index, searchTool } from '../../../engine/env/search';
import { ToolEnv } from '../../../engine/env/toolenv';
import { multihopTokenizer } from '../../../engine/tasks/multihop/kit';

const write = (lines: unknown[]) => {
  const f = join(mkdtempSync(join(tmpdir(), 'arbor-ds-')), 'qa.jsonl');
  writeFileSync(f, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
  return f;
};

describe('QA dataset loader', () => {
  it('reads HotpotQA rows (list and column forms) into questions and a deduplicated, searchable corpus', async () => {
    const f = write([
      {
        _id: 'a1',
        question: 'Where was the author of Blue Tide born?',
        answer: 'Oban',
        context: [
          ['Blue Tide', ['Blue Tide is a novel.', 'It was written by Ada Vell.']],
          ['Ada Vell', ['Ada Vell was born in Oban.']],
        ],
        supporting_facts: [
          ['Blue Tide', 1],
          ['Ada Vell', 0],
        ],
      },
      '',
      {
        id: 7,
        question: 'Which river runs through Oban?',
        answers: ['Kerra', 'River Kerra'],
        context: { title: ['Oban', 'Ada Vell'], sentences: [['Oban is a town.', 'The Kerra runs through it.'], ['duplicate title']] },
      },
    ]);
    const ds = loadQaDataset(f);
    expect(ds.questions.map((q) => [q.id, q.answers, q.supporting, q.line])).toEqual([
      ['a1', ['Oban'], ['Blue Tide', 'Ada Vell'], 1],
      ['7', ['Kerra', 'River Kerra'], [], 3],
    ]);
    expect(ds.passages.map((p) => p.title)).toEqual(['Blue Tide', 'Ada Vell', 'Oban']);
    expect(ds.passages[1]!.text).toBe('Ada Vell was born in Oban.');
    const hits = new Bm25Index(ds.passages).search('Ada Vell born', 1);
    expect(hits[0]!.passage.title).toBe('Ada Vell');
    // As a ToolEnv task: the search tool over the corpus finds the supporting paragraph, which
    // earns the process reward, and the answer is scored against the gold answers.
    const env = new ToolEnv({
      task: qaEnvTask(ds.questions[0]!, ds),
      tools: [searchTool(new Bm25Index(ds.passages), { topK: 1 })],
      format: searchR1Format(),
      tokenizer: multihopTokenizer().hf,
    });
    const step = await env.step({ text: '<search> Ada Vell </search>' });
    expect(step.observation?.text).toContain('Ada Vell was born in Oban.');
    expect(step.stepReward).toBe(1);
    await env.step({ text: '<answer> Oban </answer>' });
    expect(await env.outcome()).toMatchObject({ exactMatch: true, answer: 'Oban' });
  });

  it('names the file, line and field of a bad row', () => {
    const good = { question: 'q?', answer: 'a' };
    expect(() => loadQaDataset(write([good, { question: '', answer: 'a' }]))).toThrow(/qa\.jsonl:2: question: must be a non-empty string/);
    expect(() => loadQaDataset(write([good, good, { question: 'q?' }]))).toThrow(/qa\.jsonl:3: answers: give "answers" \(a list\) or "answer" \(a string\)/);
    expect(() => loadQaDataset(write([good, '{"question": "q?", "answer": ']))).toThrow(/qa\.jsonl:2: not valid JSON/);
    expect(() => loadQaDataset(write([{ question: 'q?', answer: 'a', context: [['t', 'not a list']] }]))).toThrow(/qa\.jsonl:1: context/);
  });
});
