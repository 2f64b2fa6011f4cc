import './run.css';
import { useState } from 'react';
import { useArbor } from '../../store/react';
import { isSftWarmStart } from '../../lib/lineage';
import type { Checkpoint } from '../../api/types';
import { useLearning } from './learn/learning';
import { RunSummary } from './summary/RunSummary';
import { ForkDialog } from '../../components/launch/ForkDialog';
import { RunHeader } from './RunHeader';
import { RunNotes } from './RunNotes';
import { RunCharts } from './RunCharts';
import { RunLog } from './RunLog';
import { CheckpointTable } from './CheckpointTable';

const TABS = ['charts', 'config', 'log', 'checkpoints'] as const;

/** One run: its header and actions, notes, summary, and the charts, config, log and checkpoints tabs. */
export function RunView() {
  const run = useArbor((s) => s.run.detail);
  const runId = useArbor((s) => s.run.id);
  const series = useArbor((s) => s.run.series);
  const [forking, setForking] = useState<{ checkpoint?: Checkpoint } | null>(null);
  const [tab, setTab] = useState<(typeof TABS)[number]>('charts');
  const learning = useLearning(runId, run?.step);

  if (!runId)
    return (
      <div className="view">
        <div className="empty">Open a run from the Runs table.</div>
      </div>
    );
  if (!run)
    return (
      <div className="view">
        <div className="empty">Loading run {runId}…</div>
      </div>
    );
  return (
    <div className="view" data-testid="view-run">
      <RunHeader run={run} onFork={() => setForking({})} />
      <RunNotes />
      {run.error ? (
        <div className="error-msg">
          <strong>Run failed:</strong>
          <pre>{run.error}</pre>
        </div>
      ) : null}
      <RunSummary run={run} series={series} learning={learning} />
      <div className="tabs">
        {TABS.map((t) => (
          <button key={t} className={tab === t ? 'active' : ''} onClick={() => setTab(t)} data-testid={`tab-${t}`}>
            {t}
            {t === 'checkpoints' ? ` (${run.checkpoints.length})` : ''}
          </button>
        ))}
      </div>
      {tab === 'charts' ? <RunCharts run={run} learning={learning} /> : null}
      {tab === 'config' ? (
        <pre className="log" data-testid="run-config">
          {JSON.stringify(run.config, null, 2)}
        </pre>
      ) : null}
      {tab === 'log' ? <RunLog /> : null}
      {tab === 'checkpoints' ? <CheckpointTable run={run} forkable={!isSftWarmStart(run)} onFork={(checkpoint) => setForking({ checkpoint })} /> : null}
      {forking ? <ForkDialog runId={run.id} checkpoint={forking.checkpoint} onClose={() => setForking(null)} /> : null}
    </div>
  );
}
