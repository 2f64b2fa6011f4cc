// The custom task's tiny tokenizer (engine/model/tiny-tokenizer.ts buildTextWordTokenizer): tags are
// added tokens; a word of the shared texts or of two training tasks is one token; a word only one
// task holds, and any number, is spelled in bytes (the model trains on every token it will have to
// write); any text round-trips exactly.
import { describe, expect, it } from 'vitest';
import { buildTextWordTokenizer } from '../../../engine/model/tiny-tokenizer';
import { HfTokenizer, TINY_TOOLS_CHAT_TEMPLATE } from '../../../engine/model/tokenizer';

const build = (shared: string[], tasks: string[][]) => {
  const { tokenizer, config } = buildTextWordTokenizer({ shared, tasks }, { chatTemplate: TINY_TOOLS_CHAT_TEMPLATE });
  return new HfTokenizer(tokenizer, config);
};
const pieces = (tok: HfTokenizer, text: string) => tok.encode(text).map((id) => tok.decode([id]));

describe('buildTextWordTokenizer', () => {
  const tok = build(
    ['call tools with <tool_call>{"name": …, "arguments": {…}}</tool_call> , then give <answer> answer </answer> .'],
    [
      ['what is the capital of bazomir ? 12', '<tool_call>{"name": "capital", "arguments": {"country": "bazomir"}}</tool_call>', '<answer> fire </answer>'],
      ['what is the capital of hemezes ? 12', '<tool_call>{"name": "capital", "arguments": {"country": "hemezes"}}</tool_call>', '<answer> fader </answer>'],
    ],
  );

  it('makes tags added tokens and words of the shared texts or of two tasks single tokens', () => {
    expect(pieces(tok, '<tool_call>')).toEqual(['<tool_call>']);
    expect(pieces(tok, '</answer>')).toEqual(['</answer>']);
    expect(pieces(tok, 'what is the capital of')).toEqual(['what', ' is', ' the', ' capital', ' of']);
    expect(pieces(tok, ' give')).toEqual([' give']); // shared only
  });

  it('spells a word that only one task holds in bytes, its space and first letter one token, in the question and in a call alike', () => {
    expect(pieces(tok, ' bazomir')).toEqual([' b', ...'azomir']);
    // In a JSON string the normalizer gives the name its space form: the same tokens as in the question.
    const call = tok.encode('{"country": "bazomir"}');
    const question = tok.encode(' bazomir');
    expect(call.join(',')).toContain(question.join(','));
    expect(tok.decode(call)).toBe('{"country": "bazomir"}');
    expect(pieces(tok, ' fire')).toEqual([' f', ...'ire']);
    // A number is spelled digit by digit even when both tasks hold it (as Llama's and Qwen2's tokenizers split digits),
    // its space a token of its own: a JSON number (`"value":1984`, no space) writes the same digit tokens as the question.
    expect(pieces(tok, ' 1984')).toEqual([' ', ...'1984']);
    expect(pieces(tok, ' 12')).toEqual([' ', '1', '2']);
    const num = tok.encode('{"value":1984}');
    expect(num.join(',')).toContain(tok.encode(' 1984').slice(1).join(','));
    expect(pieces(tok, '{"value":1984}').slice(-5)).toEqual([...'1984', '}']);
    // Only an ASCII letter joins the space.
    expect(pieces(tok, ' über')).toEqual([' ', ...pieces(tok, 'über')]);
  });

  it('round-trips any text, unseen words and characters included', () => {
    for (const text of ['<tool_call>{"name": "timezone", "arguments": {"city": "zürich"}}</tool_call>', 'utc+10 ∑ 7', 'what is the capital of kifudu ?'])
      expect(tok.decode(tok.encode(text))).toBe(text);
  });
});
