import { useArbor } from '../../store/react';

/** The run's log lines (errors red, warnings yellow), live. */
export function RunLog() {
  const log = useArbor((s) => s.run.log);
  return (
    <pre className="log" data-testid="run-log">
      {log.length === 0 ? 'No log lines yet.' : null}
      {log.map((l, i) => (
        <div key={`${l.seq}-${i}`} style={{ color: l.level === 'error' ? 'var(--err)' : l.level === 'warn' ? 'var(--warn, #f5d76e)' : undefined }}>
          {`${new Date(l.time).toLocaleTimeString()} ${l.level.padEnd(5)} ${l.text}`}
        </div>
      ))}
    </pre>
  );
}
