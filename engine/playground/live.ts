/**
 * A live rollout you can pause: one episode of a run's task with a checkpoint, one step at a time.
 * It pauses before each model turn and after each tool call; at every position of a model turn
 * the next token's top-k alternatives (with probabilities) are shown; the user samples one token,
 * forces a token of their choice, finishes the turn, edits a tool's result before the model sees
 * it, or continues to the end. The model runs without a cache (the whole sequence each token:
 * tiny models, one episode), sampling with sampleToken (engine/rollout/sampling.ts) as the engine
 * does. The environment is the run's (engine/replay/replay.ts openRunEnvironment: its tools, its
 * reward). The finished episode is stored in the checkpoint's run at step −1 ("playground"), like
 * any other trajectory, so it can be replayed and forked.
 */
import { randomUUID } from 'node:crypto';
import type { Store, TurnRecord } from '../store/store';
import type { EpisodeEnv, TokenizerPort } from '../rollout/ports';
import { outcomeTaskFields, type ToolCall } from '../rollout/types';
import { Rng } from '../base/rng';
import { sampleToken } from '../rollout/sampling';
import { resolveCheckpoint } from '../run/checkpoint';
import { findTask, openRunEnvironment, runConfig } from '../run/stored';

/** Step the playground's stored episodes live in. */
export const LIVE_STEP = -1;

export type LivePhase = 'model' | 'tool' | 'done';

export interface LiveTurn {
  role: 'env' | 'model' | 'tool';
  text: string;
  ids: number[];
  tokens: string[];
  logprob: number[];
  entropy: number[];
  /** Positions (in this turn) of tokens the user forced. */
  forced: number[];
  toolCalls?: ToolCall[];
  edited?: boolean;
}

export interface LiveState {
  sessionId: string;
  phase: LivePhase;
  checkpoint: { id: string; step?: number; runId?: string };
  task: string;
  temperature: number;
  turns: LiveTurn[];
  /** phase model: the next token's most likely alternatives. */
  next?: { id: number; token: string; prob: number; logprob: number }[];
  /** phase tool: what the tools returned, before the model sees it (editable). */
  pending?: { text: string; calls: ToolCall[] };
  /** phase done: the reward, the answer, the task's gold answers, why it ended, the stored trajectory. */
  result?: { reward: number; answer?: string; golds?: string[]; truncated: boolean; reason: string; trajectoryId: string };
}

interface Session {
  state: LiveState;
  env: EpisodeEnv;
  tok: TokenizerPort;
  model: InstanceType<typeof import('../model/runtime').PolicyModel>;
  rng: Rng;
  k: number;
  stop: { strings: string[]; tokenIds: Set<number> };
  limits: { maxNewTokens: number; maxTurns: number; maxTotalLength: number };
  runId: string;
  pendingIds: number[] | null;
  /** The task's metadata (gold answers, hops, question), stored with the outcome as a training step's are. */
  meta?: Record<string, unknown>;
  close(): Promise<void>;
}

/** The session's phase, read afresh (actions change it). */
const phaseOf = (s: Session): LivePhase => s.state.phase;

export class LiveRollouts {
  private sessions = new Map<string, Session>();
  constructor(
    private readonly store: () => Store,
    private readonly home: string,
  ) {}

