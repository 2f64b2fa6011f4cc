/**
 * External agents in training (`environment.agent: { command, concurrency, timeout_ms, env }`).
 * The run serves its policy on an in-process OpenAI-compatible endpoint (./server.ts, on the
 * run's own decode backend); each episode starts the command once with
 *   OPENAI_BASE_URL  the episode's own base URL (http://127.0.0.1:<port>/episodes/<id>/v1),
 *   OPENAI_API_KEY   the run's key (random per run; the endpoint refuses calls without it),
 *   ARBOR_TASK       the task row as JSON ({id, prompt | messages, answers?, meta?}),
 * and the program uses any OpenAI client and its own tools; its last non-empty stdout line is its
 * answer. The episode is the calls made through its URL (./episodes.ts turns them into
 * trajectories); the reward file (or the built-in rewards) receives the episode: the task, every
 * model turn with its tool calls and the results the agent sent back, every call, the answer.
 *
 * Each call samples as the config's rollout block says (temperature, top_p, max_new_tokens per
 * turn, at most max_turns calls), whatever the agent asks, so the recorded logprobs are the
 * policy's. A program that exits non-zero, runs past timeout_ms (its process group is killed) or
 * makes no call gets reward 0, and its stderr goes to the run log; the run goes on. Each process is
 * killed with its group when its episode ends, so nothing an agent started outlives the episode.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mixSeed } from '../base/rng';
import type { EnvTask } from '../env/task';
import { ToolEnv } from '../env/toolenv';
import { normalizeRewardValue, weightedReward, type EpisodeSummary, type TurnTrace } from '../env/rewards';
import type { ExperimentConfig } from '../config/experiment';
import type { DecodeBackend, RolloutTask } from '../rollout/ports';
import type { OutcomeReward, Trajectory } from '../rollout/types';
import type { ChatTokenizer } from './chat';
import { episodeTrajectories, EpisodeRecorder, toolResults, turnToolCalls } from './episodes';
import { agentEnv, AgentWorkers, type AgentRun, type AgentSpec } from './agent-serve';

export type { AgentRun, AgentSpec } from './agent-serve';
import { RequestSource } from './requests';
import { emptySafe, ModelServer, type RecordedChoice } from './server';

/** Most bytes of an agent's stdout / stderr kept (the end of it). */
const KEEP = 64 * 1024;

const tail = (s: string) => (s.length > KEEP ? s.slice(s.length - KEEP) : s);

/** Start the agent command once, wait for it (at most timeout_ms), kill its process group at the end. */
export function runAgentProcess(spec: AgentSpec, vars: Record<string, string>, signal?: AbortSignal): Promise<AgentRun> {
  const env = agentEnv(spec, vars);
  return new Promise<AgentRun>((resolve) => {
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    let settled = false;
    const child = spawn(spec.command[0]!, spec.command.slice(1), {
      cwd: spec.cwd,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: process.platform !== 'win32',
    });
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        if (process.platform !== 'win32') process.kill(-child.pid, 'SIGKILL');
        else child.kill('SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, spec.timeout_ms);
    const onAbort = () => killGroup();
    signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout = tail(stdout + d)));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = tail(stderr + d)));
    const done = (r: Omit<AgentRun, 'stdout' | 'stderr' | 'timedOut' | 'answer'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      // Whatever the program started in its group goes with it.
      killGroup();
      const answer = stdout
        .split(/\r?\n/)
        .map((l) => l.trim())
        .filter(Boolean)
        .pop();
      resolve({ ...r, stdout, stderr, timedOut, ...(answer !== undefined ? { answer } : {}) });
    };
    child.on('error', (e) => done({ exitCode: null, signal: null, error: `cannot start ${JSON.stringify(spec.command[0])}: ${e.message}` }));
    child.on('close', (code, sig) => done({ exitCode: code, signal: sig }));
  });
}

export interface AgentRolloutOptions {
  cfg: ExperimentConfig;
  spec: AgentSpec;
  backend: DecodeBackend;
  tokenizer: ChatTokenizer;
  stopTokenIds: number[];
  /** The format's stop strings (they end a turn and stay in it). */
  endStrings: string[];
  /** Run-log lines (agent failures with their stderr). */
  log(line: string): void;
}

export interface AgentEpisodeResult {
  trajectories: Trajectory[];
  outcome: OutcomeReward;
  run: AgentRun;
  calls: number;
}

/** The run's endpoint and the episodes it serves. */
export class AgentRollouts {
  private server: ModelServer;
  private key = `sk-arbor-${randomBytes(18).toString('hex')}`;
  private requests: RequestSource;
  private opened = false;
  private next = 0;
  private readonly tok: ChatTokenizer;
  private totals = { wallMs: 0, decodeMs: 0, ticks: 0, rows: 0, episodes: 0, failed: 0, calls: 0 };
  /** mode serve: the long-lived programs episodes are handed to. */
  private workers?: AgentWorkers;

