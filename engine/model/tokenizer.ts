/**
 * Tokenizers and chat templates, the same code path for the built-in tiny models and real
 * HF models: tokenizer.json through @huggingface/tokenizers, chat templates (from
 * tokenizer_config.json) through @huggingface/jinja.
 *
 * The tiny models' vocabulary is whole words. @huggingface/tokenizers 0.2.0 implements no
 * WordLevel model, so their tokenizer.json is a WordPiece model whose vocabulary holds only
 * whole words (no "##" pieces): it splits on whitespace and punctuation and maps each word to
 * one id, exactly as WordLevel would, and loads in HF tokenizers too.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { Template } from '@huggingface/jinja';
import { readChatTemplates, renderChatTemplate } from './chat-template';

export interface ChatMessage {
  role: string;
  content: string;
}
export interface ToolSpec {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface TextTokenizer {
  encode(text: string): number[];
  decode(ids: number[]): string;
  /** Render messages with the model's chat template (generation prompt appended). */
  renderChat(messages: ChatMessage[], opts?: { tools?: ToolSpec[]; addGenerationPrompt?: boolean }): string;
  tokenId(token: string): number | undefined;
  readonly vocabSize: number;
  readonly eosTokenId: number | undefined;
  readonly padTokenId: number;
}

export class HfTokenizer implements TextTokenizer {
  private tok: Tokenizer;
  private template: Template | null;
  private vocab: Map<string, number>;
  private config: Record<string, unknown>;
  private json: Record<string, unknown>;
  constructor(tokenizerJson: Record<string, unknown>, tokenizerConfig: Record<string, unknown>) {
    this.tok = new Tokenizer(tokenizerJson, tokenizerConfig);
    this.json = tokenizerJson;
    this.config = tokenizerConfig;
    const tpl = tokenizerConfig.chat_template;
    this.template = typeof tpl === 'string' ? new Template(tpl) : null;
    this.vocab = new Map();
    const model = tokenizerJson.model as { vocab?: Record<string, number> | [string, number][] };
    if (model?.vocab && !Array.isArray(model.vocab)) for (const [k, v] of Object.entries(model.vocab)) this.vocab.set(k, v);
    for (const t of (tokenizerJson.added_tokens as { id: number; content: string }[] | undefined) ?? []) this.vocab.set(t.content, t.id);
  }
  static load(folder: string): HfTokenizer {
    const tj = join(folder, 'tokenizer.json');
    if (!existsSync(tj)) throw new Error(`${folder}: tokenizer.json not found`);
    const tc = join(folder, 'tokenizer_config.json');
    const parse = (f: string) => {
      try {
        return JSON.parse(readFileSync(f, 'utf8'));
      } catch (e) {
        throw new Error(`${f}: invalid JSON (${(e as Error).message})`);
      }
    };
    const config = existsSync(tc) ? parse(tc) : {};
    // The chat template may live in chat_template.jinja or be one of several named ones (chat-template.ts).
    const chat = readChatTemplates(folder, config);
    if (chat.template !== undefined) config.chat_template = chat.template;
    return new HfTokenizer(parse(tj), config);
  }
  encode(text: string): number[] {
    return [...this.tok.encode(text, { add_special_tokens: false }).ids];
  }
  /** As transformers' tokenizer(text) does: with the tokenizer.json post-processor's special tokens (e.g. Llama 3's BOS). */
  encodeWithSpecialTokens(text: string): number[] {
    return [...this.tok.encode(text, { add_special_tokens: true }).ids];
  }
  decode(ids: number[]): string {
    return this.tok.decode(ids, { skip_special_tokens: false });
  }
  renderChat(messages: ChatMessage[], opts: { tools?: ToolSpec[]; addGenerationPrompt?: boolean } = {}): string {
    if (!this.template) throw new Error('tokenizer_config.json has no chat_template');
    // A model folder's template is code from elsewhere: rendered within a time budget (ChatTemplateTimeout past it).
    return renderChatTemplate(this.template, {
      messages,
      tools: opts.tools,
      add_generation_prompt: opts.addGenerationPrompt ?? true,
      bos_token: tokenString(this.config.bos_token),
      eos_token: tokenString(this.config.eos_token),
    });
  }
  tokenId(token: string): number | undefined {
    return this.vocab.get(token);
  }
  get vocabSize(): number {
    // A loop, not Math.max(...): a real vocabulary (150k ids) overflows the argument stack.
    let max = -1;
    for (const v of this.vocab.values()) if (v > max) max = v;
    return max + 1;
  }
  /** The chat template from tokenizer_config.json, if any. */
  get chatTemplate(): string | undefined {
    return typeof this.config.chat_template === 'string' ? this.config.chat_template : undefined;
  }
  get eosTokenId(): number | undefined {
    const e = tokenString(this.config.eos_token);
    return e ? this.vocab.get(e) : undefined;
  }
  get padTokenId(): number {
    const p = tokenString(this.config.pad_token);
    return (p ? this.vocab.get(p) : undefined) ?? 0;
  }
  /** The unknown token's id (undefined for byte-level tokenizers, which have none): ToolEnv counts it as out-of-vocabulary. */
  get unkTokenId(): number | undefined {
    const u = tokenString(this.config.unk_token) || ((this.tokenizerModel.unk_token as string | undefined) ?? '');
    return u ? this.vocab.get(u) : undefined;
  }
  private get tokenizerModel(): Record<string, unknown> {
    return (this.json.model as Record<string, unknown>) ?? {};
  }
}