  async start(p: { checkpoint: string; task?: string; k?: number; temperature?: number; seed?: number }): Promise<LiveState> {
    const store = this.store();
    const ck = resolveCheckpoint(store, p.checkpoint);
    if (!ck.runId)
      throw new Error(`checkpoint: "${p.checkpoint}" is a model folder without a run; a live rollout needs a run's checkpoint (its task and tools)`);
    const loaded = runConfig(store, ck.runId, this.home);
    const { cfg } = loaded;
    const envs = await openRunEnvironment(loaded);
    const { PolicyModel } = await import('../model/runtime');
    const { eosTokenIds } = await import('../rollout/model-backend');
    try {
      const kit = envs.kit;
      const task = p.task ? findTask(kit, p.task) : (kit.evalTasks[0] ?? kit.trainTasks[0]);
      if (!task) throw new Error(`run ${ck.runId}: its task has no questions`);
      const model = PolicyModel.load(ck.path, { threads: 1 });
      const env = task.createEnv();
      const prompt = await env.prompt();
      const tok = kit.tokenizer;
      const temperature = p.temperature ?? 1;
      if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new Error(`temperature: must be a finite number ≥ 0 (got ${p.temperature})`);
      const s: Session = {
        state: {
          sessionId: randomUUID(),
          phase: 'model',
          checkpoint: { id: ck.id, ...(ck.step !== undefined ? { step: ck.step } : {}), runId: ck.runId },
          task: task.id,
          temperature,
          turns: [
            {
              role: 'env',
              text: prompt.text ?? tok.decode(prompt.ids),
              ids: prompt.ids,
              tokens: prompt.ids.map((i) => tok.decode([i])),
              logprob: [],
              entropy: [],
              forced: [],
            },
          ],
        },
        env,
        tok,
        model,
        rng: new Rng(p.seed ?? Math.floor(Math.random() * 2 ** 31)),
        k: Math.max(1, Math.min(p.k ?? 8, 50)),
        stop: { strings: kit.stop.strings, tokenIds: new Set([...kit.stop.tokenIds, ...eosTokenIds(model.config)]) },
        limits: {
          maxNewTokens: cfg.rollout.max_new_tokens,
          maxTurns: cfg.rollout.max_turns,
          maxTotalLength: Math.min(cfg.rollout.max_total_length, model.config.maxPositionEmbeddings),
        },
        runId: ck.runId,
        pendingIds: null,
        ...(task.meta ? { meta: task.meta } : {}),
        close: async () => {
          await model.dispose();
          await envs.close();
        },
      };
      this.sessions.set(s.state.sessionId, s);
      await this.beginModelTurn(s);
      return s.state;
    } catch (e) {
      await envs.close();
      throw e;
    }
  }

  private session(id: string): Session {
    const s = this.sessions.get(id);
    if (!s) throw new Error(`sessionId: no live rollout "${id}" (it ended, or the engine restarted)`);
    return s;
  }

  private ids(s: Session): number[] {
    return s.state.turns.flatMap((u) => u.ids);
  }

  /** Next-token logits at the end of the sequence (the whole sequence through the model: no cache). */
  private async logits(s: Session): Promise<Float32Array> {
    const [l] = await s.model.lastLogits([this.ids(s)]);
    return l!;
  }

  private async topk(s: Session): Promise<void> {
    const l = await this.logits(s);
    const inv = s.state.temperature > 0 ? 1 / s.state.temperature : 1;
    let max = -Infinity;
    for (let i = 0; i < l.length; i++) max = Math.max(max, l[i]! * inv);
    let z = 0;
    for (let i = 0; i < l.length; i++) z += Math.exp(l[i]! * inv - max);
    const logZ = max + Math.log(z);
    const order = Array.from(l.keys())
      .sort((a, b) => l[b]! - l[a]!)
      .slice(0, s.k);
    s.state.next = order.map((id) => ({ id, token: s.tok.decode([id]), logprob: l[id]! * inv - logZ, prob: Math.exp(l[id]! * inv - logZ) }));
  }

  private async beginModelTurn(s: Session): Promise<void> {
    s.state.phase = 'model';
    s.state.turns.push({ role: 'model', text: '', ids: [], tokens: [], logprob: [], entropy: [], forced: [] });
    await this.topk(s);
  }

  private current(s: Session): LiveTurn {
    const u = s.state.turns[s.state.turns.length - 1]!;
    if (s.state.phase !== 'model' || u.role !== 'model') throw new Error(`action: the episode is not in a model turn (phase ${s.state.phase})`);
    return u;
  }

