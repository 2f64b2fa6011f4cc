/**
 * The episode environment every task kit builds its tasks with (engine/env ToolEnv): the config's
 * `environment` block (format, limits, the user's sandboxed tools and reward) turned into one
 * RolloutTask per task. Training, `arbor rollout`, `arbor eval` and the run templates all get
 * their episodes from here, so the format, the query limits and the observation budget are the
 * same everywhere.
 */
import { formatByName, formatToolProblem, type ToolCallFormat } from '../env/formats';
import type { RewardValue, EpisodeSummary } from '../env/rewards';
import type { SandboxHost } from '../env/sandbox-host';
import { DEFAULT_LIMITS, toolSchemaProblem, type CallLimits, type Tool } from '../env/tool';
import type { EnvTask } from '../env/task';
import { ToolEnv, taskPrompt, type EnvTokenizer } from '../env/toolenv';
import type { RolloutTask, TextPolicy } from '../rollout/ports';
import type { ExperimentConfig } from '../config/experiment';

export interface EnvSetup {
  format: string;
  maxCalls: number;
  limits: CallLimits;
  maxObservationTokens: number;
  maxTurns: number;
  workspace?: string;
  /** The user's tools (sandboxed), joining the task's built-in tools. */
  userTools: Tool[];
  /** Tool name → the file that defines it (for errors). */
  toolFiles: Map<string, string>;
  userReward?: (e: EpisodeSummary) => Promise<RewardValue>;
  userRewardName?: string;
  /** environment.reward_errors (default fail). */
  rewardErrors?: 'fail' | 'zero';
}

/** `mcpTools`: the tools of environment.mcp_servers (engine/env/mcp/client.ts), joining the user's. Reads the environment section and rollout.max_turns. */
export function envSetup(cfg: Pick<ExperimentConfig, 'environment'> & { rollout: { max_turns: number } }, host?: SandboxHost, mcpTools: Tool[] = []): EnvSetup {
  const e = cfg.environment;
  return {
    format: e.format,
    maxCalls: e.max_calls_per_turn,
    limits: { ...DEFAULT_LIMITS, timeoutMs: e.tool_timeout_ms },
    maxObservationTokens: e.max_observation_tokens,
    maxTurns: cfg.rollout.max_turns,
    workspace: e.workspace,
    rewardErrors: e.reward_errors,
    userTools: [...(host ? host.tools.values() : []), ...mcpTools],
    toolFiles: new Map([
      ...(host ? [...host.tools.keys()].map((n): [string, string] => [n, host.toolPath(n) ?? '']) : []),
      ...mcpTools.map((t): [string, string] => [t.name, 'environment.mcp_servers']),
    ]),
    ...(host?.rewardPath ? { userReward: (s: EpisodeSummary) => host.reward(s) as Promise<RewardValue>, userRewardName: host.rewardPath } : {}),
  };
}

/** The task's built-in tools with the user's (a user tool of the same name replaces the built-in), and the format over them. */
export function taskTools(builtin: Tool[], setup: EnvSetup): { tools: Tool[]; format: ToolCallFormat } {
  const byName = new Map(builtin.map((t) => [t.name, t]));
  for (const t of setup.userTools) byName.set(t.name, t);
  const tools = [...byName.values()];
  // A tool whose parameters schema does not compile is named with its file now, not at its first call.
  for (const t of setup.userTools) {
    const bad = toolSchemaProblem(t);
    if (bad) throw new Error(`environment.tools: ${setup.toolFiles.get(t.name) || 'a tool file'}: ${bad}`);
  }
  const problem = formatToolProblem(setup.format, tools);
  if (problem) {
    const file = [...setup.toolFiles].find(([n]) => problem.includes(`"${n}"`))?.[1];
    throw new Error(`environment.format "${setup.format}": ${file ? `${file}: ` : ''}${problem}`);
  }
  return { tools, format: formatByName(setup.format, { tools, maxCalls: setup.maxCalls }) };
}

export interface EnvTaskOptions {
  tools: Tool[];
  format: ToolCallFormat;
  tokenizer: EnvTokenizer;
  setup: EnvSetup;
  rewardWeights?: Record<string, number>;
  /** Instruction before the prompt (default: the format's). */
  instruction?: string;
  endTokenIds?: number[];
  /** Extra task metadata kept with trajectories. */
  meta?: Record<string, unknown>;
}

/** One ToolEnv episode per sample of a task. */
export function toolEnvTask(task: EnvTask, o: EnvTaskOptions): RolloutTask {
  const prompt = taskPrompt(task);
  return {
    id: task.id,
    meta: { ...(task.meta ?? {}), ...(o.meta ?? {}), ...(prompt ? { question: prompt } : {}), ...(task.answers ? { answers: task.answers } : {}) },
    createEnv: () =>
      new ToolEnv({
        task,
        tools: o.tools,
        format: o.format,
        tokenizer: o.tokenizer,
        rewardWeights: o.rewardWeights,
        userReward: o.setup.userReward,
        userRewardName: o.setup.userRewardName,
        rewardErrors: o.setup.rewardErrors,
        maxTurns: o.setup.maxTurns,
        limits: o.setup.limits,
        instruction: o.instruction,
        maxObservationTokens: o.setup.maxObservationTokens,
        workspace: o.setup.workspace,
        endTokenIds: o.endTokenIds,
      }),
  };
}

/**
 * A scripted expert written once for every format: `plan(task, turnIndex)` gives the calls or the
 * answer of each turn; the format writes them (with the end-of-turn text after calls in 'template'
 * formats, so the model learns to end its turn there).
 */
export function formatExpert(
  format: ToolCallFormat,
  endText: string,
  plan: (taskId: string, turn: number, seed: number) => { calls?: { name: string; args: Record<string, unknown> }[]; answer?: string; mistake?: boolean },
): TextPolicy {
  return {
    async act({ task, history, seed }) {
      const p = plan(task.id, history.filter((h) => h.role === 'model').length, seed);
      const text = p.calls?.length ? format.writeCalls(p.calls) + (format.observationMode === 'template' ? endText : '') : format.writeAnswer(p.answer ?? '');
      return p.mistake ? { text, mistake: true } : text;
    },
  };
}
