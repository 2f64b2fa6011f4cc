/**
 * An experiment's environment outside a training run: its tools (to serve over MCP) and its
 * outcome reward (to score a verl sample), built from the same engine/env pieces the run uses.
 *
 *  - a workspace folder (`--env <dir>`): every `tools/*.ts` in it, loaded into one sandbox worker
 *    (engine/env/sandbox-host.ts), and `rewards/*.ts` when there is exactly one;
 *  - an experiment config: the task kind's own tools (its registry entry's `tools`, e.g. the
 *    multi-hop task's BM25 search over the world of the question being served, a QA dataset's
 *    BM25 search), the config's sandboxed user tools and reward file, its MCP servers, and its
 *    reward (exact match, or the user's reward file).
 *
 * Per-episode routing: a task's tools may need the question they serve (the multi-hop task draws
 * each from one of many seeded worlds): the caller passes `{ task: "<question id>" }` as the
 * episode (`ctx.episode`; over MCP in `_meta["arbor/episode"]`, which the exported verl tool class
 * sends from the sample's `tools_kwargs`).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatByName, type ToolCallFormat } from '../env/formats';
import { normalizeRewardValue, weightedReward, type EpisodeSummary, type TurnTrace } from '../env/rewards';
import { SandboxHost } from '../env/sandbox-host';
import { DEFAULT_LIMITS, runCall, workspaceReader, type CallOutcome, type ParsedCall, type Tool } from '../env/tool';
import type { EnvTask } from '../env/task';
import { ToolEnv, type ToolEnvOptions } from '../env/toolenv';
import type { RolloutTask } from '../rollout/ports';
import { builtinTaskTools } from '../tasks/registry';
import type { ConfigAt } from '../tasks/open';

export interface ServedEnvironment {
  tools: Tool[];
  /** The tool-call format the environment's prompts teach (what a verl run must parse). */
  format: ToolCallFormat;
  /** The outcome reward of an episode (the same function training uses). */
  reward(summary: EpisodeSummary): Promise<{ reward: number; components: Record<string, number> }>;
  /** Where the tools come from, for logs. */
  describe: string;
  /** The opened sandbox and MCP tools, for the config's task kit (engine/tasks/registry.ts openTaskKit). */
  kitExtras?: { host?: SandboxHost; mcpTools?: Tool[] };
  close(): Promise<void>;
}

/** The outcome reward as ToolEnv computes it: the user's reward file, else exact match. */
function rewardOf(host: SandboxHost | undefined): ServedEnvironment['reward'] {
  return async (s) => {
    const counts = { tool_calls: s.toolCalls, tool_errors: s.toolErrors };
    if (host?.rewardPath) {
      const u = normalizeRewardValue(await host.reward(s), host.rewardPath, s.toolCalls);
      const em = s.golds.length ? weightedReward({ exact_match: 1 }, s).components : {};
      return { reward: u.reward, components: { ...em, ...u.components, user_reward: u.reward, ...counts } };
    }
    const w = weightedReward({ exact_match: 1 }, s);
    return { reward: w.reward, components: { ...w.components, ...counts } };
  };
}

/**
 * verl's multi_turn.format, the one tool-call parser of its tool agent loop (verl's name for Hermes
 * <tool_call> JSON, which is also the registered format of that name): a workspace environment is
 * served in it, and `arbor export verl` sets it.
 */
export const VERL_TOOL_PARSER = 'hermes';

/** A workspace environment folder: tools/*.ts (and a single rewards/*.ts) in one sandbox (served in verl's format). */
export async function openWorkspaceEnvironment(dir: string): Promise<ServedEnvironment> {
  const list = (sub: string) =>
    existsSync(join(dir, sub))
      ? readdirSync(join(dir, sub))
          .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
          .sort()
          .map((f) => `${sub}/${f}`)
      : [];
  const tools = list('tools');
  if (tools.length === 0) throw new Error(`--env ${dir}: no tools/*.ts files (a workspace environment keeps its tools in tools/)`);
  const rewards = list('rewards');
  const read = (p: string) => ({ path: p, source: readFileSync(join(dir, p), 'utf8') });
  const files = { tools: tools.map(read), reward: rewards.length === 1 ? read(rewards[0]!) : undefined };
  const { ensureConsent, fileItem } = await import('../env/consent');
  await ensureConsent(`the environment folder ${dir}`, [
    ...files.tools.map((f) => fileItem('tool', join(dir, f.path), f.source, join(dir, f.path))),
    ...(files.reward ? [fileItem('reward', join(dir, files.reward.path), files.reward.source, join(dir, files.reward.path))] : []),
  ]);
  const host = await SandboxHost.open(files, undefined, dir);
  const all = [...host.tools.values()];
  return {
    tools: all,
    format: formatByName(VERL_TOOL_PARSER, { tools: all }),
    reward: rewardOf(host),
    describe: `${tools.join(', ')} from ${dir} (sandboxed)`,
    close: () => host.close(),
  };
}

