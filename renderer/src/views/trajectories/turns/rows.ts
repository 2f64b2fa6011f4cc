// A trajectory as rows, one renderer per row kind (a turn's head, a slice of its tokens, its text,
// its tool calls). Long turns are split into rows of TOKENS_PER_ROW tokens so the trajectory list
// can be virtualised at row granularity: a 10k-token model turn is ~20 rows, only the visible ones render.
import type { TrajectoryView } from '../../../api/types';

export const TOKENS_PER_ROW = 512;

export type Row =
  | { kind: 'head'; turn: number }
  | { kind: 'tokens'; turn: number; from: number; to: number }
  | { kind: 'text'; turn: number }
  | { kind: 'calls'; turn: number };

export function buildRows(t: TrajectoryView): Row[] {
  const rows: Row[] = [];
  t.turnsData.forEach((turn, i) => {
    rows.push({ kind: 'head', turn: i });
    if (turn.tokens.length > 0) {
      for (let from = 0; from < turn.tokens.length; from += TOKENS_PER_ROW)
        rows.push({ kind: 'tokens', turn: i, from, to: Math.min(turn.tokens.length, from + TOKENS_PER_ROW) });
    } else if (turn.text) rows.push({ kind: 'text', turn: i });
    if (turn.toolCalls.length) rows.push({ kind: 'calls', turn: i });
  });
  return rows;
}

/**
 * Whole-word tokenizers (the built-in tiny models) decode each token without its separating
 * space, so their tokens are drawn apart; BPE tokens carry their own spaces and are drawn as is.
 */
export function isWordLevel(t: TrajectoryView): boolean {
  let n = 0;
  for (const turn of t.turnsData)
    for (const s of turn.tokens) {
      if (/\s/.test(s)) return false;
      n++;
    }
  return n > 1;
}
