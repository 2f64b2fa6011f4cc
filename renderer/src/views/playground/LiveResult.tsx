import type { LiveState } from '../../api/types';
import { useArbor } from '../../store/react';

/** The ended episode: reward, answer against the golds, why it ended, and the stored trajectory (opens in the replay). */
export function LiveResult({ result }: { result: NonNullable<LiveState['result']> }) {
  const openLiveInReplay = useArbor((s) => s.liveActions.openInReplay);
  return (
    <div className="panel verdict" data-testid="live-result">
      reward <b className="mono">{result.reward.toFixed(4)}</b> · answer {result.answer === undefined ? '—' : JSON.stringify(result.answer)}
      {result.golds?.length ? ` · gold ${result.golds.map((g) => JSON.stringify(g)).join(' / ')}` : ''} · {result.reason}
      {result.truncated ? ' (truncated)' : ''} · stored as trajectory{' '}
      <a
        href="#"
        onClick={(e) => {
          e.preventDefault();
          void openLiveInReplay();
        }}
        data-testid="live-open"
      >
        {result.trajectoryId}
      </a>
    </div>
  );
}
