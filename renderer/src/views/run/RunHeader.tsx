import type { RunDetail } from '../../api/types';
import { RunControls } from '../../components/RunControls';
import { RunProgress } from './RunProgress';
import { ExportButton } from './ExportButton';

/** The run's name, status, progress and tags, and what can be done with it: pause, resume, stop, fork, its trajectories, export. */
export function RunHeader({ run, onFork }: { run: RunDetail; onFork: () => void }) {
  return (
    <div className="toolbar">
      <h2>{run.name}</h2>
      <span className={`status-pill status-${run.status}`} data-testid="run-status">
        {run.status}
      </span>
      <span className="muted mono">{run.id}</span>
      <RunProgress />
      {run.tags.map((t) => (
        <span key={t} className="tag">
          {t}
        </span>
      ))}
      <span className="grow" />
      <RunControls run={run} onFork={onFork} />
      <ExportButton />
    </div>
  );
}
