/**
 * What-if replay (engine side): fork a stored trajectory at a turn (or a token of a model turn),
 * append an edit, and sample the rest N times with a checkpoint of the run (or any model folder)
 * in the same environment as the run that stored it: the run's config opens its task kit
 * (engine/tasks/registry.ts, with the user's sandboxed tools and reward and its MCP servers), the
 * task is found by its id, and its environment replays the kept model turns (tools run again, so
 * the environment's state matches) before the model samples; the reward scores each new episode.
 * The prefix the model sees is the parent's stored ids exactly, then the edit's ids (./fork.ts).
 * The new trajectories are stored in the parent's run with the fork (parent id, turn, token,
 * edit, checkpoint, sampling) and the per-token logprob of the prefix under the checkpoint.
 */
import type { Store, TrajectoryRecord, TurnRecord, ForkRecord } from '../store/store';
import type { EpisodeEnv, RolloutTask, TokenizerPort } from '../rollout/ports';
import type { Trajectory } from '../rollout/types';
import { planFork, type ForkPlan, type StoredTurnLike } from './fork';
import { detectDrift, recordedDrift, recordedDriftOf, type DriftReport } from './drift';
import { resolveCheckpoint } from '../run/checkpoint';
import { findTask, openRunEnvironment, runConfig } from '../run/stored';

export interface ForkParams {
  trajectoryId: string;
  /** Stored turn index (0 = the prompt). */
  turn: number;
  token?: number;
  observation?: string;
  text?: string;
  /** A checkpoint id of the workspace or a model folder. */
  checkpoint: string;
  n: number;
  temperature?: number;
  seed?: number;
}

export interface ForkResult {
  parent: string;
  fork: Omit<ForkRecord, 'sampling' | 'prefixLogprob'> & { sampling: Omit<ForkRecord['sampling'], 'index'> };
  /** The prefix as the model saw it: ids, decoded tokens, the parent's stored logprob (null where the parent has none) and the checkpoint's. */
  prefix: { ids: number[]; tokens: string[]; original: (number | null)[]; checkpoint: number[] };
  children: { id: string; reward: number; answer?: string; truncated: boolean; tokenIds: number[]; forkAt: number }[];
}

type StoredTrajectory = ReturnType<Store['getTrajectory']>;

/**
 * The task's environment fast-forwarded to the fork: prompt() replays the kept model turns into a
 * fresh environment (tools run again) and gives the fork's prefix as the prompt; the first step of
 * a continued model turn carries the kept tokens and the edit with it.
 */
export function forkedTask(task: RolloutTask, plan: ForkPlan, tok: TokenizerPort): RolloutTask {
  return {
    id: task.id,
    ...(task.meta ? { meta: task.meta } : {}),
    createEnv(): EpisodeEnv {
      const env = task.createEnv();
      let first = true;
      return {
        async prompt() {
          await env.prompt();
          for (const [i, u] of plan.modelTurns.entries()) {
            const r = await env.step({ text: u.text, tokenIds: u.tokenIds.slice(), stopReason: 'stop_string' });
            if (r.done) throw new Error(`the environment ended the episode at kept model turn ${i + 1} while replaying the parent's turns`);
          }
          return { ids: plan.prefixIds.slice(), text: tok.decode(plan.prefixIds) };
        },
        async step(turn) {
          if (first && plan.partial) {
            first = false;
            const ids = [...plan.partial.ids, ...(plan.edit?.ids ?? []), ...turn.tokenIds];
            return env.step({ text: tok.decode(ids), tokenIds: ids, stopReason: turn.stopReason });
          }
          first = false;
          return env.step(turn);
        },
        outcome: () => env.outcome(),
      };
    },
  };
}

const turnLike = (u: StoredTrajectory['turnsData'][number]): StoredTurnLike => u;

