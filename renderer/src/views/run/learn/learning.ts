// What the Run view's "why didn't it learn" panel reads: the run's flags (asked again as its step moves)
// and a step's groups that gave no signal.
import { useEffect, useRef, useState } from 'react';
import { useArborStore } from '../../../store/react';
import type { Learning, TrajectorySummary } from '../../../api/types';

/** Groups of a step whose samples all got the same reward (no signal), from the step's trajectory summaries. */
export function zeroVarianceGroups(list: TrajectorySummary[]): { group: number; reward: number; samples: TrajectorySummary[] }[] {
  const by = new Map<number, TrajectorySummary[]>();
  for (const t of list) by.set(t.group, [...(by.get(t.group) ?? []), t]);
  return [...by.entries()]
    .filter(([, ts]) => ts.every((t) => t.reward === ts[0]!.reward))
    .sort((a, b) => a[0] - b[0])
    .map(([group, ts]) => ({ group, reward: ts[0]!.reward, samples: ts.sort((a, b) => a.sample - b.sample) }));
}

/** The run's runs.learning answer, asked again when its step moves (at most every 3 s while live). */
export function useLearning(runId: string | null, step: number | undefined): Learning | null {
  const store = useArborStore();
  const [learning, setLearning] = useState<{ runId: string; l: Learning } | null>(null);
  const asked = useRef(0);
  useEffect(() => {
    if (!runId) return;
    const wait = Math.max(0, asked.current + 3000 - Date.now());
    const t = setTimeout(() => {
      asked.current = Date.now();
      void store
        .getState()
        .runActions.fetchLearning(runId)
        .then((l) => l && setLearning({ runId, l }));
    }, wait);
    return () => clearTimeout(t);
  }, [runId, step, store]);
  return learning?.runId === runId ? learning.l : null;
}
