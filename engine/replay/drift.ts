/**
 * Retokenisation drift: the token ids a trajectory holds differ from what its text gives when
 * rendered again with the tokenizer (and chat template) — the bug behind TRL #5224, verl #6719,
 * ART #726: a trainer that re-encodes the text trains on ids the model never sampled (a BPE
 * merge, a space folded into a special token, a template that rewrites history).
 *
 * `detectDrift` is pure: give it each turn's stored ids and its text, and the encoder that
 * re-renders a turn (the tokenizer's encode, or a chat template rendering then encode). A turn
 * drifts when the re-rendered ids differ from the stored ones; the result keeps both sequences
 * and the first position where they part. Arbor's own rollouts never re-encode (token ids are
 * the source of truth, the text is decode(ids)), so theirs show none unless the tokenizer's
 * decode/encode round trip itself is not the identity on what the model sampled.
 */

export interface DriftTurnInput {
  role: string;
  text: string;
  tokenIds: ArrayLike<number>;
}

export interface DriftedTurn {
  /** Index of the turn (stored order; 0 is the prompt). */
  turn: number;
  role: string;
  stored: number[];
  rendered: number[];
  /** First index where the two sequences differ (the shorter length when one is a prefix of the other). */
  firstDiff: number;
}

export interface DriftReport {
  drifted: boolean;
  /** Turns checked (every turn with ids). */
  checked: number;
  turns: DriftedTurn[];
}

export function firstDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/** Compare each turn's stored ids with its text re-rendered by `render` (e.g. the tokenizer's encode). */
export function detectDrift(turns: DriftTurnInput[], render: (text: string, role: string, turn: number) => number[]): DriftReport {
  const out: DriftedTurn[] = [];
  let checked = 0;
  turns.forEach((u, i) => {
    if (u.tokenIds.length === 0) return;
    checked++;
    const rendered = render(u.text, u.role, i);
    const at = firstDifference(u.tokenIds, rendered);
    if (at >= 0) out.push({ turn: i, role: u.role, stored: Array.from(u.tokenIds), rendered, firstDiff: at });
  });
  return { drifted: out.length > 0, checked, turns: out };
}
