import type { TranscriptItem } from '../../store/playground';
import { withoutTemplateTokens } from './withoutTemplateTokens';

/** One entry of the chat: the user's message, the model's (streaming until done), a tool call, its observation, a note or an error. */
export function TranscriptEntry({ it }: { it: TranscriptItem }) {
  if (it.kind === 'user') return <div className="msg user">{it.text}</div>;
  if (it.kind === 'assistant')
    return (
      <div className="msg" data-testid="chat-assistant">
        {withoutTemplateTokens(it.text)}
        {it.done ? '' : ' ▍'}
      </div>
    );
  if (it.kind === 'tool_call')
    return (
      <div className="msg tool" data-testid="chat-tool-call">
        → <b>{it.name}</b>({JSON.stringify(it.args)})
      </div>
    );
  if (it.kind === 'observation')
    return (
      <div className="msg tool" data-testid="chat-observation">
        {it.error ? <div style={{ color: 'var(--err)' }}>error: {it.error}</div> : null}← {it.content}
      </div>
    );
  if (it.kind === 'note')
    return (
      <div className="muted" style={{ fontSize: 12 }}>
        {it.text}
      </div>
    );
  return <div className="error-msg">{it.message}</div>;
}