/** A kept stored turn as the child stores it (its ids, tokens and sampling values as they were). */
function keptTurn(u: StoredTurnLike): TurnRecord {
  return {
    role: u.role,
    text: u.text,
    tokenIds: u.tokenIds,
    tokens: u.tokens,
    ...(u.logprob ? { logprob: u.logprob } : {}),
    ...(u.entropy ? { entropy: u.entropy } : {}),
    ...(u.lossMask ? { lossMask: u.lossMask } : {}),
    toolCalls: u.toolCalls,
    stepReward: u.stepReward,
  };
}

/** The child's turns: the kept ones, the edit (its own turn, or inside the continued model turn), then what the model sampled. */
export function childTurns(plan: ForkPlan, t: Trajectory, tok: TokenizerPort): TurnRecord[] {
  const dec = (ids: number[]) => ids.map((id) => tok.decode([id]));
  const out: TurnRecord[] = plan.keep.map(keptTurn);
  let rest = t.turns;
  if (plan.partial) {
    const u = t.turns[0];
    const editIds = plan.edit?.ids ?? [];
    const ids = [...plan.partial.ids, ...editIds, ...(u?.tokenIds ?? [])];
    const zeros = (n: number) => new Array<number>(n).fill(0);
    out.push({
      role: 'model',
      text: tok.decode(ids),
      tokenIds: ids,
      tokens: [...plan.partial.tokens, ...dec(editIds), ...dec(u?.tokenIds ?? [])],
      // The edit was written, not sampled: loss mask 0, no logprob.
      logprob: [...plan.partial.logprob, ...editIds.map(() => NaN), ...(u?.logprobs ?? [])],
      entropy: [...plan.partial.entropy, ...editIds.map(() => NaN), ...(u?.entropy ?? [])],
      lossMask: [...plan.partial.ids.map(() => 1), ...zeros(editIds.length), ...(u?.lossMask ?? [])],
      toolCalls: u?.toolCalls ?? [],
      stepReward: u?.stepReward ?? null,
    });
    rest = t.turns.slice(1);
  } else if (plan.edit) {
    const ids = plan.edit.ids;
    out.push({
      role: 'tool',
      text: tok.decode(ids),
      tokenIds: ids,
      tokens: dec(ids),
      logprob: ids.map(() => 0),
      entropy: ids.map(() => 0),
      lossMask: ids.map(() => 0),
      toolCalls: [],
      stepReward: null,
    });
  }
  for (const u of rest)
    out.push({
      role: u.role,
      text: u.text,
      tokenIds: u.tokenIds,
      tokens: dec(u.tokenIds),
      logprob: u.logprobs,
      entropy: u.entropy,
      lossMask: u.lossMask,
      toolCalls: u.toolCalls ?? [],
      stepReward: u.stepReward ?? null,
    });
  return out;
}

export interface ForkProgress {
  trajectoryId: string;
  done: number;
  total: number;
  phase: 'loading' | 'sampling' | 'scoring' | 'done';
}

