import { useEffect, useState } from 'react';
import { isSftWarmStart } from '../../../lib/lineage';
import { useArbor } from '../../../store/react';
import type { RunDetail, Series } from '../../../api/types';
import { configDiff, formatValue } from '../../../lib/configDiff';
import { fmt } from '../../../lib/format';
import { Sparkline } from './Sparkline';

/**
 * The parent run with a link that opens it: the SFT warm start this run began from (its loss curve,
 * live while it trains), or a fork's origin with the config paths that differ from it.
 */
export function ParentLink({ parentId, step }: { parentId: string; step: number }) {
  const fetchRun = useArbor((s) => s.runActions.fetch);
  const fetchSeries = useArbor((s) => s.runActions.fetchSeries);
  const openRun = useArbor((s) => s.runActions.open);
  const run = useArbor((s) => s.run.detail);
  // The parent as the runs list has it (live events): its curve is reloaded as its step or status moves.
  const live = useArbor((s) => s.runList.runs.find((r) => r.id === parentId));
  const [parent, setParent] = useState<RunDetail | null>(null);
  const [loss, setLoss] = useState<Series | null>(null);
  const sft = isSftWarmStart(parent);
  useEffect(() => {
    let on = true;
    void fetchRun(parentId).then((p) => on && setParent(p));
    return () => {
      on = false;
    };
  }, [fetchRun, parentId, live?.status, live?.step]);
  useEffect(() => {
    if (!sft) return;
    let on = true;
    void fetchSeries(parentId, ['sft/loss']).then((s) => on && setLoss(s?.['sft/loss'] ?? null));
    return () => {
      on = false;
    };
  }, [fetchSeries, parentId, sft, live?.status, live?.step]);
  const link = (
    <a
      href="#"
      data-testid="run-parent-link"
      onClick={(e) => {
        e.preventDefault();
        void openRun(parentId);
      }}
    >
      {parent?.name ?? parentId}
    </a>
  );
  if (parent && sft) {
    const ys = loss ? loss.value.filter((v): v is number => v != null) : [];
    return (
      <div data-testid="run-parent" data-parent-kind="sft">
        parent run: {link} · <strong>SFT warm start</strong> <span className="muted">({live?.status ?? parent.status})</span>
        {loss?.step.length ? (
          <span data-testid="sft-parent-summary">
            : {loss.step.length} steps, loss {fmt(ys[0]!)} → {fmt(ys[ys.length - 1]!)}
          </span>
        ) : null}
        {' · then '}
        <strong>RL</strong> (this run){step > 0 ? ` to step ${step}` : ', after it'}
        {loss && ys.length > 1 ? <Sparkline xs={loss.step} ys={loss.value} label="SFT loss by SFT step (the parent run)" /> : null}
      </div>
    );
  }
  const diff = parent && run ? configDiff([parent.config, run.config]) : [];
  return (
    <div data-testid="run-parent" data-parent-kind="run">
      parent run: {link}
      {parent ? (
        <details>
          <summary className="muted">config diff against the parent ({diff.length} keys)</summary>
          <table className="grid" data-testid="parent-diff">
            <thead>
              <tr>
                <th scope="col">key</th>
                <th scope="col">parent</th>
                <th scope="col">this run</th>
              </tr>
            </thead>
            <tbody>
              {diff.map((d) => (
                <tr key={d.path}>
                  <td className="mono">{d.path}</td>
                  <td className="mono">{formatValue(d.values[0])}</td>
                  <td className="mono">{formatValue(d.values[1])}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </details>
      ) : null}
    </div>
  );
}
