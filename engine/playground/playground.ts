/**
 * The playground: chat with a checkpoint and its tools. The checkpoint folder is loaded as a
 * PolicyModel with the tokenizer saved in it; the conversation is rendered with the folder's
 * chat template and run as one multi-turn episode through the rollout engine, with the
 * task's tools (BM25 search over the held-out world of the run that made the checkpoint, or over
 * its QA dataset's contexts; for a run with tool files, its task kind's own chat tools and its
 * files, as training opens them), plus the tools of the run's `environment.mcp_servers` (started
 * once per chat, closed when it ends). `chat` events go to the asking client as things happen:
 *   { chatId, type: 'token', text }            text the model generated since the last event
 *   { chatId, type: 'turn', text, tokens }     a model turn ended (its exact decoded text)
 *   { chatId, type: 'tool_call', name, args }  a call parsed from that turn
 *   { chatId, type: 'observation', name, content, error? }  what the tool returned
 *   { chatId, type: 'done', text, reason, stopped? }  the episode ended (stopped: by playground.cancel)
 *   { chatId, type: 'error', message }         it failed (the request also fails)
 * The request resolves with the whole transcript when the episode ends. `playground.cancel`
 * with the chat's id (queued or running) stops it while it waits its turn, between two decoded
 * tokens, or after a model turn before that turn's tool calls run: the chat then ends normally
 * (no error), `reason` "stopped by the user", `done.text` the last (possibly partial) answer,
 * and the transcript keeps what was generated so far. Cancelling an unknown or ended chat
 * answers { cancelled: false } and changes nothing.
 */
import { existsSync } from 'node:fs';
import { isAbsolute, join, resolve as resolvePath } from 'node:path';
import { randomUUID } from 'node:crypto';
import { formatByName, FORMAT_NAMES } from '../env/formats';
import { ToolEnv } from '../env/toolenv';
import { generateWorld } from '../tasks/multihop/world';
import { loadQaDataset } from '../env/dataset';
import { Bm25Index, searchTool } from '../env/search';
import type { Tool } from '../env/tool';
import { McpToolSet } from '../env/mcp/client';
import { mcpServersSchema, mcpServersSource, withServerCwds, type McpServersConfig } from '../env/mcp/config';
import { PolicyModel } from '../model/runtime';
import { HfTokenizer } from '../model/tokenizer';
import { rollout } from '../rollout/engine';
import { eosTokenIds, policyDecodeBackend } from '../rollout/model-backend';
import type { DecodeBackend, EpisodeEnv } from '../rollout/ports';
import type { Store } from '../store/store';
import { resolveCheckpoint } from '../run/checkpoint';
import { runConfig } from '../run/stored';
import { openEnvironment, type OpenedEnvironment } from '../tasks/open';
import { envSetup, taskTools, type EnvSetup } from '../tasks/env-setup';
import { builtinTaskTools } from '../tasks/registry';
import { taskKindReads } from '../config/experiment';

export interface ChatRequest {
  checkpoint: string;
  messages: { role: string; content: string; name?: string }[];
  tools?: string[];
  chatId?: string;
  /** Tool-call format; default: the run's environment.format, else the registry's default. */
  format?: string;
  /** Sampling temperature; default: the run's eval.temperature (else 0, greedy). */
  temperature?: number;
}

export type TranscriptEntry =
  | { role: 'assistant'; content: string; tokens: number }
  | { role: 'tool_call'; name: string; args: unknown }
  | { role: 'tool'; name: string; content: string; error?: string };

export interface ChatResult {
  chatId: string;
  checkpoint: { id: string; path: string; step?: number; runId?: string };
  /** Seed of the world the search tool reads (the run's task.eval_seed), for multi-hop runs. */
  world?: number;
  /** The dataset whose contexts the search tool reads, for qa runs. */
  dataset?: string;
  /** The tool-call format the chat ran in. */
  format?: string;
  /** The tools the chat offered the model, each with where it comes from (a built-in, the run's tool file, or environment.mcp_servers). */
  tools?: { name: string; source: string }[];
  /** The prompt the model saw (the conversation through the checkpoint's chat template, tools rendered) and its token count. */
  prompt?: { text: string; tokens: number };
  transcript: TranscriptEntry[];
  reason: string;
  /** True when playground.cancel stopped the chat. */
  stopped?: boolean;
}

