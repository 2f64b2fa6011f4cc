/**
 * A run's rollout and held-out evaluation through an external agent program (environment.agent):
 * the loop's RolloutPort (the step's prompts from the task pool with the step seed, as
 * engine/train/rollout-port.ts picks them; each task × rollout.n agent episodes) and the session's
 * evaluate (each held-out task once, at eval.temperature), both over the run's own decode backend.
 * engine/run/compose.ts uses them in place of the in-process episodes.
 */
import type { ExperimentConfig } from '../config/experiment';
import type { ModelConfig } from '../model/config';
import { eosTokenIds } from '../rollout/model-backend';
import type { DecodeBackend, RolloutTask } from '../rollout/ports';
import type { Trajectory } from '../rollout/types';
import type { EvalSummary, TaskKit } from '../tasks/kit';
import { stepSeed } from '../train/episode';
import type { RolloutPort } from '../train/loop';
import { pickTasks } from '../train/rollout-port';
import { trajectoryToEpisode } from '../train/trajectories';
import { AgentRollouts, type AgentEpisodeResult } from './agent';
import { turnStopIds, type ChatTokenizer } from './chat';

export interface AgentSession {
  rollout: RolloutPort;
  evaluate(tasks: RolloutTask[], onProgress?: (done: number, total: number) => void): Promise<EvalSummary>;
  takeLogs(): string[];
  close(): Promise<void>;
}

/** The kit's tokenizer as a chat tokenizer (the tools task's tokenizer holds its HfTokenizer in `hf`). */
function chatTokenizer(kit: TaskKit): ChatTokenizer & { eosTokenId?: number } {
  const t = ((kit.tokenizer as { hf?: unknown }).hf ?? kit.tokenizer) as Partial<ChatTokenizer> & { eosTokenId?: number };
  if (typeof t.renderChat !== 'function' || typeof t.tokenId !== 'function')
    throw new Error(
      "environment.agent: the task's tokenizer has no chat template (the agent's messages are rendered with it); use a model folder with one (model.path)",
    );
  return t as ChatTokenizer & { eosTokenId?: number };
}

/** Exact match, format and tool use per episode (an episode counts once, whatever number of trajectories it made). */
export function summarizeAgentEval(tasks: RolloutTask[], episodes: AgentEpisodeResult[]): EvalSummary {
  const byHops = new Map<number, { right: number; n: number }>();
  let em = 0,
    fmt = 0,
    calls = 0,
    errors = 0;
  episodes.forEach((e, i) => {
    const ok = !!e.outcome.exactMatch;
    em += ok ? 1 : 0;
    fmt += e.outcome.formatOk ? 1 : 0;
    calls += e.outcome.components.tool_calls ?? 0;
    errors += e.outcome.components.tool_errors ?? 0;
    const hops = Number(tasks[i]?.meta?.hops);
    if (Number.isFinite(hops)) {
      const h = byHops.get(hops) ?? { right: 0, n: 0 };
      h.n++;
      h.right += ok ? 1 : 0;
      byHops.set(hops, h);
    }
  });
  const d = Math.max(1, episodes.length);
  return {
    n: episodes.length,
    exactMatch: em / d,
    exactMatchByHops: Object.fromEntries([...byHops].map(([h, v]) => [h, v.right / v.n])),
    formatRate: fmt / d,
    toolCallsPerEpisode: calls / d,
    toolErrorsPerEpisode: errors / d,
  };
}

export function openAgentSession(
  cfg: ExperimentConfig,
  kit: TaskKit,
  backend: DecodeBackend,
  model: ModelConfig,
  onTrajectories?: (step: number, t: Trajectory[]) => void,
): AgentSession {
  const spec = cfg.environment.agent!;
  const tok = chatTokenizer(kit);
  const logs: string[] = [];
  const log = (line: string) => {
    logs.push(line);
    process.stderr.write(`${line}\n`);
  };
  const rollouts = new AgentRollouts({
    cfg,
    spec,
    backend,
    tokenizer: tok,
    stopTokenIds: [...new Set([...kit.stop.tokenIds, ...turnStopIds({ tokenId: (t) => tok.tokenId(t), eosTokenId: tok.eosTokenId }, eosTokenIds(model))])],
    endStrings: kit.stop.strings,
    log,
  });
  const pool = kit.rlTasks ?? kit.trainTasks;
  if (pool.length === 0) throw new Error(`task "${cfg.task.kind}": the training task pool is empty`);
  return {
    rollout: {
      async sample({ step, seed, prompts, n }) {
        const tasks = pickTasks(pool, prompts, seed);
        const groups = await rollouts.run(tasks, n, seed, { temperature: cfg.rollout.temperature, topP: cfg.rollout.top_p });
        const trajectories = groups.flat().flatMap((e) => e.trajectories);
        if (trajectories.length === 0) {
          const first = groups.flat()[0];
          throw new Error(
            `step ${step}: none of the ${tasks.length * n} agent episodes made a call to its OPENAI_BASE_URL (environment.agent.command ${JSON.stringify(spec.command)})${first?.run.stderr.trim() ? `; the first one's stderr:\n${first.run.stderr.trim().slice(-2000)}` : ''}`,
          );
        }
        onTrajectories?.(step, trajectories);
        return trajectories.map(trajectoryToEpisode);
      },
      takeMetrics: () => rollouts.takeMetrics(),
    },
    async evaluate(tasks, onProgress) {
      const groups = await rollouts.run(tasks, 1, stepSeed(cfg.seed, 0, 3000), { temperature: cfg.eval.temperature, topP: 1 });
      rollouts.takeMetrics(); // an evaluation's time is not the next step's
      onProgress?.(tasks.length, tasks.length);
      return summarizeAgentEval(
        tasks,
        groups.map((g) => g[0]!),
      );
    },
    takeLogs: () => logs.splice(0),
    close: () => rollouts.close(),
  };
}
