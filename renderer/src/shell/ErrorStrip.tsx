import { useArbor } from '../store/react';

/** The last engine errors, each with what was being done and a dismiss button. */
export function ErrorStrip() {
  const errors = useArbor((s) => s.connection.errors);
  const dismiss = useArbor((s) => s.connectionActions.dismissError);
  if (!errors.length) return null;
  return (
    <div className="errors" style={{ padding: '8px 16px 0' }} data-testid="errors">
      {errors.map((e) => (
        <div key={e.id} className="error-msg" role="alert">
          <strong>{e.context}:</strong>
          <pre>{e.message}</pre>
          <button onClick={() => dismiss(e.id)} aria-label="dismiss">
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
