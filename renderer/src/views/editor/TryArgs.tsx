import { useArbor } from '../../store/react';

/** The try-it arguments field (a tool's, an MCP tool's): JSON. */
export function TryArgs({ width }: { width: number }) {
  const tryArgs = useArbor((s) => s.editor.tryArgs);
  const setTryArgs = useArbor((s) => s.editorActions.setTryArgs);
  return (
    <>
      <label className="muted" htmlFor="try-args">
        arguments (JSON)
      </label>
      <input id="try-args" value={tryArgs} onChange={(e) => setTryArgs(e.target.value)} className="mono" style={{ width }} data-testid="try-args" />
    </>
  );
}
