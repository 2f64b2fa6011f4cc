/** The replay's keys (useReplayKeys); the tree's only when the open group branched. */
export function KeyHints({ branched }: { branched: boolean }) {
  return (
    <span className="muted" style={{ fontSize: 11 }}>
      <span className="kbd">j</span>/<span className="kbd">k</span> turns · <span className="kbd">↑</span>/<span className="kbd">↓</span> samples ·{' '}
      <span className="kbd">[</span>/<span className="kbd">]</span> siblings · <span className="kbd">c</span> colour · <span className="kbd">g</span> group ·{' '}
      <span className="kbd">h</span>/<span className="kbd">l</span> token cursor
      {branched ? (
        <>
          {' '}
          · <span className="kbd">←</span>/<span className="kbd">→</span> parent/branch · <span className="kbd">t</span> tree
        </>
      ) : null}
    </span>
  );
}
