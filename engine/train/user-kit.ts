/**
 * A user environment as a training task: a QA dataset from the workspace (task.kind "qa", see
 * ./qa-kit.ts: tokenizer, held-out split, expert, tiny model) plus the user's own tool and reward
 * files from the workspace, run in the sandbox (engine/env/sandbox-host.ts) for the whole run.
 *
 * - Tools: the search-R1 format calls one tool, `search` with `{ query }`. A user tool named
 *   `search` replaces the built-in BM25 search over the dataset's paragraphs (e.g. your own
 *   retrieval); any other user tool is refused with its file named, because the tiny word-level
 *   model cannot write the JSON tool calls other tools need.
 * - Reward: the user's reward function scores each episode's summary (answer, gold answers,
 *   model turns, tool calls and errors, retrieved passages, supporting titles); its value is the
 *   training reward, its components are stored next to the built-in ones (exact_match stays the
 *   evaluation metric). A reward that throws stops the run with the file and line.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { loadQaDataset, type QaQuestion } from '../env/dataset';
import type { EpisodeSummary } from '../env/rewards';
import { SandboxHost } from '../env/sandbox-host';
import { Bm25Index, searchTool } from '../env/search';
import type { Tool } from '../env/tool';
import type { EpisodeEnv, RolloutTask } from '../rollout/ports';
import type { ExperimentConfig } from './config';
import { multihopTask } from './multihop-kit';
import { qaKit } from './qa-kit';
import type { TaskKit } from './session';

/** Workspace files of a user environment (paths relative to the workspace, e.g. tools/search.ts). */
export interface UserEnvironmentFiles {
  tools?: string[];
  reward?: string;
}

/** Read the files and load them into a sandbox host (throws naming the file and line). */
export async function openUserEnvironment(files: UserEnvironmentFiles, workspace: string): Promise<SandboxHost> {
  const read = (p: string) => {
    const full = isAbsolute(p) ? p : join(workspace, p);
    try {
      return { path: p, source: readFileSync(full, 'utf8') };
    } catch (e) {
      throw new Error(`environment: cannot read ${p} (${(e as Error).message})`);
    }
  };
  return SandboxHost.open({ tools: (files.tools ?? []).map(read), reward: files.reward ? read(files.reward) : undefined });
}

/** Wrap a task so the user's reward file scores its episodes. */
export function withUserReward(task: RolloutTask, q: QaQuestion, host: SandboxHost): RolloutTask {
  return {
    ...task,
    createEnv(): EpisodeEnv {
      const env = task.createEnv();
      const turns: string[] = [];
      const retrieved: string[] = [];
      let toolCalls = 0;
      let toolErrors = 0;
      return {
        prompt: () => env.prompt(),
        async step(turn) {
          turns.push(turn.text);
          const r = await env.step(turn);
          for (const c of r.toolCalls ?? []) {
            toolCalls++;
            if (c.error) toolErrors++;
            else retrieved.push(c.result);
          }
          return r;
        },
        async outcome() {
          const base = await env.outcome();
          const summary: EpisodeSummary = {
            answer: base.answer, golds: q.answers, turns, formatOk: base.formatOk ?? false, toolCalls, toolErrors, retrieved, supporting: q.supporting,
          };
          const u = await host.reward(summary);
          return { ...base, reward: u.reward, components: { ...base.components, ...(u.components ?? {}), user_reward: u.reward } };
        },
      };
    },
  };
}

/** The QA kit with the user's search tool and reward (the host stays open for the run; close it after). */
export function userEnvKit(cfg: ExperimentConfig, host: SandboxHost): TaskKit {
  const base = qaKit(cfg);
  const ds = loadQaDataset(cfg.task.dataset!);
  for (const [name, tool] of host.tools) {
    if (name !== 'search') throw new Error(`environment: tool "${name}" cannot be called by the search-R1 format (only a tool named "search" taking { query }); rename it or remove it from environment.tools`);
    const props = (tool.parameters as { properties?: Record<string, unknown> }).properties;
    if (!props || !('query' in props)) throw new Error('environment: the "search" tool must take a "query" argument (the search-R1 format calls it with { query })');
  }
  const tools = new Map<string, Tool>([['search', host.tools.get('search') ?? searchTool(new Bm25Index(ds.passages), { topK: 2 })]]);
  // The same split as the QA kit: every fifth question is held out.
  const train = ds.questions.filter((_, i) => i % 5 !== 4);
  const held = ds.questions.filter((_, i) => i % 5 === 4).slice(0, cfg.eval.n_questions);
  const task = (q: QaQuestion) => {
    const t = multihopTask(q, tools, base.tokenizer);
    return host.rewardPath ? withUserReward(t, q, host) : t;
  };
  return { ...base, trainTasks: train.map(task), evalTasks: held.map(task), rlTasks: undefined };
}