  /** Append one token (sampled, or forced); returns why the turn ended, if it did. */
  private async append(s: Session, forced?: number): Promise<string | null> {
    const u = this.current(s);
    const l = await this.logits(s);
    let id: number;
    let logprob: number;
    let entropy: number;
    if (forced === undefined) {
      const t = sampleToken(l, { temperature: s.state.temperature }, s.rng);
      ({ id, logprob, entropy } = t);
    } else {
      if (!Number.isInteger(forced) || forced < 0 || forced >= l.length) throw new Error(`tokenId: ${forced} is not in the vocabulary (0..${l.length - 1})`);
      // The forced token's logprob and the distribution's entropy under the model (temperature 1).
      let max = -Infinity;
      for (let i = 0; i < l.length; i++) max = Math.max(max, l[i]!);
      let z = 0;
      for (let i = 0; i < l.length; i++) z += Math.exp(l[i]! - max);
      const logZ = max + Math.log(z);
      let h = 0;
      for (let i = 0; i < l.length; i++) {
        const lp = l[i]! - logZ;
        h -= Math.exp(lp) * lp;
      }
      id = forced;
      logprob = l[id]! - logZ;
      entropy = h;
      u.forced.push(u.ids.length);
    }
    u.ids.push(id);
    u.tokens.push(s.tok.decode([id]));
    u.logprob.push(logprob);
    u.entropy.push(entropy);
    u.text = s.tok.decode(u.ids);
    if (s.stop.tokenIds.has(id)) return 'stop_token';
    for (const str of s.stop.strings) if (u.text.includes(str)) return 'stop_string';
    if (this.ids(s).length >= s.limits.maxTotalLength) return 'max_total_length';
    if (u.ids.length >= s.limits.maxNewTokens) return 'max_new_tokens';
    return null;
  }

  /** The model's turn ended: run its tool calls and pause with their result (or end the episode). */
  private async endTurn(s: Session, reason: string): Promise<void> {
    const u = this.current(s);
    s.state.next = undefined;
    const r = await s.env.step({ text: u.text, tokenIds: u.ids.slice(), stopReason: reason });
    if (r.toolCalls?.length) u.toolCalls = r.toolCalls;
    const modelTurns = s.state.turns.filter((t) => t.role === 'model').length;
    if (r.done) return this.finish(s, false, 'the episode ended');
    if (reason === 'max_total_length') return this.finish(s, true, 'the sequence reached rollout.max_total_length');
    if (modelTurns >= s.limits.maxTurns) return this.finish(s, true, `the episode reached rollout.max_turns (${s.limits.maxTurns})`);
    const ids = r.observation ? (r.observation.ids ?? s.tok.encode(r.observation.text ?? '')) : [];
    const text = r.observation?.text ?? s.tok.decode(ids);
    s.state.phase = 'tool';
    s.pendingIds = ids;
    s.state.pending = { text, calls: r.toolCalls ?? [] };
  }

  private async finish(s: Session, truncated: boolean, reason: string): Promise<void> {
    const o = await s.env.outcome();
    s.state.phase = 'done';
    s.state.next = undefined;
    s.state.pending = undefined;
    const turns: TurnRecord[] = s.state.turns
      .filter((u) => u.ids.length)
      .map((u) => ({
        role: u.role,
        text: u.text,
        tokenIds: u.ids,
        tokens: u.tokens,
        logprob: u.role === 'model' ? u.logprob : u.ids.map(() => 0),
        entropy: u.role === 'model' ? u.entropy : u.ids.map(() => 0),
        lossMask: u.ids.map(() => (u.role === 'model' ? 1 : 0)),
        toolCalls: u.toolCalls ?? [],
      }));
    const calls = turns.flatMap((u) => (u.toolCalls ?? []) as { error?: string }[]);
    const store = this.store();
    const prior = store.searchTrajectories({ runId: s.runId, step: LIVE_STEP }).length;
    const id = store.writeTrajectory(s.runId, {
      step: LIVE_STEP,
      group: prior,
      sample: 0,
      task: s.state.task,
      prompt: s.state.turns[0]!.text,
      reward: o.reward,
      outcome: {
        answer: o.answer,
        components: o.components,
        exactMatch: o.exactMatch,
        formatOk: o.formatOk,
        toolCalls: calls.length,
        toolErrors: calls.filter((c) => c.error).length,
        truncated,
        // The task's gold answers and metadata, as engine/run/store-sink.ts stores a training step's.
        ...outcomeTaskFields(s.meta),
        // How the user steered it: forced tokens (turn, position) and edited observations (turn).
        live: {
          checkpoint: s.state.checkpoint.id,
          temperature: s.state.temperature,
          forced: s.state.turns.flatMap((u, t) => u.forced.map((i) => ({ turn: t, token: i }))),
          edited: s.state.turns.flatMap((u, t) => (u.edited ? [t] : [])),
        },
      },
      turns,
    });
    const golds = Array.isArray(s.meta?.answers) ? s.meta.answers.map(String) : undefined;
    s.state.result = {
      reward: o.reward,
      ...(o.answer !== undefined ? { answer: o.answer } : {}),
      ...(golds ? { golds } : {}),
      truncated,
      reason,
      trajectoryId: String(id),
    };
    await s.close();
  }

