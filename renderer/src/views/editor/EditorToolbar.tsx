import { useArbor, useArborStore } from '../../store/react';
import type { NewFileAsk } from './NewFileDialog';
import { MCP_TEMPLATE, REWARD_TEMPLATE, TOOL_TEMPLATE } from './templates';

/** Open a workspace file, start a new one (`onNew` asks for its path), save the open one. */
export function EditorToolbar({ onNew }: { onNew: (ask: NewFileAsk) => void }) {
  const store = useArborStore();
  const files = useArbor((s) => s.editor.envFiles);
  const filePath = useArbor((s) => s.editor.filePath);
  const dirty = useArbor((s) => s.editor.source !== s.editor.savedSource);
  return (
    <div className="toolbar">
      <h2>Editor</h2>
      <select
        value={filePath ?? ''}
        onChange={(e) => e.target.value && void store.getState().editorActions.openFile(e.target.value)}
        data-testid="env-file"
        aria-label="workspace file"
      >
        <option value="">(open a file)</option>
        {files.map((f) => (
          <option key={f.path} value={f.path}>
            {f.kind}: {f.path}
          </option>
        ))}
      </select>
      <button onClick={() => onNew({ title: 'New tool file', initial: 'tools/my_tool.ts', template: TOOL_TEMPLATE })} data-testid="new-tool">
        New tool
      </button>
      <button onClick={() => onNew({ title: 'New reward file', initial: 'rewards/my_reward.ts', template: REWARD_TEMPLATE })} data-testid="new-reward">
        New reward
      </button>
      <button onClick={() => onNew({ title: 'New MCP servers file', initial: 'envs/mcp_servers.json', template: MCP_TEMPLATE })} data-testid="new-mcp">
        New MCP servers
      </button>
      <span className="grow" />
      {filePath ? (
        <span className="mono muted">
          {filePath}
          {dirty ? ' •' : ''}
        </span>
      ) : null}
      <button className="primary" disabled={!filePath || !dirty} onClick={() => void store.getState().editorActions.saveFile()} data-testid="save-file">
        Save
      </button>
    </div>
  );
}
