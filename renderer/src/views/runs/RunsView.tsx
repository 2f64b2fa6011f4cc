import { useState } from 'react';
import { useArbor } from '../../store/react';
import { RunsTable } from './RunsTable';
import { LaunchDialog } from '../../components/launch/LaunchDialog';
import { ForkDialog } from '../../components/launch/ForkDialog';

/** Every run of the workspace: filter, sort, select to compare, start a new one or fork one. */
export function RunsView() {
  const filter = useArbor((s) => s.runList.filter);
  const setFilter = useArbor((s) => s.runListActions.setFilter);
  const compareIds = useArbor((s) => s.runList.compareIds);
  const go = useArbor((s) => s.navActions.go);
  const loadCompare = useArbor((s) => s.compareActions.load);
  const [launching, setLaunching] = useState(false);
  const [forking, setForking] = useState<string | null>(null);
  return (
    <div className="view" data-testid="view-runs">
      <div className="toolbar">
        <h2>Runs</h2>
        <input
          aria-label="filter runs"
          placeholder="filter: words, tags, reward/mean>0.5"
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
          style={{ width: 300 }}
          data-testid="run-filter"
        />
        <span className="grow" />
        <button
          data-testid="compare-selected"
          disabled={compareIds.length < 2}
          onClick={() => {
            void loadCompare(compareIds);
            go('compare');
          }}
        >
          Compare {compareIds.length || ''}
        </button>
        <button className="primary" onClick={() => setLaunching(true)} data-testid="new-run">
          New run…
        </button>
      </div>
      <RunsTable onFork={setForking} />
      {launching ? <LaunchDialog onClose={() => setLaunching(false)} /> : null}
      {forking ? <ForkDialog runId={forking} onClose={() => setForking(null)} /> : null}
    </div>
  );
}
