import type { TrajectoryView } from '../../api/types';
import type { Channel } from '../../lib/heat';
import { ForkIcon } from './turns/ForkIcon';
import { TokenSpan } from './turns/TokenSpan';
import { ToolCalls } from './turns/ToolCalls';
import { TurnHead } from './turns/TurnHead';
import { JudgeBadge } from './judge/JudgeBadge';
import { judgeOf } from './judge/judge';

/**
 * One sample of the group view: its head (reward, advantage — the reward's distance from the group
 * mean where none was stored —, judge, branch) and its turns from where it leaves the shared
 * prefix, the first divergent token marked.
 */
export function GroupColumn(p: {
  g: TrajectoryView;
  left: number;
  width: number;
  /** Tokens every sample of the group shares (collapsed above the columns). */
  prefix: number;
  /** The group's mean reward. */
  mean: number;
  open: boolean;
  odd: boolean;
  channel: Channel;
  scale: number;
  words: boolean;
  onOpen: () => void;
}) {
  const { g, prefix } = p;
  const adv = g.advantage ?? g.reward - p.mean;
  let offset = 0;
  return (
    <div
      className={`group-col ${p.open ? 'sel' : ''}${p.odd ? ' odd' : ''}`}
      onClick={p.onOpen}
      onKeyDown={(e) => e.key === 'Enter' && p.onOpen()}
      tabIndex={0}
      role="group"
      aria-label={`sample ${g.sample}, reward ${g.reward.toFixed(3)}`}
      data-testid="group-col"
      style={{ position: 'absolute', top: 0, left: p.left, width: p.width, height: '100%', overflowY: 'auto' }}
    >
      <div className="turn-head">
        <b>sample {g.sample}</b>
        <span>
          reward <b className="mono">{g.reward.toFixed(3)}</b>
        </span>
        <span>
          adv{' '}
          <b className="mono" style={{ color: adv >= 0 ? 'var(--ok)' : 'var(--err)' }}>
            {adv.toFixed(3)}
          </b>
        </span>
        {g.outcome ? <span className="tag">{g.outcome}</span> : null}
        {judgeOf(g) ? <JudgeBadge judge={judgeOf(g)!} /> : null}
        {g.branch ? (
          <span
            title={`branched from sample ${g.branch.parent} after turn ${g.branch.turn} (entropy ${g.branch.entropy.toFixed(3)}, ΔH ${g.branch.deltaH.toFixed(3)})`}
          >
            <span className="branch-mark fork">
              <ForkIcon />
            </span>{' '}
            from {g.branch.parent}
          </span>
        ) : null}
      </div>
      <div className="group-prefix">⋯ {prefix} shared tokens</div>
      {g.turnsData.map((t, i) => {
        const start = offset;
        offset += t.tokenIds.length;
        if (offset <= prefix && t.tokenIds.length > 0) return null;
        const from = Math.max(0, prefix - start);
        return (
          <div key={i} className="turn">
            <TurnHead turn={t} index={i} processRewards={g.signal?.processRewards} />
            {t.tokens.length ? (
              <TokenSpan
                turn={t}
                turnIndex={i}
                from={from}
                to={Math.min(t.tokens.length, from + 2048)}
                channel={p.channel}
                scale={p.scale}
                words={p.words}
                diverge={start <= prefix && prefix < offset ? prefix - start : -1}
              />
            ) : (
              <div className="tokens">{t.text}</div>
            )}
            {t.toolCalls.length ? <ToolCalls calls={t.toolCalls} /> : null}
          </div>
        );
      })}
    </div>
  );
}