function tokenString(t: unknown): string {
  if (typeof t === 'string') return t;
  if (t && typeof t === 'object' && 'content' in t) return String((t as { content: unknown }).content);
  return '';
}

/*
 * The pieces of tokenizer.json and tokenizer_config.json that Arbor's built tokenizers (below and
 * ./tiny-tokenizer.ts) share; each builder chooses only its normaliser, pre-tokeniser, decoder and
 * model. Keys stay in the order the files always had: the task kits name their tokenizer cache
 * folders by a hash of the files.
 */

/** An added_tokens entry: matched whole before normalisation; `special` ones are skipped by skip_special_tokens. */
export function addedToken(id: number, content: string, special: boolean): Record<string, unknown> {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special };
}

/** tokenizer.json around the parts a builder chooses (no truncation, padding or post-processor). */
export function tokenizerJson(added: unknown[], normalizer: unknown, preTokenizer: unknown, decoder: unknown, model: unknown): Record<string, unknown> {
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer,
    pre_tokenizer: preTokenizer,
    post_processor: null,
    decoder,
    model,
  };
}

/** GPT-2's ByteLevel step (pre-tokeniser and decoder alike), without a prefix space. */
export const byteLevel = () => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true });

/** A BPE model over byte-level pieces, never <unk>; with `ignoreMerges` any piece in the vocabulary is one token (the Llama-3 option). */
export function bpeModel(vocab: Record<string, number>, merges: string[], ignoreMerges = false): Record<string, unknown> {
  return {
    type: 'BPE',
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    ...(ignoreMerges ? { ignore_merges: true } : {}),
    vocab,
    merges,
  };
}

/** Whole words as WordPiece tokens: no word is split (no `##` pieces are in the vocabulary). */
const wordPieceModel = (unk: string, vocab: Record<string, number>) => ({
  type: 'WordPiece',
  unk_token: unk,
  continuing_subword_prefix: '##',
  max_input_chars_per_word: 100,
  vocab,
});
const WORDPIECE_DECODER = { type: 'WordPiece', prefix: '##', cleanup: false };

/**
 * tokenizer_config.json: no BOS; `cleanUpSpaces` is written only when given (the first word-level
 * tokenizer never wrote it, and its files keep that), the chat template only when there is one.
 */
export function tokenizerConfig(o: {
  cleanUpSpaces?: boolean;
  eos: string;
  pad: string;
  unk: string | null;
  maxLength: number;
  chatTemplate?: string;
}): Record<string, unknown> {
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    ...(o.cleanUpSpaces !== undefined ? { clean_up_tokenization_spaces: o.cleanUpSpaces } : {}),
    bos_token: null,
    eos_token: o.eos,
    pad_token: o.pad,
    unk_token: o.unk,
    model_max_length: o.maxLength,
    ...(o.chatTemplate !== undefined ? { chat_template: o.chatTemplate } : {}),
  };
}