/** Fork a stored trajectory and store the continuations; `onProgress` as the work goes. */
export async function replayFork(store: Store, home: string, p: ForkParams, onProgress?: (e: ForkProgress) => void): Promise<ForkResult> {
  if (!Number.isInteger(p.n) || p.n < 1 || p.n > 64) throw new Error(`n: give 1..64 continuations (got ${p.n})`);
  const temperature = p.temperature ?? 1;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new Error(`temperature: must be a finite number ≥ 0 (got ${p.temperature})`);
  const parent = store.getTrajectory(p.trajectoryId);
  if (!parent.full || parent.turnsData.length === 0)
    throw new Error(`trajectory ${p.trajectoryId}: only its summary was stored (the run's logging.full_trajectories_every), so it has no tokens to fork`);
  const progress = (phase: ForkProgress['phase'], done = 0) => onProgress?.({ trajectoryId: p.trajectoryId, done, total: p.n, phase });
  progress('loading');
  const loaded = runConfig(store, parent.runId, home);
  const { cfg } = loaded;
  const ck = resolveCheckpoint(store, p.checkpoint);
  const envs = await openRunEnvironment(loaded);
  const { PolicyModel } = await import('../model/runtime');
  const { policyDecodeBackend, eosTokenIds } = await import('../rollout/model-backend');
  const { rollout } = await import('../rollout/engine');
  let model: InstanceType<typeof PolicyModel> | undefined;
  try {
    const { kit } = envs;
    const tok = kit.tokenizer;
    const plan = planFork(parent.turnsData.map(turnLike), { turn: p.turn, token: p.token, observation: p.observation, text: p.text }, (s) => tok.encode(s));
    const task = findTask(kit, parent.task);
    model = PolicyModel.load(ck.path, { threads: 1 });
    const vocab = model.config.vocabSize;
    const bad = plan.prefixIds.find((id) => id < 0 || id >= vocab);
    if (bad !== undefined)
      throw new Error(`checkpoint ${ck.id}: token id ${bad} of the trajectory is outside its vocabulary (${vocab}); pick a checkpoint of the same tokenizer`);
    const maxLen = Math.min(cfg.rollout.max_total_length, model.config.maxPositionEmbeddings);
    const maxTurns = cfg.rollout.max_turns - plan.modelTurns.length;
    if (maxTurns < 1)
      throw new Error(
        `turn: the fork keeps ${plan.modelTurns.length} model turns, the run's rollout.max_turns is ${cfg.rollout.max_turns}: nothing is left to sample`,
      );
    const seed = p.seed ?? Math.floor(Math.random() * 2 ** 31);
    const backend = policyDecodeBackend(model, { maxBatch: Math.min(p.n, 16), maxLength: maxLen });
    progress('sampling');
    let done = 0;
    const result = await rollout(backend, {
      tasks: [forkedTask(task, plan, tok)],
      n: p.n,
      seed,
      sampling: { temperature },
      tokenizer: tok,
      limits: { maxNewTokens: cfg.rollout.max_new_tokens, maxTurns, maxTotalLength: maxLen },
      stop: { strings: kit.stop.strings, tokenIds: [...new Set([...kit.stop.tokenIds, ...eosTokenIds(model.config)])] },
      onTrajectory: () => progress('sampling', ++done),
    });
    await backend.close?.();
    progress('scoring', done);
    // The prefix (and the edit) scored by the checkpoint: logprob of each token given the ones before,
    // under the policy the continuations sample from (softmax(logits / temperature); 1 when greedy).
    const scored = await model.score([plan.prefixIds], { temperature: temperature === 0 ? 1 : temperature });
    const lp = [NaN, ...Array.from(scored.logprobs.subarray(0, plan.prefixIds.length - 1))];
    const original = [
      ...plan.keep.flatMap((u) => u.tokenIds.map((_, i) => (u.lossMask && u.lossMask[i] === 0 ? null : (u.logprob?.[i] ?? null)))),
      ...(plan.partial?.logprob ?? []),
    ];
    const prefix = {
      ids: plan.prefixIds,
      tokens: plan.prefixIds.map((id) => tok.decode([id])),
      original: [...original, ...(plan.edit?.ids.map(() => null) ?? [])],
      checkpoint: lp,
    };
    const base: Omit<ForkRecord, 'sampling' | 'prefixLogprob'> = {
      parent: parent.id,
      turn: plan.turn,
      token: plan.token,
      edit: plan.edit ? { kind: plan.edit.kind, text: plan.edit.text, ids: plan.edit.ids, replaced: plan.edit.replaced } : null,
      checkpoint: { id: ck.id, path: ck.path, ...(ck.step !== undefined ? { step: ck.step } : {}), ...(ck.runId ? { runId: ck.runId } : {}) },
      prefixTokens: plan.sharedTokens,
    };
    const children: ForkResult['children'] = [];
    store.db.transaction(() => {
      for (const t of result.trajectories) {
        const turns = childTurns(plan, t, tok);
        const calls = turns.flatMap((u) => (u.toolCalls ?? []) as { error?: string }[]);
        const meta = t.meta ?? {};
        const rec: TrajectoryRecord = {
          step: parent.step,
          group: parent.group,
          sample: t.sample,
          task: parent.task,
          prompt: parent.prompt,
          reward: t.outcome.reward,
          outcome: {
            answer: t.outcome.answer,
            components: t.outcome.components,
            exactMatch: t.outcome.exactMatch,
            formatOk: t.outcome.formatOk,
            toolCalls: calls.length,
            toolErrors: calls.filter((c) => c.error).length,
            truncated: t.truncated,
            ...(Array.isArray(meta.answers) ? { golds: meta.answers } : {}),
            ...(typeof meta.question === 'string' ? { question: meta.question } : {}),
            ...(t.meta ? { meta: t.meta } : {}),
          },
          timings: t.timings as unknown as Record<string, number>,
          turns,
          fork: { ...base, sampling: { temperature, n: p.n, seed, index: t.sample }, prefixLogprob: lp },
        };
        const id = store.writeTrajectory(parent.runId, rec);
        children.push({
          id: String(id),
          reward: t.outcome.reward,
          ...(t.outcome.answer !== undefined ? { answer: t.outcome.answer } : {}),
          truncated: t.truncated,
          tokenIds: turns.flatMap((u) => Array.from(u.tokenIds ?? [])),
          forkAt: plan.prefixIds.length,
        });
      }
    })();
    progress('done', done);
    return { parent: parent.id, fork: { ...base, sampling: { temperature, n: p.n, seed } }, prefix, children };
  } finally {
    await model?.dispose();
    await envs.close();
  }
}

