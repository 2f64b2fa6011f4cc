/**
 * What-if replay, the pure part: where a fork leaves a stored trajectory and what it appends.
 *
 * A stored trajectory is a list of turns (the prompt is turn 0, then model and tool turns, as the
 * store splits them at loss-mask changes). A fork at turn K keeps the stored token ids before the
 * fork point exactly (never re-encoded) and appends an optional edit, tokenised:
 *  - a tool (observation) turn K with `observation`: turns 0..K-1 kept, then the observation with
 *    the tool's result replaced by the edit (or the whole turn, when the result is not found in
 *    the turn's text), tokenised as the environment tokenises observations (encode of the text);
 *  - a tool turn K without an edit: turns 0..K kept, the model samples from there;
 *  - a model turn K at token T (default 0) with `text`: turns 0..K-1 and the turn's first T ids
 *    kept, the edit's ids appended, and the model continues that same turn;
 *  - the prompt (K = 0) can be resampled from but not edited.
 */

export interface StoredTurnLike {
  role: string;
  text: string;
  tokenIds: number[];
  tokens: string[];
  logprob: number[] | null;
  entropy: number[] | null;
  lossMask: number[] | null;
  toolCalls: unknown[];
  stepReward: number | null;
}

export interface ForkEdit {
  kind: 'observation' | 'text';
  /** The text the user gave. */
  text: string;
  /** The text that was tokenised (the observation with the result replaced, or the text itself). */
  rendered: string;
  ids: number[];
  /** observation: the tool's result inside the turn was replaced, or the whole turn; text: appended to the kept tokens. */
  replaced: 'result' | 'turn' | 'append';
}

export interface ForkPlan {
  turn: number;
  token: number | null;
  /** Turns copied whole from the parent. */
  keep: StoredTurnLike[];
  /** A model turn the fork continues: its first `token` stored ids (null when the fork is at a turn boundary). */
  partial: { role: string; ids: number[]; tokens: string[]; logprob: number[]; entropy: number[] } | null;
  edit: ForkEdit | null;
  /** Every id before sampling starts: kept turns, the partial model turn, the edit. */
  prefixIds: number[];
  /** How many of prefixIds are the parent's (the rest is the edit). */
  sharedTokens: number;
  /** The kept model turns, in order (the environment replays them: tools run again). */
  modelTurns: StoredTurnLike[];
}

export interface ForkRequest {
  /** Stored turn index (0 = the prompt). */
  turn: number;
  /** Token inside a model turn (the ids before it are kept). */
  token?: number;
  observation?: string;
  text?: string;
}

/** Plan a fork; errors name the option that is wrong. */
export function planFork(turns: StoredTurnLike[], req: ForkRequest, encode: (text: string) => number[]): ForkPlan {
  const K = req.turn;
  if (!Number.isInteger(K) || K < 0 || K >= turns.length)
    throw new Error(`turn: the trajectory has turns 0..${turns.length - 1} (0 is the prompt); got ${req.turn}`);
  if (req.observation !== undefined && req.text !== undefined) throw new Error('give either observation (a tool turn) or text (a model turn), not both');
  const at = turns[K]!;
  const isModel = at.role === 'model';
  if (req.token !== undefined) {
    if (!isModel) throw new Error(`token: turn ${K} is a ${at.role} turn; a token position only applies to a model turn`);
    if (!Number.isInteger(req.token) || req.token < 0 || req.token > at.tokenIds.length)
      throw new Error(`token: turn ${K} has ${at.tokenIds.length} tokens; give 0..${at.tokenIds.length} (got ${req.token})`);
  }
  if (isModel && req.observation !== undefined) throw new Error(`observation: turn ${K} is a model turn; edit its text with text (and token)`);
  if (!isModel && req.text !== undefined) throw new Error(`text: turn ${K} is a ${at.role} turn; edit an observation with observation`);
  if (K === 0 && req.observation !== undefined) throw new Error('observation: turn 0 is the prompt, which a replay cannot edit; fork at a tool turn');

  let keep: StoredTurnLike[];
  let partial: ForkPlan['partial'] = null;
  let edit: ForkEdit | null = null;
  if (isModel) {
    keep = turns.slice(0, K);
    const T = req.token ?? 0;
    partial = {
      role: at.role,
      ids: at.tokenIds.slice(0, T),
      tokens: at.tokens.slice(0, T),
      logprob: (at.logprob ?? []).slice(0, T),
      entropy: (at.entropy ?? []).slice(0, T),
    };
    if (req.text !== undefined) edit = { kind: 'text', text: req.text, rendered: req.text, ids: encode(req.text), replaced: 'append' };
  } else if (req.observation !== undefined) {
    keep = turns.slice(0, K);
    const prev = [...keep].reverse().find((u) => u.role === 'model');
    const results = (prev?.toolCalls ?? [])
      .map((c) => (c as { result?: unknown }).result)
      .filter((r): r is string => typeof r === 'string' && r.length > 0 && at.text.includes(r));
    // One tool result found in the observation: it is what the edit replaces (the format's wrapper stays).
    const rendered = results.length === 1 ? at.text.replace(results[0]!, () => req.observation!) : req.observation;
    edit = { kind: 'observation', text: req.observation, rendered, ids: encode(rendered), replaced: results.length === 1 ? 'result' : 'turn' };
    if (edit.ids.length === 0) throw new Error('observation: the edited observation tokenises to no tokens');
  } else keep = turns.slice(0, K + 1);
  const shared = [...keep.flatMap((u) => u.tokenIds), ...(partial?.ids ?? [])];
  return {
    turn: K,
    token: isModel ? (req.token ?? 0) : null,
    keep,
    partial,
    edit,
    prefixIds: [...shared, ...(edit?.ids ?? [])],
    sharedTokens: shared.length,
    modelTurns: keep.filter((u) => u.role === 'model'),
  };
}