/** Thrown inside a chat's decode/tool steps once it is cancelled; `run` ends the chat as stopped. */
class ChatCancelled extends Error {
  constructor(chatId: string) {
    super(`chat "${chatId}" was stopped by playground.cancel`);
  }
}

/** Episode limits and sampling for a chat (from the run's config when it has them). */
export interface ChatSettings {
  world: number;
  /** A run's task.dataset (a QA dataset): its context paragraphs are the search corpus instead of a world. */
  dataset?: string;
  maxTurns: number;
  maxNewTokens: number;
  maxTotalLength: number;
  temperature: number;
  /** The run's environment.format (when it names one). */
  format?: string;
  /** The run's environment limits. */
  maxCalls?: number;
  maxObservationTokens?: number;
  /** The run's environment.mcp_servers (inline, or a JSON file in the mcpServers layout): their tools join the chat's. */
  mcpServers?: unknown;
}

const DEFAULTS: ChatSettings = { world: 1001, maxTurns: 4, maxNewTokens: 32, maxTotalLength: 384, temperature: 0 };

/** Read the settings a run's config implies; anything missing or of the wrong type falls back to the defaults. */
export function chatSettings(config: Record<string, unknown> | undefined): ChatSettings {
  const get = (path: string[]): unknown => path.reduce<unknown>((o, k) => (o && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), config);
  const int = (v: unknown, d: number) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : d);
  // The dataset is the corpus where the run's task kind reads task.dataset (its registry entry's `reads`).
  const dataset =
    taskKindReads(get(['task', 'kind']), 'task.dataset') && typeof get(['task', 'dataset']) === 'string' ? (get(['task', 'dataset']) as string) : undefined;
  return {
    world: int(get(['task', 'eval_seed']), DEFAULTS.world),
    ...(dataset ? { dataset } : {}),
    maxTurns: Math.max(1, int(get(['rollout', 'max_turns']), DEFAULTS.maxTurns)),
    maxNewTokens: Math.max(1, int(get(['rollout', 'max_new_tokens']), DEFAULTS.maxNewTokens)),
    maxTotalLength: Math.max(2, int(get(['rollout', 'max_total_length']), DEFAULTS.maxTotalLength)),
    temperature: typeof get(['eval', 'temperature']) === 'number' ? (get(['eval', 'temperature']) as number) : DEFAULTS.temperature,
    ...(typeof get(['environment', 'format']) === 'string' ? { format: get(['environment', 'format']) as string } : {}),
    ...(typeof get(['environment', 'max_calls_per_turn']) === 'number' ? { maxCalls: get(['environment', 'max_calls_per_turn']) as number } : {}),
    ...(typeof get(['environment', 'max_observation_tokens']) === 'number'
      ? { maxObservationTokens: get(['environment', 'max_observation_tokens']) as number }
      : {}),
    ...(get(['environment', 'mcp_servers']) !== undefined ? { mcpServers: get(['environment', 'mcp_servers']) } : {}),
  };
}

/**
 * The MCP servers of a run's environment.mcp_servers as config.ts reads them: inline, or a JSON
 * file holding { mcpServers } (relative paths and each server's cwd against `baseDir`). Errors
 * name the field.
 */
export function playgroundMcpServers(value: unknown, baseDir: string): McpServersConfig {
  const abs = (p: string) => (isAbsolute(p) ? p : resolvePath(baseDir, p));
  let source: { servers: unknown; field: string };
  try {
    source = mcpServersSource(value, abs);
  } catch (e) {
    throw new Error(`playground.chat: environment.mcp_servers: ${(e as Error).message}`);
  }
  const { servers, field } = source;
  const r = mcpServersSchema.safeParse(servers);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new Error(`playground.chat: ${[field, ...i.path.map(String)].join('.')}: ${i.message}`);
  }
  return withServerCwds(r.data, abs);
}

