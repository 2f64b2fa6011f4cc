import type { ToolCallView } from '../../../api/types';

/** A turn's tool calls: name, arguments, the result or error, the latency. */
export function ToolCalls({ calls, staleNote }: { calls: ToolCallView[]; /** the results shown were replaced later (a what-if edit) */ staleNote?: string }) {
  return (
    <>
      {staleNote ? (
        <div className="steer-note" data-testid="toolcall-replaced">
          ✎ {staleNote}
        </div>
      ) : null}
      {calls.map((c, i) => (
        <div key={i} className="toolcall" data-testid="tool-call">
          <span className="name">{c.name}</span>(<span>{JSON.stringify(c.args)}</span>)
          {c.latencyMs != null ? <span className="muted"> · {c.latencyMs.toFixed(0)} ms</span> : null}
          {c.derived ? (
            <span className="muted" title="this trajectory was stored without call records; the call is read from the turn's tags">
              {' '}
              · read from the text
            </span>
          ) : null}
          {c.error ? <div className="err">error: {c.error}</div> : null}
          {c.result != null ? <div className="muted">→ {c.result.length > 600 ? c.result.slice(0, 600) + '…' : c.result}</div> : null}
        </div>
      ))}
    </>
  );
}
