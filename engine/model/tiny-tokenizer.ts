/**
 * A tiny tokenizer that can write any text exactly: whole words as single tokens plus a byte
 * fallback, for built-in tiny models that must emit JSON (Hermes tool calls).
 *
 * @huggingface/tokenizers 0.2.0 has no WordLevel model (docs/ARCHITECTURE.md §4), and the
 * whole-word WordPiece trick of ./tokenizer.ts loses spacing (`{"name"` decodes as `{ " name "`),
 * so this one is a GPT-2-style byte-level BPE:
 *  - pre-tokeniser ByteLevel (no prefix space): text splits into words with their leading space
 *    (`Ġlookup`), digit runs, punctuation runs (`{"`, `":`, `"}}`) and spaces;
 *  - model BPE with `ignore_merges: true` and no merges: a piece that is in the vocabulary is one
 *    token, any other piece becomes its byte-level characters, all 256 of which are in the
 *    vocabulary, so nothing is ever `<unk>` and decode(encode(text)) === text;
 *  - decoder ByteLevel.
 * Every word is in the vocabulary twice, with and without the leading space (`Ġ52`, `52`), since
 * JSON puts words right after a quote. The file loads in Python `tokenizers` ≥ 0.19 too
 * (`ignore_merges` is the Llama-3 option).
 */
import { addedToken, bpeModel, BYTE_LEVEL_SPLIT, byteLevel, byteLevelAlphabet, byteLevelText, HfTokenizer, tokenizerConfig, tokenizerJson } from './tokenizer';

/** The byte-word tokenizers' normalizer puts a space after a double quote that this matches (a word right after it). */
const QUOTE_BEFORE_WORD = '"(?=[A-Za-z0-9])';

/** JSON punctuation runs as the ByteLevel pre-tokeniser cuts them, kept as single tokens. */
export const JSON_PUNCTUATION = [
  '{"',
  ' {"',
  '":',
  ' "',
  '",',
  '"}',
  '"}}',
  '"},',
  '"}},',
  '["',
  ' ["',
  '"]',
  '"],',
  '}}',
  '}}}',
  '},',
  ' -',
  ' +',
  ' .',
  ' ?',
  ' ,',
  ' :',
  '.',
  '?',
  ',',
  ':',
];

export interface ByteWordTokenizerOptions {
  /** Added tokens (tags, role markers), matched before pre-tokenisation; ids 0… in this order. */
  added: string[];
  /** Which added tokens are special (skipped by skip_special_tokens decoding). */
  special: string[];
  eos: string;
  pad: string;
  /** Extra multi-character pieces (e.g. JSON_PUNCTUATION). */
  pieces?: string[];
  /**
   * A word spelled in bytes starts with one token of its space and first letter (`Ġf i r e`, as
   * GPT-2's merges cut it), not a lone `Ġ` that every spelled word shares: the BPE merges `Ġ a` …
   * `Ġ Z` and their 52 tokens. Digits never join the space (`Ġ 6 0 8`, as Qwen2's tokenizer cuts
   * numbers): a JSON number follows `":` with no space (`"value":608`), and a first digit joined to
   * its space in the question would be another token than the one the call must write.
   */
  wordStarts?: boolean;
  chatTemplate?: string;
}

/** The letters a spelled word may start with (ByteWordTokenizerOptions.wordStarts). */
const WORD_START = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'];

/**
 * tokenizer.json + tokenizer_config.json: added tokens, then the 256 byte characters, then each
 * word with and without its leading space, then the extra pieces (duplicates dropped).
 */
export function buildByteWordTokenizer(
  words: string[],
  o: ByteWordTokenizerOptions,
): { tokenizer: Record<string, unknown>; config: Record<string, unknown>; vocab: string[] } {
  const vocab: string[] = [];
  const ids = new Map<string, number>();
  const add = (t: string) => {
    if (!ids.has(t)) {
      ids.set(t, vocab.length);
      vocab.push(t);
    }
  };
  o.added.forEach(add);
  byteLevelAlphabet().forEach(add);
  for (const w of words) {
    add(byteLevelText(` ${w}`));
    add(byteLevelText(w));
  }
  (o.pieces ?? []).forEach((p) => add(byteLevelText(p)));
  const space = byteLevelText(' ');
  const merges = o.wordStarts ? WORD_START.map((c) => (add(space + c), `${space} ${c}`)) : [];
  const model: Record<string, number> = {};
  vocab.forEach((t, i) => {
    if (i >= o.added.length) model[t] = i;
  });
  const added = o.added.map((content, id) => addedToken(id, content, o.special.includes(content)));
  // A word right after a double quote gets the space form (`"golden` → `" golden`), so a word
  // copied from running text into a JSON string is the same token (`Ġgolden`) in both places;
  // the decoder takes that space out again.
  const normalizer = { type: 'Replace', pattern: { Regex: QUOTE_BEFORE_WORD }, content: '" ' };
  const decoder = { type: 'Sequence', decoders: [byteLevel(), { type: 'Replace', pattern: { String: '" ' }, content: '"' }] };
  const tokenizer = tokenizerJson(added, normalizer, byteLevel(), decoder, bpeModel(model, merges, true));
  const config = tokenizerConfig({ cleanUpSpaces: false, eos: o.eos, pad: o.pad, unk: null, maxLength: 4096, chatTemplate: o.chatTemplate || undefined });
  return { tokenizer, config, vocab };
}

