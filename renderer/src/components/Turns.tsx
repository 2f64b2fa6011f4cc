// One renderer per turn kind (model, tool, env/user), as Inspect's viewer has one per event
// type. Long turns are split into rows of TOKENS_PER_ROW tokens so the trajectory list can be
// virtualised at row granularity: a 10k-token model turn is ~20 rows, only the visible ones render.
import { memo } from 'react';
import type { ToolCallView, Trajectory, TurnView } from '../api/types';
import { channelValue, heatColor, type Channel } from '../lib/heat';
import type { TurnOrigin } from '../lib/branchTree';

export const TOKENS_PER_ROW = 512;

export type Row =
  | { kind: 'head'; turn: number }
  | { kind: 'tokens'; turn: number; from: number; to: number }
  | { kind: 'text'; turn: number }
  | { kind: 'calls'; turn: number };

export function buildRows(t: Trajectory): Row[] {
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

/** A fork (git-branch style) drawn as SVG: the font may have no branch glyph. */
export function ForkIcon({ size = 11 }: { size?: number }) {
  return (
    <svg className="fork-icon" width={size} height={size} viewBox="0 0 16 16" aria-hidden="true" fill="none" stroke="currentColor" strokeWidth={1.7}>
      <circle cx="4" cy="3" r="1.9" />
      <circle cx="4" cy="13" r="1.9" />
      <circle cx="12" cy="4.5" r="1.9" />
      <path d="M4 4.9v6.2M12 6.4c0 3.4-8 2.6-8 4.7" />
    </svg>
  );
}

/** A turn whose stored ids differ from its text re-rendered by the tokenizer (retokenisation drift): both sequences. */
export interface TurnDrift {
  stored: number[];
  rendered: number[];
  firstDiff: number;
  /** Drift the agent endpoint recorded: stored = the assistant turn as sampled, rendered = as the agent's request rendered it. */
  endpoint?: { kind: 'template' | 'altered'; message: number; position: number };
}

export function DriftNote({ drift }: { drift: TurnDrift }) {
  const seq = (ids: number[]) =>
    ids.map((id, i) => (
      <span key={i} className={i === drift.firstDiff ? 'diff' : undefined}>
        {id}{' '}
      </span>
    ));
  return (
    <details className="drift-ids" data-testid="turn-drift">
      <summary>
        <span className="flag">drift</span>{' '}
        {drift.endpoint?.kind === 'altered'
          ? `the agent sent back assistant message ${drift.endpoint.message} changed: its ids differ from the sampled ones from token ${drift.firstDiff}, and this trajectory holds the changed text's ids`
          : drift.endpoint
            ? `the chat template re-renders assistant message ${drift.endpoint.message} to other ids from token ${drift.firstDiff}; this trajectory kept the sampled ids`
            : `the stored ids differ from this turn's text re-rendered by the tokenizer, from token ${drift.firstDiff}`}
      </summary>
      <div data-testid="drift-stored">
        {drift.endpoint ? 'sampled' : 'stored'} ({drift.stored.length}): {seq(drift.stored)}
      </div>
      <div data-testid="drift-rendered">
        {drift.endpoint ? 'as the request rendered it' : 're-rendered'} ({drift.rendered.length}): {seq(drift.rendered)}
      </div>
    </details>
  );
}

/**
 * `processRewards`: whether training used the turns' step rewards (algorithm.process_rewards, kept in
 * the trajectory's signal; undefined for runs stored before it was kept). Only then is a step reward
 * shown as one: otherwise it is the environment's supporting-fact signal, which nothing trained on.
 */
export function TurnHead({
  turn,
  index,
  origin,
  drift,
  processRewards,
  edited,
  forcedCount,
}: {
  turn: TurnView;
  index: number;
  origin?: TurnOrigin;
  drift?: TurnDrift;
  processRewards?: boolean;
  /** What was edited in this turn by hand (lib/steering.ts). */
  edited?: string;
  /** Tokens of this turn the user forced. */
  forcedCount?: number;
}) {
  const masked = turn.lossMask ? turn.lossMask.filter((m) => m === 0).length : 0;
  const point = origin?.branchPoint;
  return (
    <>
      {point ? (
        <div className="branch-point-line" data-testid="branch-point">
          <span className="branch-mark fork">
            <ForkIcon />
          </span>{' '}
          branch point: this sample left sample {point.parent} here
          {origin.splitAt != null ? ` (${origin.splitAt} tokens into this turn)` : ''} · entropy {point.entropy.toFixed(3)} · ΔH {point.deltaH.toFixed(3)} · p{' '}
          {point.probability.toFixed(3)}
        </div>
      ) : null}
      <TurnHeadLine turn={turn} index={index} masked={masked} origin={origin} processRewards={processRewards} />
      {edited || forcedCount ? (
        <div className="steer-note" data-testid="turn-steered">
          {edited ? <span data-testid="turn-edited">✎ {edited}</span> : null}
          {edited && forcedCount ? ' · ' : null}
          {forcedCount ? (
            <span data-testid="turn-forced">
              {forcedCount} forced token{forcedCount > 1 ? 's' : ''} (outlined)
            </span>
          ) : null}
        </div>
      ) : null}
      {drift ? <DriftNote drift={drift} /> : null}
    </>
  );
}

function TurnHeadLine({
  turn,
  index,
  masked,
  origin,
  processRewards,
}: {
  turn: TurnView;
  index: number;
  masked: number;
  origin?: TurnOrigin;
  processRewards?: boolean;
}) {
  return (
    <div className="turn-head">
      <span className={`turn-role ${turn.role}`}>{turn.role}</span>
      <span>turn {index + 1}</span>
      <span>{turn.tokenIds.length} tokens</span>
      {masked ? <span>{masked} masked</span> : null}
      {turn.stepReward != null && processRewards ? (
        <span title="step (process) reward: trained on (algorithm.process_rewards)" data-testid="step-reward">
          step reward <b style={{ color: turn.stepReward >= 0 ? 'var(--ok)' : 'var(--err)' }}>{turn.stepReward.toFixed(3)}</b>
        </span>
      ) : turn.stepReward ? (
        <span
          className="muted"
          data-testid="step-signal"
          title={
            processRewards === false
              ? 'the environment’s supporting-fact signal for this turn; not trained on (algorithm.process_rewards is off): only the outcome reward counts'
              : 'the environment’s supporting-fact signal for this turn; this run did not record whether algorithm.process_rewards used it'
          }
        >
          supporting-fact signal {turn.stepReward.toFixed(3)}
          {processRewards === false ? ' (not trained on)' : ''}
        </span>
      ) : null}
      {turn.toolCalls.length ? (
        <span>
          {turn.toolCalls.length} tool call{turn.toolCalls.length > 1 ? 's' : ''}
        </span>
      ) : null}
      {origin?.shared ? (
        <span
          className="tag"
          title={`shared prefix: these tokens were generated once, by sample ${origin.from}, and reused by the branch`}
          data-testid="turn-shared"
        >
          shared · from sample {origin.from}
        </span>
      ) : null}
    </div>
  );
}

/** A slice of a turn's tokens coloured by the channel; hover handled by the parent via data attributes. */
/**
 * Whole-word tokenizers (the built-in tiny models) decode each token without its separating
 * space, so their tokens are drawn apart; BPE tokens carry their own spaces and are drawn as is.
 */
export function isWordLevel(t: Trajectory): boolean {
  let n = 0;
  for (const turn of t.turnsData)
    for (const s of turn.tokens) {
      if (/\s/.test(s)) return false;
      n++;
    }
  return n > 1;
}

export const TokenSpan = memo(function TokenSpan({
  turn,
  turnIndex,
  from,
  to,
  channel,
  scale,
  words = false,
  cursor = -1,
  diverge = -1,
  forced,
}: {
  turn: TurnView;
  turnIndex: number;
  from: number;
  to: number;
  channel: Channel;
  scale: number;
  words?: boolean;
  /** Index of the token under the keyboard cursor (-1: none in this slice). */
  cursor?: number;
  /** Group view: the first token where this sample leaves the others. */
  diverge?: number;
  /** Positions of tokens the user forced in a live rollout (outlined, titled). */
  forced?: Set<number>;
}) {
  const spans = [];
  for (let i = from; i < to; i++) {
    const v = channelValue(turn, channel, i);
    const masked = turn.lossMask ? turn.lossMask[i] === 0 : false;
    const isForced = forced?.has(i) ?? false;
    const cls = `t${masked ? ' masked' : ''}${i === cursor ? ' cursor' : ''}${i === diverge ? ' diverge' : ''}${isForced ? ' forced' : ''}`;
    spans.push(
      <span
        key={i}
        className={cls}
        data-turn={turnIndex}
        data-tok={i}
        data-value={v ?? undefined}
        data-forced={isForced ? 'true' : undefined}
        title={isForced ? 'forced by the user in a live rollout (not sampled)' : undefined}
        data-testid={i === cursor ? 'token-cursor' : i === diverge ? 'token-diverge' : undefined}
        style={{ background: heatColor(channel, v, scale) || undefined }}
      >
        {turn.tokens[i]}
      </span>,
    );
    // Whole-word tokens carry no spaces: a real space between them, so copied text keeps its words apart.
    if (words && i < to - 1) spans.push(' ');
  }
  return <div className={words ? 'tokens words' : 'tokens'}>{spans}</div>;
});

export function ToolCalls({ calls, staleNote }: { calls: ToolCallView[]; /** the results shown were replaced later (a what-if edit) */ staleNote?: string }) {
  return (
    <>
      {staleNote ? (
        <div className="steer-note" data-testid="toolcall-replaced">
          ✎ {staleNote}
        </div>
      ) : null}
      {calls.map((c, i) => (
        <div key={i} className="toolcall" data-testid="tool-call">
          <span className="name">{c.name}</span>(<span>{JSON.stringify(c.args)}</span>)
          {c.latencyMs != null ? <span className="muted"> · {c.latencyMs.toFixed(0)} ms</span> : null}
          {c.derived ? (
            <span className="muted" title="this trajectory was stored without call records; the call is read from the turn's tags">
              {' '}
              · read from the text
            </span>
          ) : null}
          {c.error ? <div className="err">error: {c.error}</div> : null}
          {c.result != null ? <div className="muted">→ {c.result.length > 600 ? c.result.slice(0, 600) + '…' : c.result}</div> : null}
        </div>
      ))}
    </>
  );
}

export function TokenHoverCard({ turn, index, x, y }: { turn: TurnView; index: number; x: number; y: number }) {
  // Tokens the model did not generate (prompt, observations: loss mask 0) have no sampling values.
  const generated = !turn.lossMask || turn.lossMask[index] !== 0;
  const lp = generated ? turn.logprob?.[index] : undefined;
  const ref = generated ? turn.refLogprob?.[index] : undefined;
  const rows: [string, string][] = [
    ['token', JSON.stringify(turn.tokens[index])],
    ['id', String(turn.tokenIds[index] ?? '—')],
    ['logprob', num(lp)],
    ['prob', lp == null ? '—' : Math.exp(lp).toFixed(4)],
    ['entropy', num(generated ? turn.entropy?.[index] : undefined)],
    ['advantage', num(generated ? turn.advantage?.[index] : undefined)],
    ['ref logprob', num(ref)],
    ['kl (lp−ref)', lp == null || ref == null ? '—' : (lp - ref).toFixed(4)],
    ['loss mask', turn.lossMask ? `${turn.lossMask[index]}${generated ? '' : ' (not generated)'}` : '—'],
  ];
  return (
    <div className="hovercard" style={{ left: Math.min(x + 12, window.innerWidth - 220), top: y + 14 }} data-testid="token-card">
      <table>
        <tbody>
          {rows.map(([k, v]) => (
            <tr key={k}>
              <td className="muted">{k}</td>
              <td>{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function num(v: number | null | undefined): string {
  return v == null || !Number.isFinite(v) ? '—' : v.toFixed(4);
}
