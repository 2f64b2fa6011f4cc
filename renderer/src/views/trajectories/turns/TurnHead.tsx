// A turn's head row: its role, reward and advantage, where it came from (a branch's shared turns),
// its retokenisation drift. The turn renderers (one per row kind, as Inspect's viewer has one per
// event type) are this folder's files; rows.ts cuts a trajectory into their rows.
import type { TurnView } from '../../../api/types';
import type { TurnOrigin } from '../../../lib/branchTree';
import { ForkIcon } from './ForkIcon';
import { DriftNote, type TurnDrift } from './DriftNote';
import { TurnHeadLine } from './TurnHeadLine';

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
