import { useArbor, useArborStore } from '../../store/react';
import { TemperatureField } from '../../components/TemperatureField';
import { ChatTools } from './ChatTools';

export type PlaygroundMode = 'chat' | 'step';

/** Which checkpoint, tool-call format and temperature; chat or step through; the chat's tools; refresh and clear. */
export function PlaygroundToolbar({ mode, setMode }: { mode: PlaygroundMode; setMode: (m: PlaygroundMode) => void }) {
  const store = useArborStore();
  const checkpoints = useArbor((s) => s.playground.checkpoints);
  const checkpointId = useArbor((s) => s.playground.checkpointId);
  const chatting = useArbor((s) => s.playground.chatting);
  const runs = useArbor((s) => s.runList.runs);
  const chatFormat = useArbor((s) => s.playground.format);
  const chatTemperature = useArbor((s) => s.playground.temperature);
  const a = store.getState();
  const runName = (id: string) => runs.find((r) => r.id === id)?.name ?? id.slice(0, 8);
  return (
    <div className="toolbar">
      <h2>Playground</h2>
      <select value={checkpointId} onChange={(e) => a.playgroundActions.setCheckpoint(e.target.value)} data-testid="checkpoint-select" aria-label="checkpoint">
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
        onChange={(e) => a.playgroundActions.setFormat(e.target.value)}
        data-testid="chat-format"
        title="tool-call format (engine/env/formats.ts)"
        aria-label="tool-call format"
      >
        <option value="">format: the run's</option>
        <option value="search-r1">search-r1 (&lt;search&gt;)</option>
        <option value="hermes">hermes (&lt;tool_call&gt; JSON)</option>
        <option value="tags">tags (&lt;toolname&gt;)</option>
      </select>
      <TemperatureField className="muted" optional value={chatTemperature} onChange={(t) => a.playgroundActions.setTemperature(t)} testId="chat-temperature" />
      <button className={mode === 'chat' ? 'primary' : ''} onClick={() => setMode('chat')} data-testid="playground-mode-chat">
        Chat
      </button>
      <button className={mode === 'step' ? 'primary' : ''} onClick={() => setMode('step')} data-testid="playground-mode-step">
        Step through
      </button>
      <ChatTools />
      <span className="grow" />
      <button onClick={() => void a.playgroundActions.loadCheckpoints()}>Refresh</button>
      <button onClick={() => a.playgroundActions.clear()} disabled={chatting}>
        Clear
      </button>
    </div>
  );
}
