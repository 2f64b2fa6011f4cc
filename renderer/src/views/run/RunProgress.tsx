import { useRef } from 'react';
import { useArbor } from '../../store/react';
import { isSftWarmStart } from '../../lib/lineage';
import { formatDuration } from '../../lib/format';

/** The header's progress: phase (SFT warm start or RL), step of its total and, while live, an ETA from the steps seen. */
export function RunProgress() {
  const run = useArbor((s) => s.run.detail)!;
  const series = useArbor((s) => s.run.series);
  const live = run.status === 'running' || run.status === 'queued';
  const cfg = run.config as { steps?: number; sft?: { warm_start?: boolean; epochs?: number; demos?: number; batch_size?: number } };
  const sftSeries = series['sft/loss'];
  const sftStep = sftSeries?.step.length ? sftSeries.step[sftSeries.step.length - 1]! : 0;
  const sft = cfg.sft;
  const sftTotal = sft?.warm_start && sft.demos && sft.batch_size && sft.epochs ? Math.ceil(sft.demos / sft.batch_size) * sft.epochs : undefined;
  // An SFT warm start's own run: its steps are SFT steps; its RL run, before RL, shows the SFT run's (its parent's) step.
  const parent = useArbor((s) => (run.parentId ? s.runList.runs.find((r) => r.id === run.parentId) : undefined));
  const sftOwn = isSftWarmStart(run) ? run.step : live && run.step === 0 && isSftWarmStart(parent) ? (parent?.step ?? 0) : 0;
  const phase = isSftWarmStart(run) ? 'SFT' : run.step > 0 ? 'RL' : sftStep > 0 || sftOwn > 0 ? 'SFT' : live ? 'starting' : '';
  const step = phase === 'SFT' ? Math.max(sftStep, sftOwn) : run.step;
  const total = phase === 'SFT' ? sftTotal : cfg.steps;
  // ETA from the steps seen while this view is open: (elapsed / steps done) × steps left.
  const seen = useRef<{ phase: string; step: number; t: number } | null>(null);
  const now = Date.now();
  if (!seen.current || seen.current.phase !== phase || step < seen.current.step) seen.current = { phase, step, t: now };
  const done = step - seen.current.step;
  const eta = live && total && done > 0 ? ((now - seen.current.t) / done) * (total - step) : undefined;
  return (
    <span className="muted" data-testid="run-progress">
      {phase ? `${phase} · ` : ''}step {step}
      {total ? `/${total}` : ''}
      {live ? (eta !== undefined ? ` · ETA ${formatDuration(eta)}` : ' · ETA after the next step') : ''}
    </span>
  );
}
