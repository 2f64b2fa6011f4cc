import { useEffect, type RefObject } from 'react';
import { useArborStore } from '../../store/react';

/**
 * The live stepper's keys (outside text fields): s start · n next token · 1–8 force that alternative ·
 * f force a token you type (focuses `forceRef`) · t finish the turn · e edit the tool result (focuses
 * `editRef`) · o give the result to the model as it is · r run to the end.
 */
export function useLiveKeys(checkpoint: string, forceRef: RefObject<HTMLInputElement | null>, editRef: RefObject<HTMLTextAreaElement | null>) {
  const store = useArborStore();
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const el = e.target as HTMLElement | null;
      if (el && (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT')) return;
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const s = store.getState();
      const l = s.live.session;
      let handled = true;
      if (e.key === 's' && checkpoint) void s.liveActions.start(checkpoint);
      else if (!l || l.phase === 'done') handled = false;
      else if (l.phase === 'model' && e.key === 'n') void s.liveActions.step('token');
      else if (l.phase === 'model' && /^[1-8]$/.test(e.key) && l.next?.[Number(e.key) - 1])
        void s.liveActions.step('force', { tokenId: l.next[Number(e.key) - 1]!.id });
      else if (l.phase === 'model' && e.key === 'f') forceRef.current?.focus();
      else if (l.phase === 'model' && e.key === 't') void s.liveActions.step('turn');
      else if (l.phase === 'tool' && e.key === 'e') editRef.current?.focus();
      else if (l.phase === 'tool' && e.key === 'o') void s.liveActions.step('observation');
      else if (e.key === 'r') void s.liveActions.step('finish');
      else handled = false;
      if (handled) e.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [store, checkpoint, forceRef, editRef]);
}
