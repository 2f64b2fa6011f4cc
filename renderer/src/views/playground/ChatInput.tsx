import { useState, type CSSProperties } from 'react';
import { useArbor } from '../../store/react';

/** The message box: Enter sends, Shift+Enter a newline; Stop while the model generates. */
export function ChatInput({ style }: { style?: CSSProperties }) {
  const checkpointId = useArbor((s) => s.playground.checkpointId);
  const chatting = useArbor((s) => s.playground.chatting);
  const sendMessage = useArbor((s) => s.playgroundActions.send);
  const stopChat = useArbor((s) => s.playgroundActions.stop);
  const [text, setText] = useState('');
  const send = () => {
    if (!text.trim()) return;
    void sendMessage(text.trim());
    setText('');
  };
  return (
    <div className="toolbar" style={style}>
      <textarea
        rows={3}
        aria-label="message"
        style={{ flex: 1 }}
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !e.shiftKey) {
            e.preventDefault();
            send();
          }
        }}
        placeholder="Ask the model; Enter sends, Shift+Enter for a newline"
        data-testid="chat-input"
      />
      {chatting ? (
        <button onClick={() => void stopChat()} data-testid="chat-stop" title="Stop generating; keep what the model wrote so far">
          Stop
        </button>
      ) : null}
      <button className="primary" disabled={!checkpointId || chatting} onClick={send} data-testid="chat-send">
        {chatting ? '…' : 'Send'}
      </button>
    </div>
  );
}