/** The encoder that re-renders a run's trajectories: its task's tokenizer (the one its rollouts decoded with). */
async function runEncoder(store: Store, runId: string, home: string): Promise<(text: string) => number[]> {
  const { cfg } = runConfig(store, runId, home);
  const { taskTokenizer } = await import('../tasks/registry');
  const tok = taskTokenizer(cfg);
  return (text) => tok.encode(text);
}

export interface DriftSummary {
  runId: string;
  /** Stored trajectories with tokens that were checked, and those with at least one drifted turn. */
  checked: number;
  drifted: number;
  ids: string[];
}

/**
 * A stored trajectory's drift: its turns re-rendered by the run's tokenizer, and the drift the
 * OpenAI-compatible endpoint recorded while an external agent's calls made it (outcome.meta.drift).
 */
function storedDrift(t: ReturnType<Store['getTrajectory']>, encode: (text: string) => number[]): DriftReport {
  const r = detectDrift(t.turnsData, (text) => encode(text));
  const meta = (t.outcomeData as { meta?: unknown } | undefined)?.meta;
  const rec = recordedDrift(t.turnsData, recordedDriftOf(meta));
  if (rec.length === 0) return r;
  return { drifted: true, checked: r.checked, turns: [...r.turns, ...rec].sort((a, b) => a.turn - b.turn) };
}

/** Drift of one stored trajectory (turn by turn), or the count over a run's stored trajectories. */
export async function trajectoryDrift(store: Store, home: string, trajectoryId: string) {
  const t = store.getTrajectory(trajectoryId);
  const encode = await runEncoder(store, t.runId, home);
  return storedDrift(t, encode);
}

export async function runDrift(store: Store, home: string, runId: string): Promise<DriftSummary> {
  const encode = await runEncoder(store, runId, home);
  const ids: string[] = [];
  let checked = 0;
  for (const s of [...store.searchTrajectories({ runId, limit: 1e9 }), ...store.forks({ runId })]) {
    if (!s.full) continue;
    const r = storedDrift(store.getTrajectory(s.id), encode);
    if (r.checked === 0) continue;
    checked++;
    if (r.drifted) ids.push(s.id);
  }
  return { runId, checked, drifted: ids.length, ids };
}

/** One loaded model for top-k look-ups (a token cursor asks many times in a row). */
let topkModel: { path: string; model: InstanceType<typeof import('../model/runtime').PolicyModel> } | null = null;

export async function closeTopkModel(): Promise<void> {
  await topkModel?.model.dispose();
  topkModel = null;
}

