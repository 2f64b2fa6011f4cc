import { useEffect, useState } from 'react';
import type { RunDetail } from '../../api/types';
import { useArbor } from '../../store/react';
import { LaunchDialog } from './LaunchDialog';

/** Fork: the launch form prefilled with a run's template and config; the new run records its parent. */
export function ForkDialog({ runId, onClose, checkpoint }: { runId: string; onClose: () => void; checkpoint?: { id: string; step: number; path?: string } }) {
  const fetchRun = useArbor((s) => s.runActions.fetch);
  const [run, setRun] = useState<RunDetail | null>(null);
  useEffect(() => {
    void fetchRun(runId).then((r) => (r ? setRun(r) : onClose()));
    // Deliberately not onClose: a new callback each render must not refetch the run.
  }, [fetchRun, runId]);
  if (!run) return null;
  // From a checkpoint: the new run starts from that model folder instead of the original init.
  const config = checkpoint?.path ? { ...run.config, model: { path: checkpoint.path } } : run.config;
  return (
    <LaunchDialog
      onClose={onClose}
      fork={{ run, config, checkpoint: checkpoint?.id, name: checkpoint ? `${run.name}-from-${checkpoint.step}` : `${run.name}-fork` }}
    />
  );
}
