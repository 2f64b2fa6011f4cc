// A live rollout you can pause, in the playground: one episode of the checkpoint's task, a step at
// a time. Before each model turn and after each tool call it waits; at every token the top-k
// alternatives are listed with their probabilities. Keys (outside text fields): s start · n next
// token · 1–8 force that alternative · f force a token you type · t finish the turn · e edit the
// tool result · o give the result to the model as it is · r run to the end. The finished episode
// is stored in the checkpoint's run (step −1, "playground") and opens in the replay.
import { useEffect, useRef, useState } from 'react';
import { TemperatureField } from './TemperatureField';
import { useArbor, useArborStore } from '../store/react';

export function LiveStepper({ checkpoint }: { checkpoint: string }) {
  const store = useArborStore();
  const live = useArbor((s) => s.live);
  const busy = useArbor((s) => s.liveBusy);
  const temperature = useArbor((s) => s.liveTemperature);
  const [force, setForce] = useState('');
  const [edit, setEdit] = useState<string | null>(null);
  const forceRef = useRef<HTMLInputElement>(null);
  const editRef = useRef<HTMLTextAreaElement>(null);
  const pendingText = live?.pending?.text;
  useEffect(() => setEdit(pendingText ?? null), [pendingText]);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const el = e.target as HTMLElement | null;
      if (el && (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT')) return;
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const s = store.getState();
      const l = s.live;
      let handled = true;
      if (e.key === 's' && checkpoint) void s.startLive(checkpoint);
      else if (!l || l.phase === 'done') handled = false;
      else if (l.phase === 'model' && e.key === 'n') void s.liveStep('token');
      else if (l.phase === 'model' && /^[1-8]$/.test(e.key) && l.next?.[Number(e.key) - 1])
        void s.liveStep('force', { tokenId: l.next[Number(e.key) - 1]!.id });
      else if (l.phase === 'model' && e.key === 'f') forceRef.current?.focus();
      else if (l.phase === 'model' && e.key === 't') void s.liveStep('turn');
      else if (l.phase === 'tool' && e.key === 'e') editRef.current?.focus();
      else if (l.phase === 'tool' && e.key === 'o') void s.liveStep('observation');
      else if (e.key === 'r') void s.liveStep('finish');
      else handled = false;
      if (handled) e.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [store, checkpoint]);
  const a = store.getState();
  // Whole-word tokenizers (the tiny models) decode tokens without their spaces: draw them apart.
  const wordLevel = !!live && live.turns.every((u) => u.tokens.every((t) => !/\s/.test(t)));
  const giveObservation = () => {
    const l = store.getState().live;
    if (!l?.pending) return;
    void a.liveStep('observation', edit !== null && edit !== l.pending.text ? { text: edit } : {});
  };
  return (
    <div className="panel live" data-testid="live">
      <div className="toolbar">
        <b>Step through an episode</b>
        <TemperatureField className="muted" value={temperature} onChange={(t) => a.setLiveTemperature(t ?? 0)} testId="live-temperature" />
        <button className="primary" disabled={!checkpoint || busy} onClick={() => void a.startLive(checkpoint)} data-testid="live-start">
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
            {live.turns.map((u, i) => (
              <div key={i} className="turn" data-testid="live-turn" data-role={u.role}>
                <div className="turn-head">
                  <span className={`turn-role ${u.role}`}>{u.role}</span>
                  <span>{u.ids.length} tokens</span>
                  {u.edited ? <span className="flag">edited by you</span> : null}
                  {u.forced.length ? <span className="flag">{u.forced.length} forced</span> : null}
                </div>
                <div className="tokens">
                  {u.tokens.map((t, j) => (
                    <span key={j} className={`t${u.forced.includes(j) ? ' forced' : ''}`} data-testid={u.forced.includes(j) ? 'live-forced' : undefined}>
                      {t}
                      {wordLevel ? ' ' : ''}
                    </span>
                  ))}
                </div>
              </div>
            ))}
            {live.phase === 'tool' && live.pending ? (
              <div className="turn" data-testid="live-pending">
                <div className="turn-head">
                  <span className="turn-role tool">tool result</span>
                  {live.pending.calls.map((c, i) => (
                    <span key={i} className="mono">
                      {c.name}({JSON.stringify(c.args)}){c.error ? ` error: ${c.error}` : ''}
                    </span>
                  ))}
                  <span className="muted">the model has not seen it yet: edit it, then give it (Ctrl+Enter)</span>
                </div>
                <textarea
                  ref={editRef}
                  aria-label="the tool's result, before the model sees it"
                  rows={3}
                  style={{ width: '100%' }}
                  value={edit ?? ''}
                  onChange={(e) => setEdit(e.target.value)}
                  onKeyDown={(e) => {
                    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
                      e.preventDefault();
                      giveObservation();
                    } else if (e.key === 'Escape') (e.target as HTMLElement).blur();
                  }}
                  data-testid="live-observation"
                />
                <button onClick={giveObservation} disabled={busy} data-testid="live-give">
                  Give it to the model
                </button>
              </div>
            ) : null}
            {live.result ? (
              <div className="panel verdict" data-testid="live-result">
                reward <b className="mono">{live.result.reward.toFixed(4)}</b> · answer{' '}
                {live.result.answer === undefined ? '—' : JSON.stringify(live.result.answer)}
                {live.result.golds?.length ? ` · gold ${live.result.golds.map((g) => JSON.stringify(g)).join(' / ')}` : ''} · {live.result.reason}
                {live.result.truncated ? ' (truncated)' : ''} · stored as trajectory{' '}
                <a
                  href="#"
                  onClick={(e) => {
                    e.preventDefault();
                    void a.openLiveInReplay();
                  }}
                  data-testid="live-open"
                >
                  {live.result.trajectoryId}
                </a>
              </div>
            ) : null}
          </div>
          {live.phase === 'model' && live.next ? (
            <div className="inspector" data-testid="live-next">
              <div className="muted">
                next token ({live.temperature === 0 ? 'greedy: the first; probabilities at T 1' : `probabilities at T ${live.temperature}`}):
              </div>
              <table>
                <tbody>
                  {live.next.map((c, i) => (
                    <tr key={c.id} data-testid="live-alt" onClick={() => void a.liveStep('force', { tokenId: c.id })} style={{ cursor: 'pointer' }}>
                      <td className="kbd">{i + 1}</td>
                      <td className="mono">{JSON.stringify(c.token)}</td>
                      <td className="mono" data-testid="live-alt-prob">
                        {c.prob.toFixed(4)}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
              <input
                ref={forceRef}
                aria-label="force a token"
                value={force}
                placeholder="force a token (type it, Enter)"
                onChange={(e) => setForce(e.target.value)}
                onKeyDown={(e) => {
                  if (e.key === 'Enter' && force) {
                    e.preventDefault();
                    void a.liveStep('force', { text: force });
                    setForce('');
                    (e.target as HTMLElement).blur();
                  } else if (e.key === 'Escape') (e.target as HTMLElement).blur();
                }}
                data-testid="live-force"
              />
              <div style={{ display: 'flex', gap: 4, marginTop: 4 }}>
                <button onClick={() => void a.liveStep('token')} disabled={busy} data-testid="live-token">
                  Next token
                </button>
                <button onClick={() => void a.liveStep('turn')} disabled={busy} data-testid="live-turn-end">
                  Finish turn
                </button>
                <button onClick={() => void a.liveStep('finish')} disabled={busy} data-testid="live-finish">
                  To the end
                </button>
              </div>
            </div>
          ) : null}
        </div>
      ) : (
        <div className="muted">Runs one episode of the checkpoint's task (its first held-out question) with its tools and reward, pausing at every step.</div>
      )}
    </div>
  );
}
