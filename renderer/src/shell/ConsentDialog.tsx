import { useArbor } from '../store/react';

/**
 * Programs from elsewhere ask first: the MCP server commands, tool/reward files or workspace
 * folder a config or stored run would run, which this workspace has not approved. Approve runs
 * them (and remembers their content); Cancel stops whatever asked.
 */
export function ConsentDialog() {
  const consents = useArbor((s) => s.consent.prompts);
  const answer = useArbor((s) => s.consentActions.answer);
  const c = consents[0];
  if (!c) return null;
  const head = {
    'mcp-server': 'MCP server command',
    agent: 'agent program (runs as you, not sandboxed)',
    tool: 'tool file',
    reward: 'reward file',
    workspace: 'workspace folder',
    plugin: 'plugin (runs in the engine, not sandboxed)',
    judge: 'LLM judge (trajectories are sent to this URL)',
  } as const;
  return (
    <div className="modal-back">
      <div className="modal" role="dialog" aria-modal="true" aria-labelledby="consent-title" data-testid="consent-dialog">
        <h3 id="consent-title" style={{ margin: 0 }}>
          Run programs this workspace has not approved?
        </h3>
        <div className="muted">
          {c.origin} would run the following. They run on this computer with your permissions (MCP servers) or in Arbor&apos;s sandbox (tool and reward files).
          Approve only what you have read or trust; a changed file or command asks again.
        </div>
        <ul data-testid="consent-items" style={{ margin: 0, paddingLeft: 18 }}>
          {c.items.map((i, k) => (
            <li key={k}>
              <span className="muted">{head[i.kind]}:</span> <code>{i.label}</code>
            </li>
          ))}
        </ul>
        <div style={{ display: 'flex', gap: 8, justifyContent: 'flex-end' }}>
          <button data-testid="consent-cancel" onClick={() => void answer(c.id, false)}>
            Cancel
          </button>
          <button className="primary" data-testid="consent-approve" onClick={() => void answer(c.id, true)}>
            Approve and run
          </button>
        </div>
      </div>
    </div>
  );
}