export const TINY_SPECIAL = ['<pad>', '<unk>', '<|endoftext|>', '<|im_start|>', '<|im_end|>'];
export const TINY_TAGS = [
  '<search>',
  '</search>',
  '<answer>',
  '</answer>',
  '<information>',
  '</information>',
  '<tool_call>',
  '</tool_call>',
  '<tool_response>',
  '</tool_response>',
  '<think>',
  '</think>',
];
export const TINY_ROLES = ['system', 'user', 'assistant', 'tool', 'tools'];

/** A ChatML-style template, short enough for tiny models; lists tool names when tools are given. */
export const TINY_CHAT_TEMPLATE =
  '{%- if tools -%}<|im_start|>system tools :{% for t in tools %} {{ t.function.name }}{% endfor %} <|im_end|>{%- endif -%}' +
  '{%- for m in messages -%}<|im_start|>{{ m.role }} {{ m.content }} <|im_end|>{%- endfor -%}' +
  '{%- if add_generation_prompt -%}<|im_start|>assistant{%- endif -%}';

/** tokenizer.json + tokenizer_config.json for a whole-word vocabulary. */
export function buildWordTokenizer(words: string[]): { tokenizer: Record<string, unknown>; config: Record<string, unknown> } {
  const vocab: Record<string, number> = {};
  const added: Record<string, unknown>[] = [];
  let id = 0;
  for (const t of [...TINY_SPECIAL, ...TINY_TAGS]) {
    vocab[t] = id;
    added.push(addedToken(id, t, TINY_SPECIAL.includes(t)));
    id++;
  }
  for (const w of [...new Set([...TINY_ROLES, ...words.map((x) => x.toLowerCase())])]) {
    if (vocab[w] === undefined) vocab[w] = id++;
  }
  const tokenizer = tokenizerJson(added, { type: 'Lowercase' }, { type: 'Whitespace' }, WORDPIECE_DECODER, wordPieceModel('<unk>', vocab));
  const config = tokenizerConfig({ eos: '<|im_end|>', pad: '<pad>', unk: '<unk>', maxLength: 1024, chatTemplate: TINY_CHAT_TEMPLATE });
  return { tokenizer, config };
}

/**
 * A word-level tokenizer.json over an exact, ordered vocabulary (token i has id i), for task
 * kits that fix their ids: `verbatim` entries (tags, case-sensitive words) are added tokens
 * matched before normalisation; other words are lower-cased. Characters outside the word and
 * punctuation pattern are dropped; `[a-z0-9]+` runs and single `?.,:;…` marks are the words.
 */
export function buildExactWordTokenizer(
  vocab: string[],
  opts: { verbatim: (w: string) => boolean; special: string[]; eos: string; pad: string; unk: string; chatTemplate?: string },
): { tokenizer: Record<string, unknown>; config: Record<string, unknown> } {
  const model: Record<string, number> = {};
  const added: Record<string, unknown>[] = [];
  vocab.forEach((w, id) => {
    if (opts.verbatim(w)) added.push(addedToken(id, w, opts.special.includes(w)));
    else model[w.toLowerCase()] ??= id;
  });
  const tokenizer = tokenizerJson(
    added,
    { type: 'Sequence', normalizers: [{ type: 'Replace', pattern: { Regex: '[^A-Za-z0-9?.,:;…<>/_\\s]' }, content: ' ' }, { type: 'Lowercase' }] },
    {
      type: 'Sequence',
      pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Split', pattern: { Regex: '[a-z0-9]+|[?.,:;…]' }, behavior: 'Isolated', invert: false }],
    },
    WORDPIECE_DECODER,
    wordPieceModel(opts.unk, model),
  );
  const config = tokenizerConfig({
    cleanUpSpaces: false,
    eos: opts.eos,
    pad: opts.pad,
    unk: opts.unk,
    maxLength: 1024,
    chatTemplate: opts.chatTemplate || undefined,
  });
  return { tokenizer, config };
}

