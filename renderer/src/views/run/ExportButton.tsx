import { useState } from 'react';
import type { ExportedFile } from '../../api/types';
import { useArbor } from '../../store/react';

/** Export the run's metrics (CSV) and trajectories (JSONL); says where the files went. */
export function ExportButton() {
  const exportRun = useArbor((s) => s.runActions.export);
  const [busy, setBusy] = useState(false);
  const [files, setFiles] = useState<ExportedFile[] | null>(null);
  return (
    <>
      <button
        disabled={busy}
        title="metrics as CSV (every step) and trajectories as JSONL, into the workspace's exports/ folder"
        onClick={async () => {
          setBusy(true);
          setFiles(await exportRun());
          setBusy(false);
        }}
      >
        {busy ? 'Exporting…' : 'Export'}
      </button>
      {files ? (
        <span className="muted mono" data-testid="export-result" title="written by the engine">
          {files.map((f) => `${f.path} (${f.count} ${f.kind === 'metrics' ? 'steps' : 'trajectories'})`).join(' · ')}
        </span>
      ) : null}
    </>
  );
}
