import { useEffect, useRef } from 'react';
import { useArbor, useArborStore } from '../store/react';
import type { ArborState } from '../store';
import { formatCompareHash, formatRunHash, formatTrajHash, parseViewHash, type ViewUrlState } from '../lib/urlState';

/**
 * The view's place in the URL's hash (lib/urlState.ts): the Run view's run, Compare's runs, and the
 * Trajectories view's run, step, trajectory and channel. Opened from it once the engine is connected
 * and on back/forward; written as they change (a new history entry per run or trajectory opened, the
 * channel in place); other views clear it.
 */
export function useViewUrl() {
  const store = useArborStore();
  const connection = useArbor((s) => s.connection.status);
  const applied = useRef(false);
  useEffect(() => {
    const open = (u: ViewUrlState | null) => {
      if (!u) return;
      const s = store.getState();
      if (u.view === 'trajectories') void s.trajListActions.openFromUrl(u);
      else if (u.view === 'run') {
        if (s.run.id !== u.run || s.nav.view !== 'run') void s.runActions.open(u.run);
      } else {
        openCompare(s, u.runs);
      }
    };
    if (connection.state === 'open' && !applied.current) {
      applied.current = true;
      open(parseViewHash(window.location.hash));
    }
    const onPop = () => open(parseViewHash(window.location.hash));
    window.addEventListener('popstate', onPop);
    return () => window.removeEventListener('popstate', onPop);
  }, [connection.state, store]);
  useEffect(() => {
    const off = store.subscribe((s, prev) => {
      const cur = parseViewHash(window.location.hash);
      const write = (hash: string, replace: boolean) => {
        if (hash === window.location.hash) return;
        const url = `${window.location.pathname}${window.location.search}${hash}`;
        if (replace) window.history.replaceState(null, '', url);
        else window.history.pushState(null, '', url);
      };
      if (s.nav.view === 'run') {
        if (s.run.id && (s.nav.view !== prev.nav.view || s.run.id !== prev.run.id)) write(formatRunHash(s.run.id), cur?.view === 'run' && cur.run === s.run.id);
        return;
      }
      if (s.nav.view === 'compare') {
        const ids = s.compare.runs.map((r) => r.id);
        if (ids.length && (s.nav.view !== prev.nav.view || s.compare !== prev.compare)) write(formatCompareHash(ids), cur?.view === 'compare');
        return;
      }
      if (s.nav.view !== 'trajectories') {
        // A view with no URL state: the URL no longer names one (a reload opens where the user is).
        if (s.nav.view !== prev.nav.view && cur) window.history.replaceState(null, '', `${window.location.pathname}${window.location.search}`);
        return;
      }
      const { trajList: l, traj: t } = s;
      if (!l.runId) return;
      if (
        l.runId === prev.trajList.runId &&
        l.step === prev.trajList.step &&
        t.current?.id === prev.traj.current?.id &&
        t.channel === prev.traj.channel &&
        s.nav.view === prev.nav.view
      )
        return;
      // While a trajectory loads, wait for it (the URL names a trajectory, not "loading").
      if (!t.current && l.items.length) return;
      const hash = formatTrajHash({
        run: l.runId,
        ...(l.step != null ? { step: l.step } : {}),
        ...(t.current ? { sample: t.current.id } : {}),
        channel: t.channel,
      });
      write(hash, cur?.view === 'trajectories' && cur.run === l.runId && cur.sample === t.current?.id && cur.step === (l.step ?? undefined));
    });
    return off;
  }, [store]);
}

/** Open Compare on these runs (from the URL). */
function openCompare(s: ArborState, ids: string[]) {
  for (const id of ids) if (!s.runList.compareIds.includes(id)) s.runListActions.toggleCompare(id);
  void s.compareActions.load(ids);
  s.navActions.go('compare');
}
