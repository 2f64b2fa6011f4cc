/**
 * What a task contributes to a run (the TaskKit: tokenizer, train / RL / held-out tasks, stop
 * strings, the scripted expert, the tiny model, the naive-RAG baseline) and the held-out
 * evaluation summary every task reports. The registry (./registry.ts) maps task.kind to a kit;
 * engine/run/compose.ts builds a run's model side around one.
 */
import type { SandboxHost } from '../env/sandbox-host';
import type { Tool } from '../env/tool';
import type { ModelConfig } from '../model/config';
import type { RolloutTask, TextPolicy, TokenizerPort } from '../rollout/ports';
import { toolCallTotals, type Trajectory } from '../rollout/types';
import type { ExperimentConfig } from '../config/experiment';

export interface TaskKit {
  tokenizer: TokenizerPort;
  trainTasks: RolloutTask[];
  /** The RL questions when they are a subset of the training questions (task.rl_hops); default trainTasks. */
  rlTasks?: RolloutTask[];
  /** Held-out tasks; `meta.hops` (if present) splits exact match by hop count. */
  evalTasks: RolloutTask[];
  stop: { strings: string[]; tokenIds: number[] };
  /** The scripted expert, for SFT demonstrations. */
  expert?: TextPolicy;
  /** Why there is no expert (named in the error of a job that needs one). */
  noExpert?: string;
  /** Naive RAG baseline on the given held-out tasks. */
  naiveRag?(tasks: RolloutTask[]): Promise<EvalSummary>;
  /** Config of the tiny built-in model for this task (model.init: tiny). */
  tinyModel(cfg: ExperimentConfig): ModelConfig;
  /** Folder with tokenizer files, copied into every saved checkpoint. */
  tokenizerFolder?: string;
}

export interface KitExtras {
  /** The user's tool and reward files, loaded in the sandbox. */
  host?: SandboxHost;
  /** The tools of environment.mcp_servers, started once for the run (engine/env/mcp/client.ts). */
  mcpTools?: Tool[];
}

export type KitFactory = (cfg: ExperimentConfig, extras: KitExtras) => TaskKit;

/** Held-out evaluation result: exact match overall and per hop count, tool use. */
export interface EvalSummary {
  n: number;
  exactMatch: number;
  /** Exact match per hop count (key: hops). */
  exactMatchByHops: Record<number, number>;
  formatRate: number;
  toolCallsPerEpisode: number;
  toolErrorsPerEpisode: number;
}

export function evalMetrics(e: EvalSummary): Record<string, number> {
  const m: Record<string, number> = {
    exact_match: e.exactMatch,
    format_rate: e.formatRate,
    tool_calls_per_episode: e.toolCallsPerEpisode,
    tool_errors_per_episode: e.toolErrorsPerEpisode,
  };
  for (const [h, v] of Object.entries(e.exactMatchByHops)) m[`exact_match/hops_${h}`] = v;
  return m;
}

/** Exact match, format and tool use over evaluation trajectories, split by meta.hops. */
export function summarizeEval(trajs: Trajectory[]): EvalSummary {
  const n = trajs.length;
  const byHops = new Map<number, { right: number; n: number }>();
  let em = 0;
  let fmt = 0;
  for (const t of trajs) {
    const ok = t.outcome.exactMatch ?? (t.outcome.components.exact_match ?? 0) > 0;
    em += ok ? 1 : 0;
    fmt += (t.outcome.formatOk ?? (t.outcome.components.format ?? 0) > 0) ? 1 : 0;
    const hops = Number(t.meta?.hops);
    if (Number.isFinite(hops)) {
      const h = byHops.get(hops) ?? { right: 0, n: 0 };
      h.n++;
      h.right += ok ? 1 : 0;
      byHops.set(hops, h);
    }
  }
  const d = Math.max(1, n);
  const { calls, errors } = toolCallTotals(trajs);
  return {
    n,
    exactMatch: em / d,
    exactMatchByHops: Object.fromEntries([...byHops].map(([h, v]) => [h, v.right / v.n])),
    formatRate: fmt / d,
    toolCallsPerEpisode: calls / d,
    toolErrorsPerEpisode: errors / d,
  };
}
