import { useArbor } from '../../store/react';

/** The tools the last chat offered (each with its source), or, before one, where they come from. */
export function ChatTools() {
  const corpus = useArbor((s) => s.playground.corpus);
  const chatTools = useArbor((s) => s.playground.tools);
  return (
    <span className="muted" data-testid="chat-world">
      {chatTools.length ? (
        <>
          tools of the run's environment:{' '}
          {chatTools.map((t, i) => (
            <span key={t.name} data-testid="chat-tool" title={t.source}>
              {i ? ', ' : ''}
              <b>{t.name}</b> ({t.source.split('/').pop()})
            </span>
          ))}
          {corpus ? ` · ${corpus}` : ''}
        </>
      ) : (
        <>
          the model answers with the tools of the run that trained it: search over its corpus
          {corpus ? ` (${corpus})` : ' (its held-out world, or its qa dataset)'}, or its environment's tool files, plus its environment.mcp_servers
        </>
      )}
    </span>
  );
}
