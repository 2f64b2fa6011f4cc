import { useEffect } from 'react';
import { useArborStore } from '../../store/react';

/** Keyboard map of the replay view (ignored while typing in an input). */
export function useReplayKeys(enabled: boolean) {
  const store = useArborStore();
  useEffect(() => {
    if (!enabled) return;
    const onKey = (e: KeyboardEvent) => {
      const el = e.target as HTMLElement | null;
      if (el && (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT' || el.isContentEditable)) return;
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const s = store.getState();
      const a = s.trajActions;
      let handled = true;
      switch (e.key) {
        case 'j':
          a.moveTurn(1);
          break;
        case 'k':
          a.moveTurn(-1);
          break;
        case 'ArrowDown':
          void a.moveSample(1);
          break;
        case 'ArrowUp':
          void a.moveSample(-1);
          break;
        case ']':
          void a.moveSibling(1);
          break;
        case '[':
          void a.moveSibling(-1);
          break;
        case 'c':
          a.cycleChannel();
          break;
        case 'g':
          void a.setGroupView(!s.traj.groupView);
          break;
        // Branching rollouts: along the branches of the open group's tree.
        case 'ArrowLeft':
          void s.treeActions.openParent();
          break;
        case 'ArrowRight':
          void s.treeActions.openFirstBranch();
          break;
        // The token cursor and its inspector.
        case 'l':
          a.moveCursor(1);
          break;
        case 'h':
          a.moveCursor(-1);
          break;
        case 'a':
          if (s.traj.cursor) void a.loadTopK();
          else handled = false;
          break;
        case 'Escape':
          if (s.traj.cursor) a.setCursor(null);
          else handled = false;
          break;
        case 't': {
          const item = document.querySelector<HTMLElement>('[role="tree"] [role="treeitem"][tabindex="0"]');
          if (item) item.focus();
          else handled = false;
          break;
        }
        default:
          handled = false;
      }
      if (handled) e.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [enabled, store]);
}