interface Loaded {
  path: string;
  model: PolicyModel;
  tok: HfTokenizer;
}

/**
 * Serves playground.chat. One model stays loaded (the last checkpoint chatted with), since
 * building its ORT decode session is the slow part; chats run one at a time.
 */
/** What a chat reads of the engine that hosts it: the workspace's store and home folder. */
export interface PlaygroundHost {
  readonly store: Store | null;
  readonly opts: { readonly home: string };
}

/** Where a chat's events go (the asking client). */
export interface ChatClient {
  send(message: unknown): void;
}

export class Playground {
  private loaded: Loaded | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private corpora = new Map<string, Map<string, Tool>>();
  /** Chats accepted and not yet ended (queued or running), each with the controller that stops it. */
  private active = new Map<string, AbortController>();

  constructor(private readonly engine: PlaygroundHost) {}

  /** Resolve a checkpoint id from the store, or a folder path holding an HF model. */
  resolve(checkpoint: string): {
    id: string;
    path: string;
    step?: number;
    runId?: string;
    settings: ChatSettings;
    config?: Record<string, unknown>;
  } {
    const ck = resolveCheckpoint(this.engine.store!, checkpoint);
    return { id: ck.id, path: ck.path, step: ck.step, runId: ck.runId, settings: chatSettings(ck.config), config: ck.config };
  }

  private async load(path: string): Promise<Loaded> {
    if (this.loaded?.path === path) return this.loaded;
    await this.loaded?.model.dispose();
    this.loaded = null;
    if (!existsSync(join(path, 'tokenizer.json'))) throw new Error(`checkpoint folder ${path} has no tokenizer.json, so its tokens cannot be read`);
    const tok = HfTokenizer.load(path);
    const model = PolicyModel.load(path, { threads: 1 });
    this.loaded = { path, model, tok };
    return this.loaded;
  }

  /** The search tool over the run's corpus: a qa dataset's contexts, or the multi-hop world. */
  private tools(s: ChatSettings): Map<string, Tool> {
    const key = s.dataset ? `qa:${s.dataset}` : `world:${s.world}`;
    let t = this.corpora.get(key);
    if (!t) {
      const passages = s.dataset ? loadQaDataset(s.dataset).passages : generateWorld(s.world).passages;
      t = new Map([['search', searchTool(new Bm25Index(passages), { topK: 2 })]]);
      this.corpora.set(key, t);
    }
    return t;
  }