  /**
   * One action: `token` samples the next token, `force` appends `tokenId` (or the first token of
   * `text`), `turn` samples to the end of the model turn, `observation` hands the tools' result to
   * the model (`text`: edited), `finish` runs to the end (observations as the tools returned them).
   */
  async step(p: { sessionId: string; action: 'token' | 'force' | 'turn' | 'observation' | 'finish'; tokenId?: number; text?: string }): Promise<LiveState> {
    const s = this.session(p.sessionId);
    if (s.state.phase === 'done') throw new Error('action: the episode has ended (start another)');
    const afterToken = async (why: string | null) => {
      if (why) await this.endTurn(s, why);
      else await this.topk(s);
    };
    switch (p.action) {
      case 'token':
        await afterToken(await this.append(s));
        break;
      case 'force': {
        let id = p.tokenId;
        if (id === undefined) {
          const ids = p.text !== undefined ? s.tok.encode(p.text) : [];
          if (ids.length !== 1) throw new Error(`text: "${p.text ?? ''}" is ${ids.length} tokens; force one token (or give tokenId)`);
          id = ids[0]!;
        }
        await afterToken(await this.append(s, id));
        break;
      }
      case 'turn': {
        let why: string | null = null;
        while (!why) why = await this.append(s);
        await this.endTurn(s, why);
        break;
      }
      case 'observation':
        await this.observe(s, p.text);
        break;
      case 'finish':
        while (phaseOf(s) !== 'done') {
          if (phaseOf(s) === 'tool') await this.observe(s);
          else {
            let why: string | null = null;
            while (!why) why = await this.append(s);
            await this.endTurn(s, why);
          }
        }
        break;
    }
    if (phaseOf(s) === 'done') this.sessions.delete(p.sessionId);
    return s.state;
  }

  /** Hand the pending tool result to the model (edited: the text replaces what the tools returned) and pause before its next turn. */
  private async observe(s: Session, edited?: string): Promise<void> {
    if (s.state.phase !== 'tool' || !s.state.pending || !s.pendingIds) throw new Error(`action: no tool result is waiting (phase ${s.state.phase})`);
    const ids = edited === undefined ? s.pendingIds : s.tok.encode(edited);
    if (ids.length)
      s.state.turns.push({
        role: 'tool',
        text: s.tok.decode(ids),
        ids,
        tokens: ids.map((i) => s.tok.decode([i])),
        logprob: [],
        entropy: [],
        forced: [],
        edited: edited !== undefined,
      });
    s.state.pending = undefined;
    s.pendingIds = null;
    if (this.ids(s).length >= s.limits.maxTotalLength - 1) return this.finish(s, true, 'the sequence reached rollout.max_total_length');
    await this.beginModelTurn(s);
  }

  async close(sessionId?: string): Promise<void> {
    for (const [id, s] of this.sessions)
      if (sessionId === undefined || id === sessionId) {
        this.sessions.delete(id);
        await s.close();
      }
  }
}
