import type { RunSummary } from '../api/types';
import { useArbor } from '../store/react';
import { isSftWarmStart } from '../lib/lineage';

/**
 * What can be done with a run (the runs table's row and the Run view's header): pause a running one,
 * resume a paused or ended one, stop a live one, fork it (`onFork` opens the form), open its
 * trajectories. An SFT warm start's own run does none but stop: its RL run resumes and forks it, and it stores no trajectories.
 */
export function RunControls({ run, onFork }: { run: RunSummary; onFork: () => void }) {
  const stopRun = useArbor((s) => s.runListActions.stop);
  const pauseRun = useArbor((s) => s.runListActions.pause);
  const resumeRun = useArbor((s) => s.runListActions.resume);
  const openTrajectories = useArbor((s) => s.trajListActions.open);
  const live = run.status === 'running' || run.status === 'queued' || run.status === 'paused';
  const sftRun = isSftWarmStart(run);
  return (
    <>
      {run.status === 'running' ? (
        <button onClick={() => void pauseRun(run.id)} title="hold the run before its next step">
          Pause
        </button>
      ) : null}
      {run.status === 'paused' ? <button onClick={() => void resumeRun(run.id)}>Resume</button> : null}
      {live ? (
        <button onClick={() => void stopRun(run.id)}>Stop</button>
      ) : (
        <button
          onClick={() => void resumeRun(run.id)}
          disabled={run.status === 'completed' || sftRun}
          title={sftRun ? 'an SFT warm start continues when its RL run is resumed' : undefined}
        >
          Resume
        </button>
      )}
      <button
        onClick={onFork}
        disabled={sftRun}
        title={sftRun ? 'fork the RL run that began from this SFT warm start' : "a new run from this one's config (edit it first)"}
      >
        Fork…
      </button>
      <button onClick={() => void openTrajectories(run.id)} disabled={sftRun} title={sftRun ? 'SFT stores no trajectories' : undefined}>
        Trajectories
      </button>
    </>
  );
}
