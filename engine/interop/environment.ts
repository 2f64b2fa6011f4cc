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
import { generateWorld } from '../env/multihop';
import { weightedReward, type EpisodeSummary } from '../env/rewards';
import { SandboxHost } from '../env/sandbox-host';
import { Bm25Index, searchTool } from '../env/search';
import type { Tool } from '../env/tool';
import type { ExperimentConfig } from '../train/config';

export interface ServedEnvironment {
  tools: Tool[];
  /** The tool-call format the environment's prompts teach (what a verl run must parse). */
  format: ToolCallFormat;
  /** The outcome reward of an episode (the same function training uses). */
  reward(summary: EpisodeSummary): Promise<{ reward: number; components: Record<string, number> }>;
  /** Where the tools come from, for logs. */
  describe: string;
  close(): Promise<void>;
}

const EM = { exact_match: 1 };
const builtinReward = async (s: EpisodeSummary) => {
  const w = weightedReward(EM, s);
  return { reward: w.reward, components: w.components };
};

/** A workspace environment folder: tools/*.ts (and a single rewards/*.ts) in one sandbox. */
export async function openWorkspaceEnvironment(dir: string): Promise<ServedEnvironment> {
  const list = (sub: string) => (existsSync(join(dir, sub)) ? readdirSync(join(dir, sub)).filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')).sort().map((f) => `${sub}/${f}`) : []);
  const tools = list('tools');
  if (tools.length === 0) throw new Error(`--env ${dir}: no tools/*.ts files (a workspace environment keeps its tools in tools/)`);
  const rewards = list('rewards');
  const read = (p: string) => ({ path: p, source: readFileSync(join(dir, p), 'utf8') });
  const host = await SandboxHost.open({ tools: tools.map(read), reward: rewards.length === 1 ? read(rewards[0]!) : undefined });
  return {
    tools: [...host.tools.values()],
    format: formatByName('hermes'),
    reward: async (s) => (host.rewardPath ? { components: {}, ...(await host.reward(s)) } : builtinReward(s)),
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

/** An experiment config's environment (validated config: absolute paths). */
export async function openConfigEnvironment(cfg: ExperimentConfig): Promise<ServedEnvironment> {
  const closers: (() => Promise<void>)[] = [];
  const tools: Tool[] = [];
  let reward = builtinReward;
  const from: string[] = [];
  try {
    const env = cfg.environment as (ExperimentConfig['environment'] & { mcp_servers?: Record<string, unknown> }) | undefined;
    if (env && (env.tools.length || env.reward)) {
      const read = (p: string) => ({ path: p, source: readFileSync(p, 'utf8') });
      const host = await SandboxHost.open({ tools: env.tools.map(read), reward: env.reward ? read(env.reward) : undefined });
      closers.push(() => host.close());
      tools.push(...host.tools.values());
      if (host.rewardPath) reward = async (s) => ({ components: {}, ...(await host.reward(s)) });
      from.push(`sandboxed ${env.tools.join(', ') || 'reward only'}`);
    }
    if (env?.mcp_servers && Object.keys(env.mcp_servers).length) {
      const { McpToolSet } = await import('./mcp-client');
      const set = await McpToolSet.open(env.mcp_servers as never);
      closers.push(() => set.close());
      tools.push(...set.tools);
      from.push(`mcp servers ${Object.keys(env.mcp_servers).join(', ')}`);
    }
    if (!tools.some((t) => t.name === 'search')) {
      if (cfg.task.kind === 'multihop') {
        tools.push(routedMultihopSearch());
        from.push('multi-hop BM25 search (per question world)');
      } else if (cfg.task.dataset) {
        tools.push(searchTool(new Bm25Index(loadQaDataset(cfg.task.dataset).passages), { topK: 2 }));
        from.push(`BM25 search over ${cfg.task.dataset}`);
      }
    }
    const fmtName = (cfg.environment as { format?: string } | undefined)?.format ?? 'search-r1';
    return {
      tools,
      format: formatByName(fmtName),
      reward,
      describe: from.join('; '),
      close: async () => void (await Promise.all(closers.map((c) => c()))),
    };
  } catch (e) {
    await Promise.all(closers.map((c) => c().catch(() => undefined)));
    throw e;
  }
}

/**
 * Score a decoded response (verl's `solution_str`: the model's turns with the tool responses
 * between them) with the environment's reward: the text is split at the format's observation
 * blocks into model turns and observations, each model turn parsed as in training.
 */
export async function scoreSolution(env: Pick<ServedEnvironment, 'format' | 'reward'>, s: { solution: string; golds: string[]; supporting?: string[] }): Promise<{ reward: number; components: Record<string, number>; answer?: string }> {
  const obsRe = env.format.name === 'search-r1' ? /<information>([\s\S]*?)<\/information>/g : /<tool_response>([\s\S]*?)<\/tool_response>/g;
  const turns: string[] = [];
  const retrieved: string[] = [];
  let last = 0;
  let toolErrors = 0;
  for (const m of s.solution.matchAll(obsRe)) {
    const before = s.solution.slice(last, m.index).trim();
    if (before) turns.push(before);
    const content = m[1]!.trim();
    if (/^Error:/.test(content)) toolErrors++;
    else retrieved.push(content);
    last = m.index! + m[0].length;
  }
  const tail = s.solution.slice(last).trim();
  if (tail) turns.push(tail);
  let answer: string | undefined;
  let formatOk = true;
  let toolCalls = 0;
  const history: EpisodeSummary['history'] = [];
  for (const t of turns) {
    const p = env.format.parse(t);
    if (p.errors.length) formatOk = false;
    toolCalls += p.calls.length;
    history.push({ text: t, calls: p.calls.map((c) => ({ name: c.name, args: c.args })) as EpisodeSummary['history'][number]['calls'], errors: p.errors, ...(p.answer !== undefined ? { answer: p.answer } : {}) });
    if (p.answer !== undefined) {
      answer = p.answer;
      break;
    }
  }
  const task = { id: 'verl', answers: s.golds, supporting: s.supporting ?? [] };
  const summary: EpisodeSummary = { task, history, answer, golds: s.golds, turns, formatOk: formatOk && answer !== undefined, toolCalls, toolErrors, retrieved, supporting: s.supporting ?? [] };
  return { ...(await env.reward(summary)), answer };
}
