/**
 * The OpenAI-compatible endpoint (`arbor serve-model`, and the per-run endpoint external agents
 * talk to in training): GET /v1/models, POST /v1/chat/completions, POST /v1/completions, on
 * 127.0.0.1 only. Requests share one RequestSource (./requests.ts: continuous batching over the
 * decode backend, on the scheduler the rollout runs on).
 *
 * Episodes: /episodes/<id>/v1/… is the same API scoped to one training episode (its base URL is
 * given to one agent process); its calls are recorded (./episodes.ts) and become its trajectories.
 *
 * Security (engine/base/http-guard.ts): a Host that is not a loopback name or a foreign Origin is
 * refused before routing; the API key is compared in constant time; keys are never logged.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mixSeed } from '../base/rng';
import { guardRequest, safeDecode, safeEqual } from '../base/http-guard';
import { ChatRenderer, toTemplateMessages, type AssistantOut, type ChatTokenizer } from './chat';
import { ConversationMemory, type Drift } from './memory';
import type { GenResult, GenToken, RequestSource } from './requests';
import { ApiError, chatRequestSchema, completionRequestSchema, parseBody, type ChatRequest, type CompletionRequest } from './schemas';

/** One choice of a recorded call: what the model sampled. */
export interface RecordedChoice {
  ids: number[];
  logprobs: number[];
  entropy: number[];
  /** The decoded completion (stop token included). */
  text: string;
  finish: 'stop' | 'length' | 'tool_calls';
  message?: AssistantOut;
  calls: { name: string; args: unknown; parseError?: string }[];
}

/** One call through the endpoint, as episodes record it. */
export interface RecordedCall {
  id: string;
  kind: 'chat' | 'completion';
  /** The request body as sent. */
  request: unknown;
  promptIds: number[];
  promptText: string;
  choices: RecordedChoice[];
  /** The stored turn this call's prompt continues (chat only). */
  parent?: { call: string; choice: number };
  drift: Drift[];
  startedMs: number;
  endedMs: number;
}

export interface EpisodeSink {
  record(call: RecordedCall): void;
  /**
   * Training: every call of the episode samples as the config's rollout block says, whatever it
   * asks (so the recorded logprobs are the policy's): temperature, top_p, at most maxTokens per
   * turn, a seed from the episode's stream; `endStrings` end a turn and stay in its text (the
   * format's stop strings, e.g. `</answer>`).
   */
  sampling?: { temperature: number; topP: number; maxTokens: number; endStrings: string[]; nextSeed(): number };
  /** A refusal (400) when the episode may make no more calls (rollout.max_turns), else undefined. */
  admit?(): string | undefined;
}

export interface ModelServerOptions {
  /** The name clients pass as `model`. */
  modelId: string;
  tokenizer: ChatTokenizer;
  requests: RequestSource;
  /** Ids that end a turn (EOS, <|im_end|>); kept in the sampled ids. */
  stopTokenIds: number[];
  /** Bearer key required on every request (constant-time compare); none = open (loopback only). */
  apiKey?: string;
  port?: number;
  /** Default most tokens per completion when a request sets none (default: the context left). */
  defaultMaxTokens?: number;
  /** One line per request (method, path, status, tokens); never keys. */
  log?: (line: string) => void;
  /** Where calls outside an episode's scope are recorded (`arbor serve-model --record`). */
  recorder?: EpisodeSink;
}

const now = () => Math.floor(Date.now() / 1000);

/** The sampling fields both endpoints read the same way. */
type Sampling = Pick<ChatRequest, 'temperature' | 'top_p' | 'stop' | 'stream_options'>;
/** An episode's sampling (training), which overrides the request's. */
type Policy = NonNullable<EpisodeSink['sampling']>;
type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

/** A streamed choice's text so far → the part not sent yet (nothing when the text no longer extends what was sent). */
function unsentPart(): (text: string) => string {
  let sent = '';
  return (text) => {
    const part = text.startsWith(sent) ? text.slice(sent.length) : '';
    sent += part;
    return part;
  };
}

