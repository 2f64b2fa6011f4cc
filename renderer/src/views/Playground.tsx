import { useEffect, useState } from 'react';
import { useArbor, useArborStore } from '../store/react';

export function PlaygroundView() {
  const store = useArborStore();
  const checkpoints = useArbor((s) => s.checkpoints);
  const checkpointId = useArbor((s) => s.checkpointId);
  const transcript = useArbor((s) => s.transcript);
  const chatting = useArbor((s) => s.chatting);
  const [text, setText] = useState('');
  useEffect(() => void store.getState().loadCheckpoints(), [store]);
  const a = store.getState();
  const send = () => {
    if (!text.trim()) return;
    void a.send(text.trim());
    setText('');
  };
  return (
    <div className="view" data-testid="view-playground">
      <div className="toolbar">
        <h2>Playground</h2>
        <select value={checkpointId} onChange={(e) => a.setCheckpoint(e.target.value)} data-testid="checkpoint-select">
          <option value="">(checkpoint)</option>
          {checkpoints.map((c) => <option key={c.id} value={c.id}>{c.runId.slice(0, 8)} · step {c.step}</option>)}
        </select>
        <span className="grow" />
        <button onClick={() => a.clearChat()}>Clear</button>
      </div>
      {checkpoints.length === 0 ? <div className="empty">No checkpoints yet: train a run first.</div> : null}
      <div className="chat" data-testid="chat">
        {transcript.map((it, i) => {
          if (it.kind === 'user') return <div key={i} className="msg user">{it.text}</div>;
          if (it.kind === 'assistant') return <div key={i} className="msg">{it.text}{it.done ? '' : ' ▍'}</div>;
          if (it.kind === 'tool_call') return <div key={i} className="msg tool">→ {it.name}({JSON.stringify(it.args)})</div>;
          if (it.kind === 'observation') return <div key={i} className="msg tool">{it.error ? <span style={{ color: 'var(--err)' }}>error: {it.error}</span> : `← ${it.content}`}</div>;
          return <div key={i} className="error-msg">{it.message}</div>;
        })}
      </div>
      <div className="toolbar">
        <textarea rows={3} style={{ flex: 1 }} value={text} onChange={(e) => setText(e.target.value)} onKeyDown={(e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); send(); } }} placeholder="Ask the model; Enter sends, Shift+Enter for a newline" />
        <button className="primary" disabled={!checkpointId || chatting} onClick={send}>{chatting ? '…' : 'Send'}</button>
      </div>
    </div>
  );
}
