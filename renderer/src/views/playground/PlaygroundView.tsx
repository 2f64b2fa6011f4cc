import './playground.css';
import { useEffect, useState } from 'react';
import { useArbor, useArborStore } from '../../store/react';
import { ModelPicker } from '../../components/ModelPicker';
import { PlaygroundToolbar, type PlaygroundMode } from './PlaygroundToolbar';
import { LiveStepper } from './LiveStepper';
import { Transcript } from './Transcript';
import { ChatInput } from './ChatInput';

/** Chat with a checkpoint (or any model Arbor loads) with its run's tools, or step through one episode. */
export function PlaygroundView() {
  const store = useArborStore();
  const checkpoints = useArbor((s) => s.playground.checkpoints);
  const checkpointId = useArbor((s) => s.playground.checkpointId);
  const setCheckpoint = useArbor((s) => s.playgroundActions.setCheckpoint);
  const [mode, setMode] = useState<PlaygroundMode>('chat');
  useEffect(() => {
    void store.getState().playgroundActions.loadCheckpoints();
  }, [store]);
  // The chat stays mounted (hidden) while stepping through, so its transcript and draft survive.
  const chatStyle = mode === 'step' ? { display: 'none' } : undefined;
  return (
    <div className="view" data-testid="view-playground">
      <PlaygroundToolbar mode={mode} setMode={setMode} />
      {/* Any model Arbor loads: a cached Hub model (org/name) or a run's checkpoint; Download… pulls one. */}
      <ModelPicker value={checkpointId} onPick={(m) => setCheckpoint(m.checkpointId ?? m.name)} testId="playground-model" />
      {checkpoints.length === 0 ? <div className="empty">No checkpoints yet: train a run first, or pick a model above.</div> : null}
      {mode === 'step' ? <LiveStepper checkpoint={checkpointId} /> : null}
      <Transcript style={chatStyle} />
      <ChatInput style={chatStyle} />
    </div>
  );
}