export function writeWordTokenizer(folder: string, words: string[]): HfTokenizer {
  const { tokenizer, config } = buildWordTokenizer(words);
  writeFileSync(join(folder, 'tokenizer.json'), JSON.stringify(tokenizer));
  writeFileSync(join(folder, 'tokenizer_config.json'), JSON.stringify(config, null, 2));
  return new HfTokenizer(tokenizer, config);
}

/**
 * A ChatML template for tiny byte-level models that can call tools (hermes format): the tools'
 * names and JSON-schema parameters in a system message, tool results as
 * `<tool_response> … </tool_response>` messages.
 */
export const TINY_TOOLS_CHAT_TEMPLATE =
  '{%- if tools -%}<|im_start|>system tools:{% for t in tools %} {{ t.function.name }} {{ t.function.parameters | tojson }}{% endfor %}<|im_end|>{%- endif -%}' +
  "{%- for m in messages -%}{%- if m.role == 'tool' -%}<|im_start|>tool <tool_response>{{ m.content }}</tool_response><|im_end|>" +
  '{%- else -%}<|im_start|>{{ m.role }} {{ m.content }}<|im_end|>{%- endif -%}{%- endfor -%}' +
  '{%- if add_generation_prompt -%}<|im_start|>assistant {% endif -%}';

const BYTE_SPECIAL = ['<pad>', '<|endoftext|>', '<|im_start|>', '<|im_end|>'];
/** GPT-2's pre-tokenisation: how the ByteLevel pre-tokeniser splits text into words, numbers, punctuation runs and spaces. */
export const BYTE_LEVEL_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

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

const BYTE_ALPHABET = byteLevelAlphabet();

/** Text as the ByteLevel pre-tokeniser sees it: its UTF-8 bytes as alphabet characters (vocabulary entries are written so). */
export function byteLevelText(s: string): string {
  return Array.from(new TextEncoder().encode(s), (b) => BYTE_ALPHABET[b]!).join('');
}

/**
 * A byte-level BPE tokenizer.json for tiny models: every byte is a token (so any text, JSON tool
 * calls included, encodes and decodes exactly, and nothing is ever <unk>), plus merges that make
 * the `maxMerges` most frequent pre-tokens of `texts` (words with their leading space,
 * punctuation runs) single tokens. Loads in HF tokenizers (ByteLevel + BPE, as GPT-2/Qwen).
 */
export function buildByteBpeTokenizer(
  texts: string[],
  opts: { maxMerges?: number; chatTemplate?: string } = {},
): { tokenizer: Record<string, unknown>; config: Record<string, unknown> } {
  const vocab: Record<string, number> = {};
  let id = 0;
  for (const t of BYTE_SPECIAL) vocab[t] = id++;
  for (const c of BYTE_ALPHABET) vocab[c] ??= id++;
  const freq = new Map<string, number>();
  for (const t of texts) for (const m of t.match(BYTE_LEVEL_SPLIT) ?? []) if (m.length > 1) freq.set(m, (freq.get(m) ?? 0) + 1);
  const merges: string[] = [];
  const seen = new Set<string>();
  const words = [...freq].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([w]) => w);
  const maxMerges = opts.maxMerges ?? 2000;
  for (const w of words) {
    const chars = [...byteLevelText(w)];
    let cur = chars[0]!;
    for (const ch of chars.slice(1)) {
      if (merges.length >= maxMerges) break;
      const m = `${cur} ${ch}`;
      cur += ch;
      if (!seen.has(m)) {
        seen.add(m);
        merges.push(m);
      }
      vocab[cur] ??= id++;
    }
  }
  const added = BYTE_SPECIAL.map((content, i) => addedToken(i, content, true));
  const tokenizer = tokenizerJson(added, null, byteLevel(), byteLevel(), bpeModel(vocab, merges));
  const config = tokenizerConfig({
    cleanUpSpaces: false,
    eos: '<|im_end|>',
    pad: '<pad>',
    unk: null,
    maxLength: 1024,
    chatTemplate: opts.chatTemplate ?? TINY_TOOLS_CHAT_TEMPLATE,
  });
  return { tokenizer, config };
}
