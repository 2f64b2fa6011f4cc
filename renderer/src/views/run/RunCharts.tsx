import { useMemo, useState } from 'react';
import type { Learning, RunDetail } from '../../api/types';
import { useArbor } from '../../store/react';
import { isSftWarmStart } from '../../lib/lineage';
import { groupMetricKeys } from '../../lib/metricSections';
import { MetricChart, PALETTE } from '../../components/MetricChart';
import { HarnessPanel } from './learn/HarnessPanel';
import { LearnPanel } from './learn/LearnPanel';
import { sortForMetric } from '../../store/trajectories';
import { SmoothingSlider } from '../../components/SmoothingSlider';
import { dedupeSeries } from './dedupeSeries';

/** Charts whose x axis is an RL step with stored trajectories (not the SFT warm start's own steps). */
function pickable(key: string): boolean {
  return !key.startsWith('sft/');
}

/** The charts tab: "why didn't it learn?", the harness, then one chart per metric in sections; a click opens that step's trajectories. */
export function RunCharts({ run, learning }: { run: RunDetail; learning: Learning | null }) {
  const series = useArbor((s) => s.run.series);
  const smoothing = useArbor((s) => s.run.smoothing);
  const runs = useArbor((s) => s.runList.runs);
  const openTrajectories = useArbor((s) => s.trajListActions.open);
  const [metricFilter, setMetricFilter] = useState('');
  // A curve logged under several keys (exact_match and reward/exact_match, …) is drawn once, titled with all of them.
  const { keys, aliases } = useMemo(() => dedupeSeries(series, metricFilter), [series, metricFilter]);
  const live = run.status === 'running' || run.status === 'queued' || run.status === 'paused';
  return (
    <>
      <LearnPanel runId={run.id} series={series} learning={learning} />
      <HarnessPanel metrics={run.metrics} />
      <div className="toolbar">
        <input placeholder="filter metrics" aria-label="filter metrics" value={metricFilter} onChange={(e) => setMetricFilter(e.target.value)} />
        <SmoothingSlider />
        <span className="muted">
          {keys.length} metrics{live ? ' · live' : ''}
        </span>
      </div>
      {keys.length === 0 ? (
        <div className="empty">
          No metrics logged yet
          {live && run.parentId && run.step === 0 && isSftWarmStart(runs.find((r) => r.id === run.parentId))
            ? ': the SFT warm start trains first, in its own run (the parent above); the RL charts appear with RL’s first step.'
            : live
              ? '; charts appear with the first step.'
              : '.'}
        </div>
      ) : null}
      {groupMetricKeys(keys).map((g) => (
        <section key={g.title} className="chart-section">
          <h3>{g.title}</h3>
          <div className="charts">
            {g.keys.map((k) => (
              <MetricChart
                key={k}
                title={k}
                aliases={aliases[k]}
                smoothing={smoothing}
                series={[{ label: run.name, xs: series[k].step, ys: series[k].value, color: PALETTE[0] }]}
                syncKey={`run-${run.id}`}
                {...(pickable(k)
                  ? { onPick: (step: number) => void openTrajectories(run.id, step, sortForMetric(k)), pickHint: 'click: this step’s trajectories' }
                  : {})}
              />
            ))}
          </div>
        </section>
      ))}
    </>
  );
}
