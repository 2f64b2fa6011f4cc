import { memo } from 'react';
import type { TurnView } from '../../../api/types';
import { channelValue, heatColor, type Channel } from '../../../lib/heat';

/** A slice of a turn's tokens coloured by the channel; hover handled by the parent via data attributes. */
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