  /** Run one chat; events go to `client` as they happen. Chats are served one after another. */
  chat(req: ChatRequest, client: ChatClient): Promise<ChatResult> {
    const chatId = req.chatId ?? randomUUID();
    if (this.active.has(chatId)) return Promise.reject(new Error(`playground.chat: chat "${chatId}" is already running (give each chat its own chatId)`));
    const ac = new AbortController();
    this.active.set(chatId, ac);
    const run = this.chain
      .then(() => this.run(req, chatId, client, ac.signal))
      .finally(() => {
        this.active.delete(chatId);
      });
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** Stop a queued or running chat; false when no chat of that id is waiting or running. */
  cancel(chatId: string): { cancelled: boolean } {
    const ac = this.active.get(chatId);
    if (!ac) return { cancelled: false };
    ac.abort();
    return { cancelled: true };
  }

  /**
   * The tools a chat offers, with where each comes from: the corpus search (the run's held-out
   * world or qa dataset); for a run with tool/reward files, its environment opened as training
   * opens it (engine/tasks/open.ts: the files in the sandbox, its MCP servers, workspace, limits
   * and tool timeout) beside its task kind's own chat tools (its registry entry); else the run's
   * MCP servers (this lighter path also serves stored configs that are not whole experiment
   * configs). What it opens is in `opened` / `mcp`, closed by the caller.
   */
  private async chatEnvironment(ck: ReturnType<Playground['resolve']>, checkCancelled: () => void): Promise<ChatEnvironment> {
    const s = ck.settings;
    const out: ChatEnvironment = { tools: this.tools(s), sources: new Map(), corpus: s.dataset ? { dataset: s.dataset } : { world: s.world } };
    for (const n of out.tools.keys()) out.sources.set(n, 'built-in');
    const raw = ck.config as { environment?: { tools?: unknown[]; reward?: unknown } } | undefined;
    if (ck.runId && raw?.environment && (raw.environment.tools?.length || raw.environment.reward !== undefined)) {
      const loaded = runConfig(this.engine.store!, ck.runId, this.engine.opts.home);
      const { cfg } = loaded;
      out.opened = await openEnvironment(loaded, { log: () => undefined });
      checkCancelled();
      out.setup = envSetup(cfg, out.opened.host, out.opened.extras.mcpTools);
      const own = builtinTaskTools(cfg, 'chat');
      out.corpus = own?.corpus ?? {};
      out.tools = new Map(taskTools(own?.tools ?? [], out.setup).tools.map((t): [string, Tool] => [t.name, t]));
      for (const [name, file] of out.setup.toolFiles) out.sources.set(name, file);
    } else if (s.mcpServers !== undefined) {
      const home = this.engine.opts.home;
      const baseDir = existsSync(join(home, 'workspace')) ? join(home, 'workspace') : home;
      // A crash mid-call becomes the call's error observation (and one restart), as in a run.
      out.mcp = await McpToolSet.open(playgroundMcpServers(s.mcpServers, baseDir), { baseDir, origin: `the playground (checkpoint ${ck.path})` });
      checkCancelled();
      out.tools = new Map([...out.tools, ...out.mcp.tools.map((t): [string, Tool] => [t.name, t])]);
      for (const t of out.mcp.tools) out.sources.set(t.name, 'environment.mcp_servers');
    }
    return out;
  }

  private async run(req: ChatRequest, chatId: string, client: ChatClient, signal: AbortSignal): Promise<ChatResult> {
    const emit = (data: Record<string, unknown>) => client.send({ event: 'chat', data: { chatId, ...data } });
    const checkCancelled = () => {
      if (signal.aborted) throw new ChatCancelled(chatId);
    };
    const transcript: TranscriptEntry[] = [];
    // Text of the model turn being generated, for a cancel in the middle of it.
    const live = { partial: '', partialTokens: 0 };
    let resolved: ReturnType<Playground['resolve']> | undefined;
    let chatEnv: ChatEnvironment | undefined;
    try {
      if (!req.messages.some((m) => m.role === 'user')) throw new Error('playground.chat: messages has no user message');
      const ck = (resolved = this.resolve(req.checkpoint));
      checkCancelled(); // cancelled while queued behind another chat
      const { model, tok } = await this.load(ck.path);
      checkCancelled();
      const s = ck.settings;
      const maxTotalLength = Math.min(s.maxTotalLength, model.config.maxPositionEmbeddings);
      chatEnv = await this.chatEnvironment(ck, checkCancelled);
      const { setup, sources } = chatEnv;
      const enabled = req.tools ? new Map([...chatEnv.tools].filter(([name]) => req.tools!.includes(name))) : chatEnv.tools;
      const formatName = req.format ?? s.format ?? FORMAT_NAMES[0]!;
      if (!FORMAT_NAMES.includes(formatName))
        throw new Error(`playground.chat: format: unknown tool-call format "${formatName}" (available: ${FORMAT_NAMES.join(', ')})`);
      const toolList = [...enabled.values()];
      const format = formatByName(formatName, { tools: toolList, maxCalls: setup?.maxCalls ?? s.maxCalls ?? 2 });
      // The same episode environment as training: the conversation as the task, the tools rendered
      // by the checkpoint's chat template, observations as token ids (hermes: tool messages).
      const toolEnv = new ToolEnv({
        task: { id: 'playground', messages: req.messages.map((m) => ({ role: m.role, content: m.content })) },
        tools: toolList,
        format,
        tokenizer: tok,
        instruction: '',
        maxTurns: s.maxTurns,
        maxObservationTokens: s.maxObservationTokens,
        endTokenIds: eosTokenIds(model.config),
        ...(setup ? { limits: setup.limits, workspace: setup.workspace } : {}),
      });
      const { ids: promptIds, text: promptText } = await toolEnv.prompt();
      if (promptIds.length >= maxTotalLength)
        throw new Error(`the conversation is ${promptIds.length} tokens, the checkpoint's limit is ${maxTotalLength}; clear the chat`);
      const episode = streamedEpisode({
        model,
        tok,
        maxTotalLength,
        toolEnv,
        format,
        prompt: { ids: promptIds, text: promptText },
        emit,
        checkCancelled,
        transcript,
        live,
      });
      const result = await rollout(episode.backend, {
        tasks: [{ id: 'playground', createEnv: () => episode.env }],
        n: 1,
        signal,
        seed: Date.now() % 2 ** 31,
        sampling: { temperature: req.temperature ?? s.temperature },
        tokenizer: { encode: (t) => tok.encode(t), decode: (ids) => tok.decode(ids) },
        limits: { maxNewTokens: s.maxNewTokens, maxTurns: s.maxTurns, maxTotalLength },
        stop: { strings: format.stopStrings, tokenIds: eosTokenIds(model.config) },
      });
      const t = result.trajectories[0]!;
      const last = [...t.turns].reverse().find((u) => u.role === 'model');
      const reason = t.truncated
        ? `stopped at a limit (${s.maxTurns} turns, ${s.maxNewTokens} tokens per turn, ${maxTotalLength} in all)`
        : (last?.stop?.reason ?? 'done');
      emit({ type: 'done', text: last?.text ?? '', reason });
      return {
        chatId,
        ...chatSource(ck, chatEnv.corpus),
        format: formatName,
        tools: toolList.map((x) => ({ name: x.name, source: sources.get(x.name) ?? 'built-in' })),
        prompt: { text: promptText ?? tok.decode(promptIds), tokens: promptIds.length },
        transcript,
        reason,
      };
    } catch (e) {
      // After a cancel, whatever ended the episode (ChatCancelled from a decode step, the same
      // wrapped by the rollout engine when thrown in the env's step, or the rollout's own
      // abort check) ends the chat as stopped, not failed.
      if (signal.aborted || e instanceof ChatCancelled) {
        const reason = 'stopped by the user';
        if (live.partial) transcript.push({ role: 'assistant', content: live.partial, tokens: live.partialTokens });
        const lastAnswer = [...transcript].reverse().find((t) => t.role === 'assistant');
        emit({ type: 'done', text: lastAnswer && lastAnswer.role === 'assistant' ? lastAnswer.content : '', reason, stopped: true });
        const source = resolved ? chatSource(resolved, chatEnv?.corpus) : { checkpoint: { id: req.checkpoint, path: '' } };
        return { chatId, ...source, transcript, reason, stopped: true };
      }
      const message = e instanceof Error ? e.message : String(e);
      emit({ type: 'error', message });
      throw e;
    } finally {
      await chatEnv?.mcp?.close();
      await chatEnv?.opened?.close();
    }
  }

  async close(): Promise<void> {
    await this.loaded?.model.dispose();
    this.loaded = null;
  }
}

/** The tools a chat offers and what was opened for them (Playground.chatEnvironment). */
interface ChatEnvironment {
  tools: Map<string, Tool>;
  /** Where each tool comes from: 'built-in', the run's tool file, or environment.mcp_servers. */
  sources: Map<string, string>;
  /** The corpus the offered search reads, as the result reports it (none: the run's task kind has no chat search). */
  corpus: { world: number } | { dataset: string } | Record<string, never>;
  setup?: EnvSetup;
  opened?: OpenedEnvironment;
  mcp?: McpToolSet;
}

/**
 * One chat as a rollout: a decode backend that streams each sampled token to the client as text
 * (`token` events), and the episode environment that runs the checkpoint's turns through the
 * ToolEnv, reporting turns, calls and observations (`turn`, `tool_call`, `observation`) and
 * keeping the transcript. `live` holds the turn being generated, for a cancel in its middle.
 */
function streamedEpisode(o: {
  model: PolicyModel;
  tok: HfTokenizer;
  maxTotalLength: number;
  toolEnv: ToolEnv;
  format: ReturnType<typeof formatByName>;
  prompt: { ids: number[]; text?: string };
  emit: (data: Record<string, unknown>) => void;
  checkCancelled: () => void;
  transcript: TranscriptEntry[];
  live: { partial: string; partialTokens: number };
}): { backend: DecodeBackend; env: EpisodeEnv } {
  const { tok, emit, checkCancelled, transcript, live } = o;
  // Streaming: the engine feeds each sampled token back on the next decode call, so every
  // call after the prompt's starts with the token sampled last (KV-cache decoding).
  const stream = { calls: 0, turnIds: [] as number[], sent: '', skipNext: false };
  const flush = () => {
    const text = tok.decode(stream.turnIds);
    live.partial = text;
    live.partialTokens = stream.turnIds.length;
    if (text.length > stream.sent.length && text.startsWith(stream.sent)) emit({ type: 'token', text: text.slice(stream.sent.length) });
    stream.sent = text;
  };
  const base = policyDecodeBackend(o.model, { maxBatch: 1, maxLength: o.maxTotalLength });
  const backend: DecodeBackend = {
    vocabSize: base.vocabSize,
    maxBatch: base.maxBatch,
    maxLength: base.maxLength,
    release: (slot) => base.release(slot),
    async extend(items) {
      checkCancelled();
      if (stream.calls++ > 0 && items[0]) {
        if (stream.skipNext) stream.skipNext = false;
        else {
          stream.turnIds.push(items[0].tokens[0]!);
          flush();
        }
      }
      return base.extend(items);
    },
  };
  const env: EpisodeEnv = {
    prompt: async () => ({ ids: o.prompt.ids, text: o.prompt.text }),
    async step(turn) {
      stream.turnIds = turn.tokenIds.slice();
      flush();
      emit({ type: 'turn', text: turn.text, tokens: turn.tokenIds.length });
      transcript.push({ role: 'assistant', content: turn.text, tokens: turn.tokenIds.length });
      stream.turnIds = [];
      stream.sent = '';
      live.partial = '';
      live.partialTokens = 0;
      stream.skipNext = true;
      const parsed = o.format.parse(turn.text);
      if (parsed.answer !== undefined || (parsed.calls.length === 0 && turn.stopReason === 'stop_token')) return { done: true };
      checkCancelled();
      const r = await o.toolEnv.step(turn);
      for (const c of r.toolCalls) {
        emit({ type: 'tool_call', name: c.name, args: c.args });
        transcript.push({ role: 'tool_call', name: c.name, args: c.args });
      }
      if (!r.observation) return { done: false, toolCalls: r.toolCalls }; // the turn budget: the rollout ends it at its limit
      const observation = r.observation.text;
      const name = r.toolCalls.map((c) => c.name).join(', ') || 'format';
      const errors = [...parsed.errors, ...r.toolCalls.filter((c) => c.error).map((c) => `${c.name}: ${c.error}`)];
      const error = errors.length ? errors.join('; ') : undefined;
      emit({ type: 'observation', name, content: observation, error });
      transcript.push({ role: 'tool', name, content: observation, error });
      return { done: false, observation: r.observation, toolCalls: r.toolCalls };
    },
    outcome: async () => ({ reward: 0, components: {} }),
  };
  return { backend, env };
}

/** The checkpoint a chat ran and the corpus its search tool read (a world seed or a dataset), as the result reports them. */
function chatSource(ck: ReturnType<Playground['resolve']>, corpus?: ChatEnvironment['corpus']): Pick<ChatResult, 'checkpoint' | 'world' | 'dataset'> {
  const read = corpus ?? (ck.settings.dataset ? { dataset: ck.settings.dataset } : { world: ck.settings.world });
  return { checkpoint: { id: ck.id, path: ck.path, step: ck.step, runId: ck.runId }, ...read };
}