  constructor(private readonly o: AgentRolloutOptions) {
    this.tok = emptySafe(o.tokenizer);
    this.requests = new RequestSource(o.backend, (ids) => this.tok.decode(ids));
    this.server = new ModelServer({ modelId: 'policy', tokenizer: this.tok, requests: this.requests, stopTokenIds: o.stopTokenIds, apiKey: this.key });
    if (o.spec.mode === 'serve') this.workers = new AgentWorkers(o.spec, this.key, o.log);
  }

  private async ensureOpen(): Promise<void> {
    if (this.opened) return;
    await this.server.listen();
    this.opened = true;
  }

  /**
   * Since the last take: time/agent_s (the episodes' wall time while the model was not decoding:
   * the agent program, its tools, HTTP and the endpoint's per-call work), time/decode_s (inside
   * backend calls), agent/calls (model calls), agent/decode_batch (mean rows per backend call),
   * agent/failed (episodes that failed).
   */
  takeMetrics(): Record<string, number> {
    const t = this.totals;
    this.totals = { wallMs: 0, decodeMs: 0, ticks: 0, rows: 0, episodes: 0, failed: 0, calls: 0 };
    if (t.episodes === 0) return {};
    return {
      'time/agent_s': Math.max(0, t.wallMs - t.decodeMs) / 1000,
      'time/decode_s': t.decodeMs / 1000,
      'agent/calls': t.calls,
      'agent/decode_batch': t.rows / Math.max(1, t.ticks),
      'agent/failed': t.failed,
    };
  }

  async close(): Promise<void> {
    await this.workers?.close();
    if (!this.opened) return;
    await this.server.close();
    await this.requests.close();
  }

