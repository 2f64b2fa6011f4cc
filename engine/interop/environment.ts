/**
 * An experiment's environment outside a training run: its tools (to serve over MCP) and its
 * outcome reward (to score a verl sample), built from the same engine/env pieces the run uses.
 *
 *  - a workspace folder (`--env <dir>`): every `tools/*.ts` in it, loaded into one sandbox worker
 *    (engine/env/sandbox-host.ts), and `rewards/*.ts` when there is exactly one;
 *  - an experiment config: the task's tools (the multi-hop task's BM25 search over the world of
 *    the question being served, a QA dataset's BM25 search, the config's sandboxed user tools and
 *    reward file, its MCP servers) and its reward (exact match, or the user's reward file).
 *
 * Per-episode routing: the multi-hop task draws each question from one of many seeded worlds, so
 * its search needs the question: the caller passes `{ task: "<question id>" }` as the episode
 * (`ctx.episode`; over MCP in `_meta["arbor/episode"]`, which the exported verl tool class sends
 * from the sample's `tools_kwargs`).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadQaDataset } from '../env/dataset';
import { formatByName, type ToolCallFormat } from '../env/formats';
import { generateWorld } from '../tasks/multihop/world';
import { normalizeRewardValue, weightedReward, type EpisodeSummary, type TurnTrace } from '../env/rewards';
import { SandboxHost } from '../env/sandbox-host';
import { Bm25Index, searchTool } from '../env/search';
import { loadTaskFile } from '../env/taskfile';
import type { Tool } from '../env/tool';
import type { ExperimentConfig } from '../config/experiment';

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

/** A workspace environment folder: tools/*.ts (and a single rewards/*.ts) in one sandbox. */
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
  const host = await SandboxHost.open({ tools: tools.map(read), reward: rewards.length === 1 ? read(rewards[0]!) : undefined }, undefined, dir);
  const all = [...host.tools.values()];
  return {
    tools: all,
    format: formatByName('hermes', { tools: all }),
    reward: rewardOf(host),
    describe: `${tools.join(', ')} from ${dir} (sandboxed)`,
    close: () => host.close(),
  };
}

/** The multi-hop task's search: the world of the question in ctx.episode.task (ids are w<seed>-q<n>). */
export function routedMultihopSearch(): Tool {
  const cache = new Map<number, Tool>();
  const forWorld = (seed: number) => {
    let t = cache.get(seed);
    if (!t) {
      if (cache.size >= 16) cache.delete(cache.keys().next().value!);
      t = searchTool(new Bm25Index(generateWorld(seed).passages), { topK: 2 });
      cache.set(seed, t);
    }
    return t;
  };
  const proto = searchTool(new Bm25Index(generateWorld(0).passages), { topK: 2 });
  return {
    name: proto.name,
    description: proto.description,
    parameters: proto.parameters,
    execute(args, ctx) {
      const task = ctx.episode.task;
      const m = typeof task === 'string' ? /^w(\d+)-q\d+$/.exec(task) : null;
      if (!m) throw new Error('the multi-hop search needs the question it serves: pass { task: "<question id>" } as the episode (MCP: _meta["arbor/episode"])');
      return forWorld(Number(m[1])).execute(args, ctx);
    },
  };
}

/** An experiment config's environment (validated config: absolute paths): the tools and format its kit builds, its reward. */
export async function openConfigEnvironment(cfg: ExperimentConfig): Promise<ServedEnvironment> {
  const { envSetup, taskTools } = await import('../tasks/env-setup');
  const { withEnvironment } = await import('../tasks/open');
  const { env, value } = await withEnvironment(cfg, (opened) => {
    const host = opened.host;
    const builtin: Tool[] = [];
    const from: string[] = [];
    if (cfg.task.kind === 'multihop') {
      builtin.push(routedMultihopSearch());
      from.push('multi-hop BM25 search (per question world)');
    } else if (cfg.task.kind === 'qa' && cfg.task.dataset) {
      builtin.push(searchTool(new Bm25Index(loadQaDataset(cfg.task.dataset).passages), { topK: 2 }));
      from.push(`BM25 search over ${cfg.task.dataset}`);
    } else if (cfg.environment.tasks) {
      const tf = loadTaskFile(cfg.environment.tasks);
      if (tf.passages.length >= 3) builtin.push(searchTool(new Bm25Index(tf.passages), { topK: 2 }));
    }
    if (host) from.push(`sandboxed ${cfg.environment.tools.join(', ') || 'reward only'}`);
    if (opened.mcpServers.length) from.push(`mcp servers ${opened.mcpServers.join(', ')}`);
    const { tools, format } = taskTools(builtin, envSetup(cfg, host, opened.extras.mcpTools));
    return { tools, format, reward: rewardOf(host), describe: from.join('; ') };
  });
  return { ...value, kitExtras: env.extras, close: () => env.close() };
}

/**
 * Score a decoded response (verl's `solution_str`: the model's turns with the tool responses
 * between them) with the environment's reward: the text is split at the format's observation
 * blocks into model turns and observations, each model turn parsed as in training.
 */
export async function scoreSolution(
  env: Pick<ServedEnvironment, 'format' | 'reward'>,
  s: { solution: string; golds: string[]; supporting?: string[]; taskId?: string; question?: string },
): Promise<{ reward: number; components: Record<string, number>; answer?: string }> {
  const obsRe = env.format.name === 'search-r1' ? /<information>([\s\S]*?)<\/information>/g : /<tool_response>([\s\S]*?)<\/tool_response>/g;
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
  const retrieved: string[] = [];
  const history: TurnTrace[] = [];
  for (const seg of segments) {
    const p = env.format.parse(seg.text);
    if (p.errors.length) formatOk = false;
    const calls = p.calls.map((c, i) => {
      const result = seg.obs[i] ?? '';
      const success = !c.parseError && !/^Error:/.test(result);
      if (success) retrieved.push(result);
      else toolErrors++;
      return { name: c.name, args: c.args, result, success, ...(success ? {} : { error: c.parseError ?? result }) };
    });
    toolCalls += calls.length;
    history.push({ text: seg.text, calls, errors: p.errors, ...(p.answer !== undefined ? { answer: p.answer } : {}) });
    if (p.answer !== undefined) {
      answer = p.answer;
      break;
    }
  }
  const summary: EpisodeSummary = {
    task: { id: s.taskId ?? 'verl', question: s.question, answers: s.golds, supportingFacts: s.supporting },
    history,
    answer,
    golds: s.golds,
    turns: history.map((h) => h.text),
    formatOk: formatOk && answer !== undefined,
    toolCalls,
    toolErrors,
    retrieved,
    supporting: s.supporting ?? [],
  };
  return { ...(await env.reward(summary)), answer };
}
