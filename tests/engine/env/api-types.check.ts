// Compile-time check (run by `npm run typecheck`, the first step of `npm test`): the editor's
// 'arbor/env' declarations (resources/types/arbor-env.d.ts) are mutually assignable with the
// engine's own types, so the types Monaco shows cannot drift from what runs.
import type * as D from 'arbor/env';
import type * as T from '../../../engine/env/tool';
import type * as R from '../../../engine/env/rewards';
import type * as E from '../../../engine/env/toolenv';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Check<X extends true> = X;

export type ApiTypesInStep = [
  Check<Same<D.Tool, T.Tool>>,
  Check<Same<D.ToolResult, T.ToolResult>>,
  Check<Same<D.ToolContext, T.ToolContext>>,
  Check<Same<D.EpisodeSummary, R.EpisodeSummary>>,
  Check<Same<D.RewardFn, R.RewardFn>>,
  Check<Same<D.EnvTask, E.EnvTask>>,
  Check<Same<D.StepRecord, E.StepRecord>>,
  Check<Same<typeof D.normalizeAnswer, typeof R.normalizeAnswer>>,
  Check<Same<typeof D.exactMatch, typeof R.exactMatch>>,
  Check<Same<typeof D.substringMatch, typeof R.substringMatch>>,
  Check<Same<typeof D.f1Score, typeof R.f1Score>>,
];