/** A request's `stop` as a list. */
const stopList = (stop: ChatRequest['stop']): string[] => (stop === null || stop === undefined ? [] : typeof stop === 'string' ? [stop] : stop);
const bytes = (s: string) => Array.from(Buffer.from(s, 'utf8'));

export class ModelServer {
  readonly memory = new ConversationMemory();
  private chatRenderer: ChatRenderer | undefined;
  private server: Server | null = null;
  private port = 0;
  private episodes = new Map<string, EpisodeSink>();
  private readonly created = now();

  readonly o: ModelServerOptions;

  constructor(o: ModelServerOptions) {
    // A completion whose first sampled token is its stop token has no visible ids: HF-style
    // tokenizers refuse to decode an empty list, and that must be an empty message, not a 500.
    this.o = { ...o, tokenizer: emptySafe(o.tokenizer) };
  }

  /** The model's chat template side (made at the first chat request: /v1/completions needs no template). */
  get renderer(): ChatRenderer {
    return (this.chatRenderer ??= new ChatRenderer(this.o.tokenizer));
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** The base URL of an episode's scope (an agent process's OPENAI_BASE_URL). */
  episodeUrl(id: string): string {
    return `http://127.0.0.1:${this.port}/episodes/${encodeURIComponent(id)}/v1`;
  }

  openEpisode(id: string, sink: EpisodeSink): string {
    if (this.episodes.has(id)) throw new Error(`episode ${id} is already open`);
    this.episodes.set(id, sink);
    return this.episodeUrl(id);
  }

  closeEpisode(id: string): void {
    this.episodes.delete(id);
    this.memory.forget(`episode:${id}`);
  }