  /**
   * Episodes of every task × n samples (group = groupOffset + task index), at most
   * `spec.concurrency` at once; returns each group's trajectories (samples numbered in order).
   */
  async run(
    tasks: RolloutTask[],
    n: number,
    seed: number,
    sampling: { temperature: number; topP: number },
    signal?: AbortSignal,
  ): Promise<AgentEpisodeResult[][]> {
    await this.ensureOpen();
    const jobs: { task: RolloutTask; group: number; sample: number }[] = [];
    tasks.forEach((task, group) => {
      for (let sample = 0; sample < n; sample++) jobs.push({ task, group, sample });
    });
    const out: AgentEpisodeResult[][] = tasks.map(() => []);
    let k = 0;
    const worker = async () => {
      while (k < jobs.length) {
        const j = jobs[k++]!;
        if (signal?.aborted) throw new Error('rollout aborted');
        out[j.group]![j.sample] = await this.episode(j.task, j.group, j.sample, mixSeed(seed, j.group, j.sample), sampling, signal);
      }
    };
    const before = { ...this.requests.stats };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: Math.min(this.o.spec.concurrency, jobs.length) }, worker));
    const st = this.requests.stats;
    const wallMs = performance.now() - t0;
    const decodeMs = st.busyMs - before.busyMs;
    const calls = st.calls - before.calls;
    const t = this.totals;
    t.wallMs += wallMs;
    t.decodeMs += decodeMs;
    t.ticks += calls;
    t.rows += st.rowSum - before.rowSum;
    t.episodes += jobs.length;
    t.failed += out.flat().filter((e) => e.outcome.components.agent_failed).length;
    t.calls += out.flat().reduce((a, e) => a + e.calls, 0);
    // Number each group's trajectories 0.. in episode order.
    for (const g of out) {
      let s = 0;
      for (const e of g) for (const t of e.trajectories) t.sample = s++;
    }
    return out;
  }

  private async episode(
    task: RolloutTask,
    group: number,
    sample: number,
    seed: number,
    sampling: { temperature: number; topP: number },
    signal?: AbortSignal,
  ): Promise<AgentEpisodeResult> {
    const env = task.createEnv();
    if (!(env instanceof ToolEnv)) throw new Error(`environment.agent: task ${task.id}'s episodes are not ToolEnv episodes; the agent needs a task row`);
    const row = env.opts.task;
    const id = `${(this.next++).toString(36)}-${randomBytes(6).toString('hex')}`;
    const rec = new EpisodeRecorder();
    const { cfg } = this.o;
    let calls = 0;
    let seedCalls = 0;
    const url = this.server.openEpisode(id, {
      record: (c) => rec.record(c),
      sampling: { ...sampling, maxTokens: cfg.rollout.max_new_tokens, endStrings: this.o.endStrings, nextSeed: () => mixSeed(seed, seedCalls++) },
      admit: () => (++calls > cfg.rollout.max_turns ? `this episode made more than rollout.max_turns = ${cfg.rollout.max_turns} calls` : undefined),
    });
    let run: AgentRun;
    try {
      run = this.workers
        ? await this.workers.run({ id, task: row, baseUrl: url, apiKey: this.key }, signal)
        : await runAgentProcess(this.o.spec, { OPENAI_BASE_URL: url, OPENAI_API_KEY: this.key, ARBOR_TASK: JSON.stringify(row) }, signal);
    } finally {
      this.server.closeEpisode(id);
    }
    const failure = run.error
      ? run.error
      : run.timedOut
        ? `ran past environment.agent.timeout_ms = ${this.o.spec.timeout_ms} ms (${this.workers ? 'its base URL closed' : 'killed'})`
        : run.exitCode !== 0
          ? `exited with ${run.exitCode === null ? `signal ${run.signal}` : `code ${run.exitCode}`}`
          : rec.calls.length === 0
            ? 'made no call to its OPENAI_BASE_URL'
            : undefined;
    const { outcome, steps } = failure ? { outcome: failed(), steps: undefined } : await this.reward(env, row, rec, run);
    if (failure) {
      const err = run.stderr.trim();
      this.o.log(`agent: task ${task.id} sample ${sample}: ${failure}; reward 0${err ? `\n  stderr: ${err.slice(-2000).replace(/\n/g, '\n  ')}` : ''}`);
    }
    const trajectories = episodeTrajectories(rec.calls, {
      taskId: task.id,
      group,
      firstSample: 0,
      seed,
      outcome,
      ...(steps ? { turnStepRewards: steps } : {}),
      decode: (ids) => this.tok.decode(ids),
      meta: { ...(task.meta ?? {}), agent_exit: run.exitCode ?? -1, ...(failure ? { agent_failure: failure } : {}) },
      maxTotalLength: cfg.rollout.max_total_length,
    });
    return { trajectories, outcome, run, calls: rec.calls.length };
  }

  /** The episode's reward: the reward file (or the built-in rewards) over the whole episode. */
  private async reward(
    env: ToolEnv,
    row: EnvTask,
    rec: EpisodeRecorder,
    run: AgentRun,
  ): Promise<{ outcome: OutcomeReward; steps?: Map<RecordedChoice, number> }> {
    const results = toolResults(rec.calls);
    const turns: { choice: RecordedChoice; trace: TurnTrace }[] = [];
    for (const call of rec.calls)
      for (const c of call.choices) {
        const tc = turnToolCalls(c, results);
        turns.push({
          choice: c,
          trace: {
            text: c.text,
            calls: tc.map((t) => ({ name: t.name, args: t.args, result: t.result, success: t.error === undefined, ...(t.error ? { error: t.error } : {}) })),
            errors: c.calls.filter((x) => x.parseError).map((x) => x.parseError!),
          },
        });
      }
    const allCalls = turns.flatMap((t) => t.trace.calls);
    const s: EpisodeSummary = {
      task: row,
      history: turns.map((t) => t.trace),
      answer: run.answer,
      golds: row.answers ?? [],
      turns: turns.map((t) => t.trace.text),
      formatOk: run.answer !== undefined && turns.every((t) => t.trace.errors.length === 0),
      toolCalls: allCalls.length,
      toolErrors: allCalls.filter((c) => !c.success).length,
      retrieved: allCalls.filter((c) => c.success).map((c) => c.result),
      supporting: row.supportingFacts ?? [],
      agent: {
        calls: rec.calls.map((c) => ({
          id: c.id,
          kind: c.kind,
          request: c.request,
          choices: c.choices.map((x) => ({ text: x.text, message: x.message, finish: x.finish })),
        })),
        ...(run.answer !== undefined ? { answer: run.answer } : {}),
        exitCode: run.exitCode,
        timedOut: run.timedOut,
        stderr: run.stderr.slice(-4000),
      },
    };
    const em = s.golds.length ? (weightedReward({ exact_match: 1 }, s).components.exact_match ?? 0) : 0;
    const counts = { tool_calls: s.toolCalls, tool_errors: s.toolErrors, agent_calls: rec.calls.length };
    const o = env.opts;
    if (o.userReward) {
      const u = normalizeRewardValue(await o.userReward(s), o.userRewardName ?? 'reward', s.toolCalls);
      let steps: Map<RecordedChoice, number> | undefined;
      if (u.steps) {
        steps = new Map();
        let k = 0;
        for (const t of turns)
          steps.set(
            t.choice,
            t.trace.calls.reduce((a) => a + (u.steps![k++] ?? 0), 0),
          );
      }
      return {
        outcome: {
          reward: u.reward,
          components: { ...(s.golds.length ? { exact_match: em } : {}), ...u.components, user_reward: u.reward, ...counts },
          exactMatch: em === 1,
          formatOk: s.formatOk,
          ...(s.answer !== undefined ? { answer: s.answer } : {}),
        },
        ...(steps ? { steps } : {}),
      };
    }
    const w = weightedReward(o.rewardWeights ?? { exact_match: 1 }, s, o.customRewards);
    return {
      outcome: {
        reward: w.reward,
        components: { ...w.components, ...counts },
        exactMatch: em === 1,
        formatOk: s.formatOk,
        ...(s.answer !== undefined ? { answer: s.answer } : {}),
      },
    };
  }
}

function failed(): OutcomeReward {
  return { reward: 0, components: { agent_failed: 1 }, exactMatch: false, formatOk: false };
}
