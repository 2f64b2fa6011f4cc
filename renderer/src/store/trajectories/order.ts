// How a step's trajectories are listed and walked: pure functions over the stored summaries,
// shared by the slices of this folder and the views.
import type { TrajectorySummary } from '../../api/types';

export interface TrajFilter {
  minReward?: number;
  maxReward?: number;
  errorsOnly: boolean;
  task: string;
}

/** How the step's list is ordered: as stored (group, sample), or by |advantage|, clipped share or KL, largest first. */
export type TrajSort = 'order' | 'abs-advantage' | 'clip-share' | 'kl';

/** A position of the keyboard token cursor: turn index and token index in it. */
export interface TokenCursor {
  turn: number;
  tok: number;
}

/** The list in the chosen order (a stable sort: ties keep group, sample order). */
export function sortTrajectories(list: TrajectorySummary[], by: TrajSort): TrajectorySummary[] {
  const base = [...list].sort((a, b) => a.group - b.group || a.sample - b.sample);
  const key = (t: TrajectorySummary): number =>
    by === 'abs-advantage' ? Math.abs(t.advantage ?? 0) : by === 'clip-share' ? (t.clipShare ?? -1) : by === 'kl' ? Math.abs(t.klMean ?? 0) : 0;
  return by === 'order' ? base : base.sort((a, b) => key(b) - key(a));
}

/** `step` when stored, else the last stored step before it (else the first one after it); null when none is stored. */
export function nearestStep(steps: number[], step: number): number | null {
  if (steps.includes(step)) return step;
  const before = steps.filter((s) => s < step && s >= 0);
  if (before.length) return before[before.length - 1]!;
  return steps.find((s) => s > step) ?? null;
}

/** The trajectory list order that shows a charted metric's extremes first ('order' when none fits). */
export function sortForMetric(key: string): TrajSort {
  const k = key.toLowerCase();
  if (/kl/.test(k)) return 'kl';
  if (/clip/.test(k)) return 'clip-share';
  if (/advantage/.test(k)) return 'abs-advantage';
  return 'order';
}

/** The samples of the same prompt (GRPO group) as `t`, in sample order. */
export function siblingsOf(list: TrajectorySummary[], t: { step: number; group: number }): TrajectorySummary[] {
  return list.filter((x) => x.step === t.step && x.group === t.group).sort((a, b) => a.sample - b.sample);
}
