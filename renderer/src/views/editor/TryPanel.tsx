import { useArbor, useArborStore } from '../../store/react';
import { fileKind, isMcpServersFile } from '../../store/editor';
import { TryArgs } from './TryArgs';
import { RewardTarget } from './RewardTarget';
import { McpToolList } from './McpToolList';
import { TryResultView } from './TryResultView';

/**
 * "Try it" on the editor's text (saved or not): a tool with JSON arguments, a reward on a stored
 * trajectory, or an MCP servers file's tools (list them, call one).
 */
export function TryPanel() {
  const store = useArborStore();
  const files = useArbor((s) => s.editor.envFiles);
  const filePath = useArbor((s) => s.editor.filePath);
  const source = useArbor((s) => s.editor.source);
  const trying = useArbor((s) => s.editor.trying);
  const mcpTools = useArbor((s) => s.editor.mcpTools);
  const mcpTool = useArbor((s) => s.editor.mcpTool);
  const a = store.getState();
  const kind = filePath ? (isMcpServersFile(filePath, source) ? 'mcp' : fileKind(filePath, files)) : null;
  return (
    <div className="panel" style={{ display: 'flex', flexDirection: 'column', gap: 8 }}>
      <div className="toolbar">
        <h3 style={{ margin: 0 }}>Try it</h3>
        {kind === 'mcp' ? (
          <>
            <button disabled={trying} onClick={() => void a.editorActions.listMcpTools()} data-testid="mcp-list">
              List tools
            </button>
            <select
              value={mcpTool}
              onChange={(e) => a.editorActions.setMcpTool(e.target.value)}
              data-testid="mcp-tool"
              disabled={!mcpTools.length}
              aria-label="MCP tool"
            >
              {mcpTools.length ? null : <option value="">(list the tools first)</option>}
              {mcpTools.map((t) => (
                <option key={t.name} value={t.name}>
                  {t.name}
                </option>
              ))}
            </select>
            <TryArgs width={300} />
          </>
        ) : kind === 'reward' ? (
          <RewardTarget />
        ) : (
          <TryArgs width={360} />
        )}
        {kind === 'mcp' ? (
          <>
            <button className="primary" disabled={trying || !mcpTool} onClick={() => void a.editorActions.tryIt()} data-testid="try-it">
              {trying ? 'Running…' : 'Call tool'}
            </button>
            <span className="muted">starts the servers of the editor's text (saved or not), calls, stops them</span>
          </>
        ) : (
          <>
            <button className="primary" disabled={!filePath || trying} onClick={() => void a.editorActions.tryIt()} data-testid="try-it">
              {trying ? 'Running…' : 'Run in sandbox'}
            </button>
            <span className="muted">runs the editor's text (saved or not) in the sandbox</span>
          </>
        )}
      </div>
      {kind === 'mcp' ? <McpToolList /> : null}
      <TryResultView mcp={kind === 'mcp'} />
    </div>
  );
}
