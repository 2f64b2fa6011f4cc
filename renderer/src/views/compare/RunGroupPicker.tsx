import { useState } from 'react';
import { useArbor } from '../../store/react';

/** Add a run group (seed sweep or grid) to the comparison. */
export function RunGroupPicker() {
  const all = useArbor((s) => s.groups.items);
  const shown = useArbor((s) => s.groups.reports);
  const add = useArbor((s) => s.groupActions.addToCompare);
  const left = all.filter((g) => !shown.some((r) => r.group.id === g.id));
  const [pick, setPick] = useState('');
  if (!all.length) return null;
  return (
    <label className="muted">
      group{' '}
      <select data-testid="group-select" value={pick} onChange={(e) => setPick(e.target.value)}>
        <option value="">(choose)</option>
        {left.map((g) => (
          <option key={g.id} value={g.id}>
            {g.name} · {g.runs}/{g.planned} runs · {g.status}
          </option>
        ))}
      </select>{' '}
      <button data-testid="group-add" disabled={!pick} onClick={() => void add(pick).then(() => setPick(''))}>
        Add group
      </button>
    </label>
  );
}