/**
 * The checkpoint that sampled a trajectory of step s: the run's checkpoint at step s − 1 (the
 * weights after the updates before s), else the closest earlier one, else the earliest stored.
 */
export function samplingCheckpoint(store: Store, runId: string, step: number): { id: string; step: number; exact: boolean } | null {
  const cks = store.checkpoints(runId);
  if (!cks.length) return null;
  const before = cks.filter((c) => c.step <= step - 1);
  const ck = before.length ? before[before.length - 1]! : cks[0]!;
  return { id: ck.id, step: ck.step, exact: ck.step === step - 1 };
}

export interface TopK {
  checkpoint: { id: string; step?: number; exact: boolean };
  /** The token at the position and its probability under the checkpoint. */
  sampled: { id: number; token: string; prob: number; logprob: number; rank: number };
  alternatives: { id: number; token: string; prob: number; logprob: number }[];
}

/** The top-k next tokens at a position of a stored trajectory (turn, token) under a checkpoint (default: the one that sampled it). */
export async function topkAt(
  store: Store,
  home: string,
  p: { trajectoryId: string; turn: number; token: number; k?: number; checkpoint?: string },
): Promise<TopK> {
  const t = store.getTrajectory(p.trajectoryId);
  const turn = t.turnsData[p.turn];
  if (!turn) throw new Error(`turn: trajectory ${p.trajectoryId} has turns 0..${t.turnsData.length - 1}`);
  if (!Number.isInteger(p.token) || p.token < 0 || p.token >= turn.tokenIds.length)
    throw new Error(`token: turn ${p.turn} has tokens 0..${turn.tokenIds.length - 1} (got ${p.token})`);
  const prefix = [...t.turnsData.slice(0, p.turn).flatMap((u) => u.tokenIds), ...turn.tokenIds.slice(0, p.token)];
  if (prefix.length === 0) throw new Error('token: the first token of the prompt has no context to predict it from');
  const auto = p.checkpoint ? null : samplingCheckpoint(store, t.runId, t.step);
  if (!p.checkpoint && !auto) throw new Error(`run ${t.runId} has no stored checkpoint to compute alternatives with; give checkpoint`);
  const ck = resolveCheckpoint(store, p.checkpoint ?? auto!.id);
  if (topkModel?.path !== ck.path) {
    await closeTopkModel();
    const { PolicyModel } = await import('../model/runtime');
    topkModel = { path: ck.path, model: PolicyModel.load(ck.path, { threads: 1 }) };
  }
  const model = topkModel.model;
  if (prefix.some((id) => id >= model.config.vocabSize)) throw new Error(`checkpoint ${ck.id}: the trajectory's ids are outside its vocabulary`);
  const [logits] = await model.lastLogits([prefix]);
  const l = logits!;
  let max = -Infinity;
  for (let i = 0; i < l.length; i++) max = Math.max(max, l[i]!);
  let z = 0;
  for (let i = 0; i < l.length; i++) z += Math.exp(l[i]! - max);
  const logZ = max + Math.log(z);
  const order = Array.from(l.keys()).sort((a, b) => l[b]! - l[a]!);
  const cfg = (() => {
    try {
      return runConfig(store, t.runId, home).cfg;
    } catch {
      return undefined;
    }
  })();
  const { taskTokenizer } = await import('../tasks/registry');
  const tok = cfg ? taskTokenizer(cfg) : undefined;
  const text = (id: number) => (tok ? tok.decode([id]) : `#${id}`);
  const entry = (id: number) => ({ id, token: text(id), logprob: l[id]! - logZ, prob: Math.exp(l[id]! - logZ) });
  const sampledId = turn.tokenIds[p.token]!;
  return {
    checkpoint: { id: ck.id, ...(ck.step !== undefined ? { step: ck.step } : {}), exact: p.checkpoint ? false : auto!.exact },
    sampled: { ...entry(sampledId), rank: order.indexOf(sampledId) + 1 },
    alternatives: order.slice(0, Math.max(1, Math.min(p.k ?? 10, 50))).map(entry),
  };
}
