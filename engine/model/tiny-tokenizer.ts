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
import { HfTokenizer } from './tokenizer';

/** GPT-2's byte → printable character table (the ByteLevel pre-tokeniser's alphabet). */
export function byteLevelAlphabet(): string[] {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  const table: string[] = new Array(256);
  bs.forEach((b, i) => (table[b] = String.fromCharCode(cs[i]!)));
  return table;
}

const ALPHABET = byteLevelAlphabet();
const encodeBytes = (s: string) => Array.from(new TextEncoder().encode(s), (b) => ALPHABET[b]!).join('');

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
  chatTemplate?: string;
}

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
  ALPHABET.forEach(add);
  for (const w of words) {
    add(encodeBytes(` ${w}`));
    add(encodeBytes(w));
  }
  (o.pieces ?? []).forEach((p) => add(encodeBytes(p)));
  const model: Record<string, number> = {};
  vocab.forEach((t, i) => {
    if (i >= o.added.length) model[t] = i;
  });
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: o.added.map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: o.special.includes(content),
    })),
    // A word right after a double quote gets the space form (`"golden` → `" golden`), so a word
    // copied from running text into a JSON string is the same token (`Ġgolden`) in both places;
    // the decoder takes that space out again.
    normalizer: { type: 'Replace', pattern: { Regex: '"(?=[A-Za-z0-9])' }, content: '" ' },
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null,
    decoder: {
      type: 'Sequence',
      decoders: [
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
        { type: 'Replace', pattern: { String: '" ' }, content: '"' },
      ],
    },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: true,
      vocab: model,
      merges: [],
    },
  };
  const config: Record<string, unknown> = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    clean_up_tokenization_spaces: false,
    bos_token: null,
    eos_token: o.eos,
    pad_token: o.pad,
    unk_token: null,
    model_max_length: 4096,
  };
  if (o.chatTemplate) config.chat_template = o.chatTemplate;
  return { tokenizer, config, vocab };
}

export function byteWordTokenizer(words: string[], o: ByteWordTokenizerOptions): HfTokenizer {
  const { tokenizer, config } = buildByteWordTokenizer(words, o);
  return new HfTokenizer(tokenizer, config);
}