export function byteWordTokenizer(words: string[], o: ByteWordTokenizerOptions): HfTokenizer {
  const { tokenizer, config } = buildByteWordTokenizer(words, o);
  return new HfTokenizer(tokenizer, config);
}

/** ChatML's role markers and the pad/end tokens of a tiny text-word tokenizer (ids 0–3). */
const TEXT_WORD_SPECIAL = ['<pad>', '<|endoftext|>', '<|im_start|>', '<|im_end|>'];
/** Most words a text-word tokenizer keeps (the most frequent), and most tags. */
const TEXT_WORD_MAX_WORDS = 8000;
const TEXT_WORD_MAX_TAGS = 64;
/** A tag of a tool-call format or chat template (`<tool_call>`, `</answer>`, `<information>`). */
const TAG = /<\/?[A-Za-z_][A-Za-z0-9_-]*>/g;

/**
 * A byte-word tokenizer (buildByteWordTokenizer) for a tiny model on any task, its vocabulary read
 * from the texts the model will read and write. Every tag in them is an added token. A word (word
 * or punctuation run) is one token when it is in a `shared` text (the chat template's rendering of
 * the tool signatures and turn wrappers) or in the texts of at least
 * two `tasks` (the training tasks: prompts, demonstrations, answers); any other word, and every
 * number, is spelled in bytes (the `TEXT_WORD_MAX_WORDS` most frequent words are kept), a word's
 * first letter joined to its space (`wordStarts`; a number's digits stay apart from it). So the model trains on every token
 * it will have to write: a name that only one task holds (an entity of a held-out question above
 * all) would otherwise be a token no training example ever targets, which a tiny model cannot learn
 * to write, let alone copy; spelled in bytes, it is copied the way every such name in training is.
 */
export function buildTextWordTokenizer(
  texts: { shared: string[]; tasks: string[][] },
  o: { chatTemplate?: string } = {},
): { tokenizer: Record<string, unknown>; config: Record<string, unknown>; vocab: string[] } {
  const tags = new Map<string, number>();
  const count = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  const wordsOf = (text: string) => {
    for (const m of text.matchAll(TAG)) count(tags, m[0]);
    // As the tokenizer will see it: added tokens cut out, a space put after a quote before a word (the normalizer).
    const plain = text
      .replace(TAG, ' ')
      .replace(/<\|[a-z_]+\|>/g, ' ')
      .replace(new RegExp(QUOTE_BEFORE_WORD, 'g'), '" ');
    return (plain.match(BYTE_LEVEL_SPLIT) ?? []).map((p) => (p.startsWith(' ') ? p.slice(1) : p)).filter((w) => w.trim() !== '');
  };
  const shared = new Set(texts.shared.flatMap(wordsOf));
  const inTasks = new Map<string, number>();
  for (const task of texts.tasks) for (const w of new Set(task.flatMap(wordsOf))) count(inTasks, w);
  const words = new Map<string, number>();
  // Numbers are always spelled, digit by digit (as Llama's and Qwen2's tokenizers split them): a tiny
  // model copies a run of ten digits it writes everywhere, not a token per number that few tasks hold.
  const number = /^\p{N}+$/u;
  for (const w of shared) if (!number.test(w)) words.set(w, Infinity);
  for (const [w, n] of inTasks) if (n >= 2 && !shared.has(w) && !number.test(w)) words.set(w, n);
  const top = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, n)
      .map(([w]) => w);
  return buildByteWordTokenizer(top(words, TEXT_WORD_MAX_WORDS), {
    added: [...TEXT_WORD_SPECIAL, ...top(tags, TEXT_WORD_MAX_TAGS).sort()],
    special: TEXT_WORD_SPECIAL,
    eos: '<|im_end|>',
    pad: '<pad>',
    pieces: JSON_PUNCTUATION,
    wordStarts: true,
    chatTemplate: o.chatTemplate,
  });
}
