import type { RunSummary } from '../../api/types';
import { isSftWarmStart } from '../../lib/lineage';

/** A run's relation to its parent in the runs table: the SFT warm start it began from, or a fork's origin; an SFT warm start says so. */
export function Lineage({ run, runs, open }: { run: RunSummary; runs: RunSummary[]; open: (id: string) => void }) {
  const parent = run.parentId ? runs.find((x) => x.id === run.parentId) : undefined;
  const link = (r: RunSummary) => (
    <a href="#" onClick={(e) => (e.preventDefault(), open(r.id))}>
      {r.name}
    </a>
  );
  return (
    <>
      {isSftWarmStart(run) ? (
        <span className="muted" data-testid="run-row-sft">
          {' '}
          · SFT warm start
        </span>
      ) : null}
      {run.parentId ? (
        <div className="muted" data-testid="run-row-parent">
          {isSftWarmStart(parent) ? 'after SFT ' : 'from '}
          {parent ? link(parent) : <span className="mono">{run.parentId}</span>}
        </div>
      ) : null}
    </>
  );
}