/** An experiment config's environment (validated config: absolute paths): the tools and format its kit builds, its reward. */
export async function openConfigEnvironment(at: ConfigAt): Promise<ServedEnvironment> {
  const { cfg } = at;
  const { envSetup, taskTools } = await import('../tasks/env-setup');
  const { withEnvironment } = await import('../tasks/open');
  const { env, value } = await withEnvironment(at, (opened) => {
    const host = opened.host;
    // The task kind's own tools outside a run (its registry entry), then the config's.
    const own = builtinTaskTools(cfg, 'served');
    const builtin: Tool[] = own?.tools ?? [];
    const from: string[] = own?.describe ? [own.describe] : [];
    if (host) from.push(`sandboxed ${cfg.environment.tools.join(', ') || 'reward only'}`);
    if (opened.mcpServers.length) from.push(`mcp servers ${opened.mcpServers.join(', ')}`);
    const { tools, format } = taskTools(builtin, envSetup(cfg, host, opened.extras.mcpTools));
    return { tools, format, reward: rewardOf(host), describe: from.join('; ') };
  });
  return { ...value, kitExtras: env.extras, close: () => env.close() };
}

/** A verl sample to score: the decoded response and what the parquet row and verl's agent loop carry with it. */
export interface VerlSample {
  solution: string;
  /** reward_model.ground_truth (used only when the task is not one of the experiment's). */
  golds: string[];
  supporting?: string[];
  /** extra_info.task_id: the Arbor task the row was made from. */
  taskId?: string;
  question?: string;
  /**
   * Each executed tool call's success, in call order, from verl's `extra_info.tool_rewards`: the
   * exported ArborMcpTool returns +1 for a call that succeeded and -1 for one that failed; 0
   * (verl's own failures, an unknown tool or an exception, and other tool classes) is unknown:
   * the call is then run through the task's tools (toolSuccessFromRewards).
   */
  toolSuccess?: (boolean | undefined)[];
}

/** verl's per-call tool rewards as success flags (+1 success, -1 failure, anything else unknown). */
export function toolSuccessFromRewards(v: unknown): (boolean | undefined)[] | undefined {
  if (!Array.isArray(v)) return undefined;
  return v.map((x) => (typeof x === 'number' && x > 0 ? true : typeof x === 'number' && x < 0 ? false : undefined));
}

/** How a call that verl did not report is settled: run it as training would (the task's own tools). */
type CallRunner = (call: ParsedCall) => Promise<CallOutcome>;

/**
 * Rebuild the episode Arbor's reward sees (EpisodeSummary) from a decoded response: the text is
 * split at the format's observation blocks into model turns, each turn parsed with the format as
 * in training. A call's success is verl's flag for it (VerlSample.toolSuccess) and its result the
 * observation verl showed; a call verl has no flag for (older verl, or the last turn, whose calls
 * Arbor runs and verl does not) is run through `run` when given (the task's own tools), else
 * counted by its observation. Calls with a parse error fail as in training (verl's parser drops
 * them, so they have no observation).
 */
export async function replayEpisode(
  format: ToolCallFormat,
  task: EnvTask,
  s: Pick<VerlSample, 'solution' | 'toolSuccess'>,
  run?: CallRunner,
): Promise<{ summary: EpisodeSummary; answer?: string }> {
  const obsRe = format.transcriptObservation ?? /<tool_response>([\s\S]*?)<\/tool_response>/g;
  // Model turns, each with the observation blocks that followed it.
  const segments: { text: string; obs: string[] }[] = [];
  let last = 0;
  for (const m of s.solution.matchAll(obsRe)) {
    const before = s.solution.slice(last, m.index).trim();
    if (before || segments.length === 0) segments.push({ text: before, obs: [] });
    segments.at(-1)!.obs.push(m[1]!.trim());
    last = m.index! + m[0].length;
  }
  const tail = s.solution.slice(last).trim();
  if (tail) segments.push({ text: tail, obs: [] });
  let answer: string | undefined;
  let formatOk = true;
  let toolCalls = 0;
  let toolErrors = 0;
  let flag = 0;
  const retrieved: string[] = [];
  const history: TurnTrace[] = [];
  for (const seg of segments) {
    const p = format.parse(seg.text);
    if (p.errors.length) formatOk = false;
    if (p.answer !== undefined) {
      // as ToolEnv.step: an answer ends the episode and no call of that turn runs
      history.push({ text: seg.text, calls: [], errors: p.errors, answer: p.answer });
      answer = p.answer;
      break;
    }
    // Which observation block is each call's: Arbor's own rendering has one block per call (format
    // errors first, as extra blocks), so the calls' are the last ones; verl's has one per call it
    // ran, and its parser drops the calls Arbor marks as parse errors, so the valid calls take the
    // blocks in order.
    const k = p.calls.length;
    const perCall = seg.obs.length >= k;
    let v = 0;
    const blockOf = p.calls.map((c, i) => (perCall ? seg.obs.length - k + i : c.parseError ? -1 : v++));
    // verl's flags: one per valid call that got a block, in order
    const flagOf = new Map<number, boolean | undefined>();
    p.calls.forEach((c, i) => {
      if (!c.parseError && blockOf[i]! >= 0 && blockOf[i]! < seg.obs.length) flagOf.set(i, s.toolSuccess?.[flag++]);
    });
    const calls = await Promise.all(
      p.calls.map(async (c, i) => {
        const shown = blockOf[i]! >= 0 ? seg.obs[blockOf[i]!] : undefined;
        const ok = flagOf.get(i);
        if (c.parseError || shown === undefined || (ok === undefined && run)) {
          const o = run ? await run(c) : undefined;
          if (o) return { name: o.name, args: o.args, result: shown ?? o.result, success: o.success, ...(o.error !== undefined ? { error: o.error } : {}) };
        }
        const result = shown ?? '';
        const success = ok ?? (!c.parseError && !/^Error:/.test(result));
        return { name: c.name, args: c.args, result, success, ...(success ? {} : { error: c.parseError ?? result.replace(/^Error: /, '') }) };
      }),
    );
    for (const c of calls) {
      if (c.success) retrieved.push(c.result);
      else toolErrors++;
    }
    toolCalls += calls.length;
    history.push({ text: seg.text, calls, errors: p.errors });
  }
  const summary: EpisodeSummary = {
    task,
    history,
    answer,
    golds: task.answers ?? [],
    turns: history.map((h) => h.text),
    formatOk: formatOk && answer !== undefined,
    toolCalls,
    toolErrors,
    retrieved,
    supporting: task.supportingFacts ?? [],
  };
  return { summary, answer };
}

