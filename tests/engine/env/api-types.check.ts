// Compile-time check (run by `npm run typecheck`, the first step of `npm test`): the editor's
// 'arbor/env' declarations (resources/types/arbor-env.d.ts) are mutually assignable with the
// engine's own types, so the types Monaco shows cannot drift from what runs.
import type * as D from 'arbor/env';
import type * as T from '../../../engine/env/tool';
import type * as R from '../../../engine/env/rewards';
import type * as E from '../../../engine/env/toolenv';
import type * as K from '../../../engine/env/task';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Check<X extends true> = X;

export type ApiTypesInStep = [
  Check<Same<D.Tool, T.Tool>>,
  Check<Same<D.ToolResult, T.ToolResult>>,
  Check<Same<D.ToolContext, T.ToolContext>>,
  Check<Same<D.EpisodeSummary, R.EpisodeSummary>>,
  Check<Same<D.RewardFn, R.RewardFn>>,
  Check<Same<D.RewardValue, R.RewardValue>>,
  Check<Same<D.TurnTrace, R.TurnTrace>>,
  Check<Same<D.EnvTask, K.EnvTask>>,
  Check<Same<D.ToolEnvStepResult, E.ToolEnvStepResult>>,
  Check<Same<typeof D.normalizeAnswer, typeof R.normalizeAnswer>>,
  Check<Same<typeof D.exactMatch, typeof R.exactMatch>>,
  Check<Same<typeof D.substringMatch, typeof R.substringMatch>>,
  Check<Same<typeof D.f1Score, typeof R.f1Score>>,
];

// A tool and a reward as a user writes them in the editor, typed only by 'arbor/env' (what Monaco
// loads). The @ts-expect-error lines make the check fail if the declarations stop rejecting them.
import { exactMatch, f1Score, type RewardFn, type Tool } from 'arbor/env';

export const sampleTool: Tool = {
  name: 'lookup',
  description: 'Look a word up.',
  parameters: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
  async execute(args, ctx) {
    if (ctx.signal.aborted) return { content: 'cancelled', success: false };
    return { content: String(args.word).toUpperCase(), success: true, metadata: { episodeKeys: Object.keys(ctx.episode).length } };
  },
};

export const sampleReward: RewardFn = (e) =>
  exactMatch(e.answer ?? '', e.golds) + 0.5 * f1Score(e.answer ?? '', e.golds) - 0.1 * e.toolErrors + (e.formatOk ? 0 : -1);
// The whole episode: the task's meta, every call's arguments and result; per-call step rewards.
export const sampleEpisodeReward: RewardFn = (e) => {
  const calls = e.history.flatMap((t) => t.calls);
  const usedBoth = new Set(calls.filter((c) => c.success).map((c) => c.name)).size >= 2;
  return {
    reward: exactMatch(e.answer ?? '', e.golds),
    components: { used_both: usedBoth ? 1 : 0, level: Number(e.task.meta?.level ?? 0) },
    steps: calls.map((c) => (c.success ? 0.1 : -0.1)),
  };
};

// @ts-expect-error a tool must return { content, success }
export const badTool: Tool = { name: 'x', description: '', parameters: {}, execute: () => 'text' };
// @ts-expect-error a reward returns a number or { reward, components?, steps? }
export const badReward: RewardFn = (e) => e.answer;
// @ts-expect-error steps are numbers
export const badSteps: RewardFn = () => ({ reward: 1, steps: ['a'] });
// @ts-expect-error the summary has no such field
export const badField: RewardFn = (e) => e.score;
