import { useEffect, useState, type RefObject } from 'react';
import type { LiveState } from '../../api/types';
import { useArbor } from '../../store/react';

/** The tool's result before the model sees it: edit it, then give it (Ctrl+Enter). */
export function LivePending({ pending, editRef }: { pending: NonNullable<LiveState['pending']>; editRef: RefObject<HTMLTextAreaElement | null> }) {
  const busy = useArbor((s) => s.live.busy);
  const liveStep = useArbor((s) => s.liveActions.step);
  const [edit, setEdit] = useState<string | null>(pending.text ?? null);
  useEffect(() => setEdit(pending.text ?? null), [pending.text]);
  const give = () => void liveStep('observation', edit !== null && edit !== pending.text ? { text: edit } : {});
  return (
    <div className="turn" data-testid="live-pending">
      <div className="turn-head">
        <span className="turn-role tool">tool result</span>
        {pending.calls.map((c, i) => (
          <span key={i} className="mono">
            {c.name}({JSON.stringify(c.args)}){c.error ? ` error: ${c.error}` : ''}
          </span>
        ))}
        <span className="muted">the model has not seen it yet: edit it, then give it (Ctrl+Enter)</span>
      </div>
      <textarea
        ref={editRef}
        aria-label="the tool's result, before the model sees it"
        rows={3}
        style={{ width: '100%' }}
        value={edit ?? ''}
        onChange={(e) => setEdit(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            give();
          } else if (e.key === 'Escape') (e.target as HTMLElement).blur();
        }}
        data-testid="live-observation"
      />
      <button onClick={give} disabled={busy} data-testid="live-give">
        Give it to the model
      </button>
    </div>
  );
}