  async listen(): Promise<string> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = 5000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.o.port ?? 0, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    return this.url;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const t0 = performance.now();
    const path = safeDecode((req.url ?? '/').split('?')[0]!) ?? '';
    let status = 200;
    let info = '';
    try {
      if (!guardRequest(req, res, this.port)) {
        status = 403;
        return;
      }
      if (this.o.apiKey !== undefined) {
        const auth = req.headers.authorization ?? '';
        const given = /^Bearer\s+(.+)$/i.exec(auth)?.[1] ?? '';
        if (!given || !safeEqual(given, this.o.apiKey))
          throw new ApiError(
            401,
            given ? 'Incorrect API key provided' : 'Missing API key: send Authorization: Bearer <key>',
            'authentication_error',
            null,
            'invalid_api_key',
          );
      }
      let scope = '';
      let sink: EpisodeSink | undefined = this.o.recorder;
      let route = path;
      const ep = /^\/episodes\/([^/]+)(\/.*)$/.exec(path);
      if (ep) {
        sink = this.episodes.get(ep[1]!);
        if (!sink) throw new ApiError(404, `episode ${ep[1]} is not open`, 'not_found_error');
        scope = `episode:${ep[1]}`;
        route = ep[2]!;
      }
      // A client that goes away stops its requests' decoding (their slots go to others).
      const gone = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      if (req.method === 'GET' && (route === '/v1/models' || route === '/models')) return this.json(res, 200, { object: 'list', data: [this.modelCard()] });
      const one = /^\/v1\/models\/(.+)$/.exec(route);
      if (req.method === 'GET' && one) {
        if (one[1] !== this.o.modelId) throw new ApiError(404, `The model '${one[1]}' does not exist`, 'not_found_error', 'model', 'model_not_found');
        return this.json(res, 200, this.modelCard());
      }
      if (route === '/v1/chat/completions' || route === '/v1/completions') {
        if (req.method !== 'POST') throw new ApiError(405, `${route} takes POST`);
        const body = await readJson(req);
        if (route === '/v1/chat/completions') info = await this.chat(parseBody(chatRequestSchema, body), body, res, scope, gone.signal, sink);
        else info = await this.completion(parseBody(completionRequestSchema, body), body, res, gone.signal, sink);
        return;
      }
      throw new ApiError(404, `no route ${req.method} ${route}`, 'not_found_error');
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError(500, (e as Error).message ?? String(e), 'server_error');
      status = err.status;
      info = err.message;
      if (!res.headersSent) this.json(res, err.status, err.body());
      else if (!res.writableEnded) res.end();
    } finally {
      this.o.log?.(`${req.method} ${path} ${status} ${(performance.now() - t0).toFixed(0)}ms${info ? ` ${info}` : ''}`);
    }
  }

  private modelCard() {
    return { id: this.o.modelId, object: 'model', created: this.created, owned_by: 'arbor', max_model_len: this.o.requests.maxLength };
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }

  /** What both endpoints check first: the model's name, and that the episode (if any) may make another call. */
  private admit(model: string, sink: EpisodeSink | undefined): void {
    if (model !== this.o.modelId)
      throw new ApiError(404, `The model '${model}' does not exist (this server serves '${this.o.modelId}')`, 'not_found_error', 'model', 'model_not_found');
    const refused = sink?.admit?.();
    if (refused) throw new ApiError(400, refused, 'invalid_request_error', null, 'episode_limit');
  }

  private maxTokens(prompt: number, asked: number | null | undefined, field: string): number {
    const ctx = this.o.requests.maxLength;
    if (prompt >= ctx)
      throw new ApiError(400, `${field}: the prompt is ${prompt} tokens; the model's context is ${ctx}`, undefined, field, 'context_length_exceeded');
    const room = ctx - prompt;
    return Math.min(asked ?? this.o.defaultMaxTokens ?? room, room);
  }

  /** One seed per choice: the episode's stream in training, else the request's (or a random one). */
  private seeds(seed: number | null | undefined, n: number, pol: Policy | undefined): number[] {
    if (pol) return Array.from({ length: n }, () => pol.nextSeed());
    const base = seed ?? randomBytes(4).readUInt32LE(0);
    return Array.from({ length: n }, (_, i) => (n === 1 && seed !== null && seed !== undefined ? seed >>> 0 : mixSeed(base, i)));
  }

  private entry(t: GenToken): { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number; bytes: number[] }[] } {
    const dec = this.o.tokenizer;
    const token = dec.decode([t.id]);
    return {
      token,
      logprob: t.logprob,
      bytes: bytes(token),
      top_logprobs: (t.top ?? []).map((x) => {
        const s = dec.decode([x.id]);
        return { token: s, logprob: x.logprob, bytes: bytes(s) };
      }),
    };
  }

  /** The completion's visible text: without its stop token, cut at its stop string. */
  private visible(r: GenResult | { tokens: GenToken[] }, stopStrings: string[]): string {
    const ids = r.tokens.map((t) => t.id);
    const last = ids[ids.length - 1];
    const text = this.o.tokenizer.decode(last !== undefined && this.o.stopTokenIds.includes(last) ? ids.slice(0, -1) : ids);
    let cut = text.length;
    for (const s of stopStrings) {
      const at = text.indexOf(s);
      if (at >= 0 && at < cut) cut = at;
    }
    return text.slice(0, cut);
  }

  /**
   * One choice's generation under the request's sampling, or in an episode the rollout's
   * (EpisodeSink.sampling). On a stream, `onToken` sees each token with all of them so far.
   */
  private generate(
    { b, pol, ...g }: { b: Sampling; pol: Policy | undefined; promptIds: number[]; maxTokens: number; seed: number; topLogprobs: number; signal: AbortSignal },
    onToken?: (t: GenToken, toks: GenToken[]) => void,
  ): Promise<GenResult> {
    const toks: GenToken[] = [];
    return this.o.requests.generate({
      ...g,
      temperature: pol ? pol.temperature : (b.temperature ?? 1),
      topP: pol ? pol.topP : (b.top_p ?? 1),
      stopTokenIds: this.o.stopTokenIds,
      stopStrings: [...stopList(b.stop), ...(pol?.endStrings ?? [])],
      onToken: onToken
        ? (t) => {
            toks.push(t);
            onToken(t, toks);
          }
        : undefined,
    });
  }

  /**
   * What both endpoints do once every choice is generated: the call goes to the sink (when there
   * is one), then the response ends: on a stream the usage chunk (when asked) and [DONE], else the
   * whole body (`body()`: its fields between `model` and `usage`). Returns the usage.
   */
  private finish(
    b: Sampling,
    sink: EpisodeSink | undefined,
    out: { res: ServerResponse; stream: Sse | null; head: Record<string, unknown>; object: string; body: () => Record<string, unknown> },
    call: Omit<RecordedCall, 'choices' | 'endedMs'>,
    results: { r: GenResult; finish: RecordedChoice['finish']; message?: AssistantOut; calls?: RecordedChoice['calls'] }[],
  ): Usage {
    const completionTokens = results.reduce((a, x) => a + x.r.tokens.length, 0);
    const promptTokens = call.promptIds.length;
    const usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
    const { parent, drift, startedMs, ...head } = call;
    sink?.record({
      ...head,
      choices: results.map((x) => ({
        ids: x.r.tokens.map((t) => t.id),
        logprobs: x.r.tokens.map((t) => t.logprob),
        entropy: x.r.tokens.map((t) => t.entropy),
        text: this.o.tokenizer.decode(x.r.tokens.map((t) => t.id)),
        finish: x.finish,
        ...(x.message ? { message: x.message } : {}),
        calls: x.calls ?? [],
      })),
      ...(parent ? { parent } : {}),
      drift,
      startedMs,
      endedMs: Date.now(),
    });
    if (out.stream) {
      if (b.stream_options?.include_usage) out.stream.send({ ...out.head, choices: [], usage });
      out.stream.done();
    } else this.json(out.res, 200, { id: call.id, object: out.object, created: now(), model: this.o.modelId, ...out.body(), usage });
    return usage;
  }

  private async chat(b: ChatRequest, raw: unknown, res: ServerResponse, scope: string, signal: AbortSignal, sink?: EpisodeSink): Promise<string> {
    this.admit(b.model, sink);
    const pol = sink?.sampling;
    const startedMs = Date.now();
    const id = `chatcmpl-${randomBytes(12).toString('hex')}`;
    const n = b.n ?? 1;
    const messages = toTemplateMessages(b.messages);
    const plan = this.renderer.plan(b.tools ?? undefined, b.tool_choice);
    const prompt = this.memory.plan(scope, this.renderer, this.o.stopTokenIds, messages, plan.tools, plan.forced);
    const maxTokens = Math.min(this.maxTokens(prompt.ids.length, b.max_completion_tokens ?? b.max_tokens, 'messages'), pol?.maxTokens ?? Infinity);
    const stopStrings = stopList(b.stop);
    const topK = b.logprobs ? (b.top_logprobs ?? 0) : 0;
    if (!b.logprobs && b.top_logprobs) throw new ApiError(400, 'top_logprobs: needs logprobs: true', undefined, 'top_logprobs');
    const ids = b.return_token_ids === true;
    const parallel = b.parallel_tool_calls !== false;
    const stream = b.stream === true ? new Sse(res) : null;
    const head = { id, object: 'chat.completion.chunk', created: now(), model: this.o.modelId };
    const holdFor = [...stopStrings, ...(plan.parseCalls ? ['<tool_call>'] : [])];
    const gen = { b, pol, promptIds: prompt.ids, maxTokens, topLogprobs: topK, signal };
    const results = await Promise.all(
      this.seeds(b.seed, n, pol).map(async (seed, index) => {
        if (stream)
          stream.send({
            ...head,
            ...(ids && index === 0 ? { prompt_token_ids: prompt.ids } : {}),
            choices: [{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
          });
        const unsent = unsentPart();
        const r = await this.generate(
          { ...gen, seed },
          stream
            ? (t, toks) => {
                let text = plan.forced + this.visible({ tokens: toks }, stopStrings);
                if (plan.parseCalls && text.includes('<tool_call>')) text = text.slice(0, text.indexOf('<tool_call>'));
                const safe = holdBack(text, holdFor, plan.parseCalls);
                const delta = unsent(safe);
                stream.send({
                  ...head,
                  choices: [
                    {
                      index,
                      delta: { content: delta },
                      logprobs: b.logprobs ? { content: [this.entry(t)] } : null,
                      finish_reason: null,
                      ...(ids ? { token_ids: [t.id] } : {}),
                    },
                  ],
                });
              }
            : undefined,
        );
        const text = plan.forced + this.visible(r, stopStrings);
        const { message, calls } = plan.parseCalls
          ? this.renderer.assistant(text, true, parallel)
          : { message: { role: 'assistant' as const, content: text }, calls: [] };
        const finish: RecordedChoice['finish'] = message.tool_calls?.length ? 'tool_calls' : r.finish;
        if (stream) {
          const content = message.content ?? '';
          const rest = unsent(content);
          const delta: Record<string, unknown> = {};
          if (rest) delta.content = rest;
          if (message.tool_calls?.length) delta.tool_calls = message.tool_calls.map((c, k) => ({ index: k, ...c }));
          if (Object.keys(delta).length) stream.send({ ...head, choices: [{ index, delta, logprobs: null, finish_reason: null }] });
          stream.send({ ...head, choices: [{ index, delta: {}, logprobs: null, finish_reason: finish }] });
        }
        return { r, message, calls, finish };
      }),
    );
    // Remember every choice: a later request that sends one back verbatim continues from its ids.
    results.forEach((x, choice) =>
      this.memory.remember(scope, messages, plan.tools, {
        callId: id,
        choice,
        scope,
        message: x.message,
        promptIds: prompt.ids,
        completionIds: x.r.tokens.map((t) => t.id),
        spans: prompt.spans,
        endedWithToken: x.r.stop.kind === 'token',
      }),
    );
    const body = () => ({
      ...(ids ? { prompt_token_ids: prompt.ids } : {}),
      choices: results.map((x, index) => ({
        index,
        message: x.message,
        logprobs: b.logprobs ? { content: x.r.tokens.map((t) => this.entry(t)) } : null,
        finish_reason: x.finish,
        ...(ids ? { token_ids: x.r.tokens.map((t) => t.id) } : {}),
      })),
    });
    const usage = this.finish(
      b,
      sink,
      { res, stream, head, object: 'chat.completion', body },
      {
        id,
        kind: 'chat',
        request: raw,
        promptIds: prompt.ids,
        promptText: prompt.text,
        ...(prompt.parent ? { parent: { call: prompt.parent.callId, choice: prompt.parent.choice } } : {}),
        drift: prompt.drift,
        startedMs,
      },
      results,
    );
    return `prompt ${usage.prompt_tokens} completion ${usage.completion_tokens}${prompt.parent ? ' (continued)' : ''}${prompt.drift.length ? ` drift ${prompt.drift.length}` : ''}`;
  }

  private async completion(b: CompletionRequest, raw: unknown, res: ServerResponse, signal: AbortSignal, sink?: EpisodeSink): Promise<string> {
    this.admit(b.model, sink);
    const pol = sink?.sampling;
    const startedMs = Date.now();
    const id = `cmpl-${randomBytes(12).toString('hex')}`;
    const tok = this.o.tokenizer;
    let promptIds: number[];
    if (typeof b.prompt === 'string') promptIds = tok.encode(b.prompt);
    else {
      const vocab = this.o.requests.backend.vocabSize;
      const bad = b.prompt.findIndex((x) => x >= vocab);
      if (bad >= 0) throw new ApiError(400, `prompt.${bad}: token id ${b.prompt[bad]} is outside the vocabulary (${vocab})`, undefined, `prompt.${bad}`);
      promptIds = b.prompt.slice();
    }
    if (promptIds.length === 0) throw new ApiError(400, 'prompt: encodes to no tokens', undefined, 'prompt');
    const maxTokens = Math.min(
      this.maxTokens(promptIds.length, b.max_tokens ?? (this.o.defaultMaxTokens ? undefined : 16), 'prompt'),
      pol?.maxTokens ?? Infinity,
    );
    const stopStrings = stopList(b.stop);
    const topK = b.logprobs ?? 0;
    const wantLogprobs = b.logprobs !== null && b.logprobs !== undefined;
    const ids = b.return_token_ids === true;
    const n = b.n ?? 1;
    const stream = b.stream === true ? new Sse(res) : null;
    const head = { id, object: 'text_completion', created: now(), model: this.o.modelId };
    const legacy = (toks: GenToken[]) => ({
      tokens: toks.map((t) => tok.decode([t.id])),
      token_logprobs: toks.map((t) => t.logprob),
      top_logprobs: toks.map((t) => Object.fromEntries((t.top ?? []).map((x) => [tok.decode([x.id]), x.logprob]))),
    });
    const gen = { b, pol, promptIds, maxTokens, topLogprobs: topK, signal };
    const results = await Promise.all(
      this.seeds(b.seed, n, pol).map(async (seed, index) => {
        const unsent = unsentPart();
        const r = await this.generate(
          { ...gen, seed },
          stream
            ? (t, toks) => {
                const safe = holdBack(this.visible({ tokens: toks }, stopStrings), stopStrings, false);
                const delta = unsent(safe);
                stream.send({
                  ...head,
                  choices: [{ index, text: delta, logprobs: wantLogprobs ? legacy([t]) : null, finish_reason: null, ...(ids ? { token_ids: [t.id] } : {}) }],
                });
              }
            : undefined,
        );
        const text = this.visible(r, stopStrings);
        if (stream) {
          const rest = unsent(text);
          stream.send({ ...head, choices: [{ index, text: rest, logprobs: null, finish_reason: r.finish }] });
        }
        return { r, text };
      }),
    );
    const body = () => ({
      choices: results.map((x, index) => ({
        index,
        text: x.text,
        logprobs: wantLogprobs ? legacy(x.r.tokens) : null,
        finish_reason: x.r.finish,
        ...(ids ? { prompt_token_ids: promptIds, token_ids: x.r.tokens.map((t) => t.id) } : {}),
      })),
    });
    const usage = this.finish(
      b,
      sink,
      { res, stream, head, object: 'text_completion', body },
      { id, kind: 'completion', request: raw, promptIds, promptText: tok.decode(promptIds), drift: [], startedMs },
      results.map((x) => ({ r: x.r, finish: x.r.finish })),
    );
    return `prompt ${usage.prompt_tokens} completion ${usage.completion_tokens}`;
  }
}

/** The tokenizer with `decode([])` = '' (some tokenizers throw on an empty id list). */
export function emptySafe(tok: ChatTokenizer): ChatTokenizer {
  return {
    encode: (text) => tok.encode(text),
    decode: (ids) => (ids.length === 0 ? '' : tok.decode(ids)),
    renderChat: (messages, opts) => tok.renderChat(messages, opts),
    tokenId: (t) => tok.tokenId(t),
  };
}

/** Text safe to stream: without a trailing partial stop string / call opening, a partial UTF-8 character, or (calls) trailing whitespace. */
export function holdBack(text: string, hold: string[], trimEnd: boolean): string {
  let t = text;
  while (t.endsWith('\uFFFD')) t = t.slice(0, -1);
  let cut = t.length;
  for (const h of hold)
    for (let k = Math.min(h.length - 1, t.length); k > 0; k--)
      if (t.endsWith(h.slice(0, k))) {
        cut = Math.min(cut, t.length - k);
        break;
      }
  t = t.slice(0, cut);
  return trimEnd ? t.trimEnd() : t;
}

/** Server-sent events as OpenAI streams them: `data: {…}` lines, then `data: [DONE]`. */
class Sse {
  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  }
  send(obj: unknown): void {
    if (!this.res.writableEnded) this.res.write(`data: ${JSON.stringify(obj)}\n\n`);
  }
  done(): void {
    if (!this.res.writableEnded) this.res.end('data: [DONE]\n\n');
  }
}

async function readJson(req: IncomingMessage, limit = 16 << 20): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > limit) throw new ApiError(413, `body: larger than ${limit} bytes`);
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, `body: invalid JSON (${(e as Error).message})`, 'invalid_request_error', null);
  }
}
