import { useEffect, useRef, type CSSProperties } from 'react';
import { useArbor } from '../../store/react';
import { TranscriptEntry } from './TranscriptEntry';

/** The chat so far, kept scrolled to its end as tokens arrive. */
export function Transcript({ style }: { style?: CSSProperties }) {
  const transcript = useArbor((s) => s.playground.transcript);
  const chatting = useArbor((s) => s.playground.chatting);
  const bottom = useRef<HTMLDivElement>(null);
  useEffect(() => {
    bottom.current?.scrollIntoView?.({ block: 'end' });
  }, [transcript]);
  return (
    <div className="chat" data-testid="chat" style={style}>
      {transcript.map((it, i) => (
        <TranscriptEntry key={i} it={it} />
      ))}
      {chatting ? (
        <div className="muted" style={{ fontSize: 12 }}>
          generating…
        </div>
      ) : null}
      <div ref={bottom} />
    </div>
  );
}
