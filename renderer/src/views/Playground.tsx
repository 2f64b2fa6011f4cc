import { useEffect, useRef, useState } from 'react';
import { TemperatureField } from '../components/TemperatureField';
import { useArbor, useArborStore } from '../store/react';
import { LiveStepper } from '../components/LiveStepper';
import { ModelPicker } from '../components/ModelPicker';

/** The model's text without chat-template markup (<|im_start|>, <|im_end|>, <|endoftext|>, …): what it said, not how it was framed. */
export function withoutTemplateTokens(text: string): string {
  return text.replace(/<\|[^|<>\s]{1,40}\|>/g, '').replace(/^\s*assistant\s*\n/, '');
}

export function PlaygroundView() {
  const store = useArborStore();
  const checkpoints = useArbor((s) => s.checkpoints);
  const checkpointId = useArbor((s) => s.checkpointId);
  const transcript = useArbor((s) => s.transcript);
  const chatting = useArbor((s) => s.chatting);
  const runs = useArbor((s) => s.runs);
  const corpus = useArbor((s) => s.chatCorpus);
  const chatFormat = useArbor((s) => s.chatFormat);
  const chatTools = useArbor((s) => s.chatTools);
  const chatTemperature = useArbor((s) => s.chatTemperature);
  const [mode, setMode] = useState<'chat' | 'step'>('chat');
  const [text, setText] = useState('');
  const bottom = useRef<HTMLDivElement>(null);
  useEffect(() => {
    void store.getState().loadCheckpoints();
  }, [store]);
  useEffect(() => {
    bottom.current?.scrollIntoView?.({ block: 'end' });
  }, [transcript]);
  const a = store.getState();
  const send = () => {
    if (!text.trim()) return;
    void a.send(text.trim());
    setText('');
  };
  const runName = (id: string) => runs.find((r) => r.id === id)?.name ?? id.slice(0, 8);
  return (
    <div className="view" data-testid="view-playground">
      <div className="toolbar">
        <h2>Playground</h2>
        <select value={checkpointId} onChange={(e) => a.setCheckpoint(e.target.value)} data-testid="checkpoint-select" aria-label="checkpoint">
          <option value="">(checkpoint)</option>
          {checkpoints.map((c) => (
            <option key={c.id} value={c.id}>
              {runName(c.runId)} · step {c.step}
            </option>
          ))}
          {checkpointId && !checkpoints.some((c) => c.id === checkpointId) ? <option value={checkpointId}>{checkpointId}</option> : null}
        </select>
        <select
          value={chatFormat}
          onChange={(e) => a.setChatFormat(e.target.value)}
          data-testid="chat-format"
          title="tool-call format (engine/env/formats.ts)"
          aria-label="tool-call format"
        >
          <option value="">format: the run's</option>
          <option value="search-r1">search-r1 (&lt;search&gt;)</option>
          <option value="hermes">hermes (&lt;tool_call&gt; JSON)</option>
          <option value="tags">tags (&lt;toolname&gt;)</option>
        </select>
        <TemperatureField className="muted" optional value={chatTemperature} onChange={(t) => a.setChatTemperature(t)} testId="chat-temperature" />
        <button className={mode === 'chat' ? 'primary' : ''} onClick={() => setMode('chat')} data-testid="playground-mode-chat">
          Chat
        </button>
        <button className={mode === 'step' ? 'primary' : ''} onClick={() => setMode('step')} data-testid="playground-mode-step">
          Step through
        </button>
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
        <span className="grow" />
        <button onClick={() => void a.loadCheckpoints()}>Refresh</button>
        <button onClick={() => a.clearChat()} disabled={chatting}>
          Clear
        </button>
      </div>
      {/* Any model Arbor loads: a cached Hub model (org/name) or a run's checkpoint; Download… pulls one. */}
      <ModelPicker value={checkpointId} onPick={(m) => a.setCheckpoint(m.checkpointId ?? m.name)} testId="playground-model" />
      {checkpoints.length === 0 ? <div className="empty">No checkpoints yet: train a run first, or pick a model above.</div> : null}
      {mode === 'step' ? <LiveStepper checkpoint={checkpointId} /> : null}
      <div className="chat" data-testid="chat" style={mode === 'step' ? { display: 'none' } : undefined}>
        {transcript.map((it, i) => {
          if (it.kind === 'user')
            return (
              <div key={i} className="msg user">
                {it.text}
              </div>
            );
          if (it.kind === 'assistant')
            return (
              <div key={i} className="msg" data-testid="chat-assistant">
                {withoutTemplateTokens(it.text)}
                {it.done ? '' : ' ▍'}
              </div>
            );
          if (it.kind === 'tool_call')
            return (
              <div key={i} className="msg tool" data-testid="chat-tool-call">
                → <b>{it.name}</b>({JSON.stringify(it.args)})
              </div>
            );
          if (it.kind === 'observation')
            return (
              <div key={i} className="msg tool" data-testid="chat-observation">
                {it.error ? <div style={{ color: 'var(--err)' }}>error: {it.error}</div> : null}← {it.content}
              </div>
            );
          if (it.kind === 'note')
            return (
              <div key={i} className="muted" style={{ fontSize: 12 }}>
                {it.text}
              </div>
            );
          return (
            <div key={i} className="error-msg">
              {it.message}
            </div>
          );
        })}
        {chatting ? (
          <div className="muted" style={{ fontSize: 12 }}>
            generating…
          </div>
        ) : null}
        <div ref={bottom} />
      </div>
      <div className="toolbar" style={mode === 'step' ? { display: 'none' } : undefined}>
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
          <button onClick={() => void a.stopChat()} data-testid="chat-stop" title="Stop generating; keep what the model wrote so far">
            Stop
          </button>
        ) : null}
        <button className="primary" disabled={!checkpointId || chatting} onClick={send} data-testid="chat-send">
          {chatting ? '…' : 'Send'}
        </button>
      </div>
    </div>
  );
}
