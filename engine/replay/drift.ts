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
 *
 * An external agent's trajectory (engine/openai) also carries the drift its endpoint recorded when
 * the agent sent its conversation back (meta.drift): 'template', a sampled turn the chat template
 * re-renders to other ids (the trajectory kept the sampled ids), and 'altered', an assistant turn
 * the agent changed (the trajectory holds the changed text's ids, not the sampled ones). Each turn
 * of a trajectory re-renders to itself in both cases, so `recordedDrift` places them on the stored
 * turn that holds their position.
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
  /**
   * Set for drift the OpenAI-compatible endpoint recorded (not found by re-rendering the turn):
   * then `stored` is the assistant turn as the model sampled it, `rendered` as the request's
   * messages render it; `message` is that turn's index in the request, `position` its token index.
   */
  endpoint?: { kind: 'template' | 'altered'; message: number; position: number };
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

/** Drift as the OpenAI-compatible endpoint records it (engine/openai/memory.ts `Drift`). */
export interface RecordedDriftInput {
  kind: 'template' | 'altered';
  /** Index of the assistant message in the request's messages. */
  turn: number;
  /** First differing position in the request's prompt ids (the trajectory's token index). */
  position: number;
  sampled: number[];
  rendered: number[];
}

/** The endpoint's recorded drift on the stored turns (the turn holding each position; the last turn past the end). */
export function recordedDrift(turns: { role: string; tokenIds: ArrayLike<number> }[], recorded: RecordedDriftInput[]): DriftedTurn[] {
  const out: DriftedTurn[] = [];
  for (const d of recorded) {
    let at = 0;
    let turn = turns.length - 1;
    for (let i = 0; i < turns.length; i++) {
      at += turns[i]!.tokenIds.length;
      if (d.position < at) {
        turn = i;
        break;
      }
    }
    if (turn < 0) continue;
    out.push({
      turn,
      role: turns[turn]!.role,
      stored: d.sampled.slice(),
      rendered: d.rendered.slice(),
      firstDiff: Math.max(0, firstDifference(d.sampled, d.rendered)),
      endpoint: { kind: d.kind, message: d.turn, position: d.position },
    });
  }
  return out;
}

/** Drift records in a trajectory's stored metadata (outcome.meta.drift), validated loosely: malformed entries are skipped. */
export function recordedDriftOf(meta: unknown): RecordedDriftInput[] {
  const list = (meta as { drift?: unknown } | undefined)?.drift;
  if (!Array.isArray(list)) return [];
  const ids = (x: unknown): x is number[] => Array.isArray(x) && x.every((v) => Number.isInteger(v));
  return list.filter(
    (d): d is RecordedDriftInput =>
      !!d && (d.kind === 'template' || d.kind === 'altered') && Number.isInteger(d.turn) && Number.isInteger(d.position) && ids(d.sampled) && ids(d.rendered),
  );
}
