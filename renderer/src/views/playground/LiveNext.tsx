import { useState, type RefObject } from 'react';
import type { LiveState } from '../../api/types';
import { useArbor } from '../../store/react';

/** Paused in a model turn: the next token's top-k (click one to force it), a token to type and force, and the step buttons. */
export function LiveNext({ live, next, forceRef }: { live: LiveState; next: NonNullable<LiveState['next']>; forceRef: RefObject<HTMLInputElement | null> }) {
  const busy = useArbor((s) => s.live.busy);
  const liveStep = useArbor((s) => s.liveActions.step);
  const [force, setForce] = useState('');
  return (
    <div className="inspector" data-testid="live-next">
      <div className="muted">next token ({live.temperature === 0 ? 'greedy: the first; probabilities at T 1' : `probabilities at T ${live.temperature}`}):</div>
      <table>
        <tbody>
          {next.map((c, i) => (
            <tr key={c.id} data-testid="live-alt" onClick={() => void liveStep('force', { tokenId: c.id })} style={{ cursor: 'pointer' }}>
              <td className="kbd">{i + 1}</td>
              <td className="mono">{JSON.stringify(c.token)}</td>
              <td className="mono" data-testid="live-alt-prob">
                {c.prob.toFixed(4)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <input
        ref={forceRef}
        aria-label="force a token"
        value={force}
        placeholder="force a token (type it, Enter)"
        onChange={(e) => setForce(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && force) {
            e.preventDefault();
            void liveStep('force', { text: force });
            setForce('');
            (e.target as HTMLElement).blur();
          } else if (e.key === 'Escape') (e.target as HTMLElement).blur();
        }}
        data-testid="live-force"
      />
      <div style={{ display: 'flex', gap: 4, marginTop: 4 }}>
        <button onClick={() => void liveStep('token')} disabled={busy} data-testid="live-token">
          Next token
        </button>
        <button onClick={() => void liveStep('turn')} disabled={busy} data-testid="live-turn-end">
          Finish turn
        </button>
        <button onClick={() => void liveStep('finish')} disabled={busy} data-testid="live-finish">
          To the end
        </button>
      </div>
    </div>
  );
}
