import type { LiveState } from '../../api/types';

/** The episode's turns so far, token by token, the forced tokens outlined. */
export function LiveTurns({ live }: { live: LiveState }) {
  // Whole-word tokenizers (the tiny models) decode tokens without their spaces: draw them apart.
  const wordLevel = live.turns.every((u) => u.tokens.every((t) => !/\s/.test(t)));
  return (
    <>
      {live.turns.map((u, i) => (
        <div key={i} className="turn" data-testid="live-turn" data-role={u.role}>
          <div className="turn-head">
            <span className={`turn-role ${u.role}`}>{u.role}</span>
            <span>{u.ids.length} tokens</span>
            {u.edited ? <span className="flag">edited by you</span> : null}
            {u.forced.length ? <span className="flag">{u.forced.length} forced</span> : null}
          </div>
          <div className="tokens">
            {u.tokens.map((t, j) => (
              <span key={j} className={`t${u.forced.includes(j) ? ' forced' : ''}`} data-testid={u.forced.includes(j) ? 'live-forced' : undefined}>
                {t}
                {wordLevel ? ' ' : ''}
              </span>
            ))}
          </div>
        </div>
      ))}
    </>
  );
}
