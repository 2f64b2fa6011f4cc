// An LLM judge's record as the trajectory stored it (outcome.judge), read for the judge panel and badge.

/** The stored shape of one request (engine/env/judge.ts JudgeCall). */
export interface JudgeCallView {
  kind: 'score' | 'rank' | 'rank-reversed';
  order: number[];
  system: string;
  prompt: string;
  answer: string | null;
  scores?: number[];
  explanations?: string[];
  error?: string;
  attempts: number;
  cached: boolean;
  tokensIn: number;
  tokensOut: number;
  seconds: number;
}

/** The stored judgement of one trajectory (engine/env/judge.ts JudgeRecord). */
export interface JudgeView {
  mode: 'score' | 'rank';
  model: string;
  score?: number;
  rank?: number;
  of?: number;
  failed?: string;
  agreement?: number;
  calls?: JudgeCallView[];
}

export function judgeOf(t: { outcomeData: unknown }): JudgeView | undefined {
  const j = (t.outcomeData as { judge?: unknown } | null)?.judge;
  return j && typeof j === 'object' ? (j as JudgeView) : undefined;
}
