import { useArbor } from '../../store/react';

/** The MCP servers' tools once listed (click one to pick it), and the picked one's JSON schema. */
export function McpToolList() {
  const mcpTools = useArbor((s) => s.editor.mcpTools);
  const mcpTool = useArbor((s) => s.editor.mcpTool);
  const setMcpTool = useArbor((s) => s.editorActions.setMcpTool);
  const picked = mcpTools.find((t) => t.name === mcpTool);
  return (
    <>
      {mcpTools.length ? (
        <div className="mcp-tools" data-testid="mcp-tools" style={{ display: 'flex', gap: 8, flexWrap: 'wrap', fontSize: 12 }}>
          {mcpTools.map((t) => (
            <div
              key={t.name}
              className={`panel${t.name === mcpTool ? ' selected' : ''}`}
              style={{ cursor: 'pointer', padding: '4px 8px', outline: t.name === mcpTool ? '1px solid var(--accent, #4c8dff)' : undefined }}
              onClick={() => setMcpTool(t.name)}
              data-testid={`mcp-tool-${t.name}`}
            >
              <span className="mono">{t.name}</span> <span className="muted">{t.description}</span>
            </div>
          ))}
        </div>
      ) : null}
      {picked ? (
        <pre className="mono muted" style={{ margin: 0, fontSize: 11, maxHeight: 140, overflow: 'auto' }} data-testid="mcp-schema">
          {JSON.stringify(picked.parameters, null, 2)}
        </pre>
      ) : null}
    </>
  );
}
