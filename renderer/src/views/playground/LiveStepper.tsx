// A live rollout you can pause, in the playground: one episode of the checkpoint's task, a step at
// a time. Before each model turn and after each tool call it waits; at every token the top-k
// alternatives are listed with their probabilities (keys: useLiveKeys). The finished episode is
// stored in the checkpoint's run (step −1, "playground") and opens in the replay.
import { useRef } from 'react';
import { useArbor } from '../../store/react';
import { TemperatureField } from '../../components/TemperatureField';
import { useLiveKeys } from './useLiveKeys';
import { LiveTurns } from './LiveTurns';
import { LivePending } from './LivePending';
import { LiveResult } from './LiveResult';
import { LiveNext } from './LiveNext';

export function LiveStepper({ checkpoint }: { checkpoint: string }) {
  const live = useArbor((s) => s.live.session);
  const busy = useArbor((s) => s.live.busy);
  const temperature = useArbor((s) => s.live.temperature);
  const setLiveTemperature = useArbor((s) => s.liveActions.setTemperature);
  const startLive = useArbor((s) => s.liveActions.start);
  const forceRef = useRef<HTMLInputElement>(null);
  const editRef = useRef<HTMLTextAreaElement>(null);
  useLiveKeys(checkpoint, forceRef, editRef);
  return (
    <div className="panel live" data-testid="live">
      <div className="toolbar">
        <b>Step through an episode</b>
        <TemperatureField className="muted" value={temperature} onChange={(t) => setLiveTemperature(t ?? 0)} testId="live-temperature" />
        <button className="primary" disabled={!checkpoint || busy} onClick={() => void startLive(checkpoint)} data-testid="live-start">
          Start (s)
        </button>
        {live ? (
          <span className="muted" data-testid="live-phase" data-phase={live.phase}>
            task {live.task} · {live.phase === 'model' ? 'paused in a model turn' : live.phase === 'tool' ? 'paused after a tool call' : 'ended'}
            {busy ? ' · working…' : ''}
          </span>
        ) : null}
        <span className="grow" />
        <span className="muted" style={{ fontSize: 11 }}>
          <span className="kbd">n</span> token · <span className="kbd">1</span>–<span className="kbd">8</span> force · <span className="kbd">f</span> force
          typed · <span className="kbd">t</span> turn · <span className="kbd">e</span> edit result · <span className="kbd">o</span> give result ·{' '}
          <span className="kbd">r</span> to the end
        </span>
      </div>
      {live ? (
        <div className="live-body">
          <div className="live-turns" data-testid="live-turns">
            <LiveTurns live={live} />
            {live.phase === 'tool' && live.pending ? <LivePending pending={live.pending} editRef={editRef} /> : null}
            {live.result ? <LiveResult result={live.result} /> : null}
          </div>
          {live.phase === 'model' && live.next ? <LiveNext live={live} next={live.next} forceRef={forceRef} /> : null}
        </div>
      ) : (
        <div className="muted">Runs one episode of the checkpoint's task (its first held-out question) with its tools and reward, pausing at every step.</div>
      )}
    </div>
  );
}