/**
 * Score a decoded response with an environment's outcome reward, without the task's own episode
 * settings (a row that is not one of the experiment's tasks): the task is rebuilt from the row.
 */
export async function scoreSolution(
  env: Pick<ServedEnvironment, 'format' | 'reward'>,
  s: VerlSample,
): Promise<{ reward: number; components: Record<string, number>; answer?: string }> {
  const task: EnvTask = { id: s.taskId ?? 'verl', question: s.question, answers: s.golds, supportingFacts: s.supporting };
  const { summary, answer } = await replayEpisode(env.format, task, s);
  return { ...(await env.reward(summary)), answer };
}

/** A ToolEnv whose episode is given (replayed from verl's text) instead of played: its outcome() is training's. */
class ReplayedEnv extends ToolEnv {
  constructor(
    opts: ToolEnvOptions,
    private readonly given: EpisodeSummary,
  ) {
    super(opts);
  }
  override summary(): EpisodeSummary {
    return this.given;
  }
}

export interface VerlScorer {
  /** Where the tools come from (ServedEnvironment.describe). */
  describe: string;
  score(s: VerlSample): Promise<{ reward: number; components: Record<string, number>; answer?: string }>;
  close(): Promise<void>;
}

/**
 * The scorer behind `arbor verl-reward`: the experiment's environment and task kit, opened as a
 * training run opens them. A sample whose `task_id` is one of the experiment's tasks is scored
 * by that task's own episode environment (the same ToolEnv training builds: the task row with
 * its `meta` and supporting facts, the reward file or reward weights, the format), so the
 * reward and its components are the ones Arbor computes for the same episode. Calls verl has no
 * success flag for are run through the task's own tools, as training would have run them.
 */
export async function openVerlScorer(at: ConfigAt, warn: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<VerlScorer> {
  const { cfg } = at;
  const env = await openConfigEnvironment(at);
  let tasks: Map<string, RolloutTask>;
  try {
    const { openTaskKit } = await import('../tasks/registry');
    const kit = openTaskKit(cfg, env.kitExtras);
    tasks = new Map([...kit.trainTasks, ...(kit.rlTasks ?? []), ...kit.evalTasks].map((t) => [t.id, t]));
  } catch (e) {
    await env.close();
    throw e;
  }
  let warned = false;
  return {
    describe: env.describe || 'no tools',
    async score(s) {
      const t = s.taskId !== undefined ? tasks.get(s.taskId) : undefined;
      const ep = t?.createEnv();
      if (!(ep instanceof ToolEnv)) {
        if (!warned) {
          warned = true;
          warn(
            `arbor verl-reward: ${s.taskId === undefined ? 'a sample without extra_info.task_id' : `task "${s.taskId}" is not one of the experiment's tasks`}; scoring it from its ground truth alone (no task meta)`,
          );
        }
        return scoreSolution(env, s);
      }
      const o = ep.opts;
      const byName = new Map(o.tools.map((x) => [x.name, x]));
      const episode: Record<string, unknown> = {};
      const readFile = workspaceReader(o.workspace);
      const run: CallRunner = (c) => runCall(byName, c, o.limits ?? DEFAULT_LIMITS, { episode, readFile });
      const { summary, answer } = await replayEpisode(o.format, o.task, s, run);
      const out = await new ReplayedEnv(o, summary).outcome();
      return { reward: out.reward, components: out.components, ...(answer !== undefined ? { answer } : {}) };
    },
    close: () => env.close(),
  };
}

/** The prompt a task's episodes start from, as chat messages (the system message, the format's instruction; tools go separately). */
export function taskPromptMessages(t: RolloutTask): { role: string; content: string }[] | undefined {
  const ep = t.createEnv();
  return ep instanceof ToolEnv ? ep.promptMessages() : undefined;
}
