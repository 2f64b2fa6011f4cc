// The first-run page: what Arbor is, the demo as a live workbench run, the way to your own
// environment, and where the workspace lives. Shown when the workspace has no runs yet, and
// from the nav at any time.
import './start.css';
import { useState } from 'react';
import { useArbor } from '../../store/react';

export function StartView() {
  const engine = useArbor((s) => s.connection.engine);
  const templates = useArbor((s) => s.runList.templates);
  const runs = useArbor((s) => s.runList.runs);
  const startRun = useArbor((s) => s.runListActions.start);
  const openRun = useArbor((s) => s.runActions.open);
  const go = useArbor((s) => s.navActions.go);
  const [starting, setStarting] = useState(false);
  const demo = templates.find((t) => t.id === 'demo');
  const home = engine?.home.replace(/\/+$/, '') ?? '';
  const steps = typeof demo?.example?.steps === 'number' ? demo.example.steps : undefined;

  const runDemo = async () => {
    if (!demo?.example) return;
    setStarting(true);
    const id = await startRun('demo', demo.example, 'demo', ['demo']);
    setStarting(false);
    if (id) await openRun(id);
  };

  return (
    <div className="view start" data-testid="start-view">
      <h1>Arbor</h1>
      <p className="lede">
        A workbench for training LLM agents with reinforcement learning on one machine: multi-turn tool-use rollouts, GRPO/PPO training on your CPU or GPU, and
        every run, metric and trajectory kept in a local database you can replay and compare.
      </p>
      <div className="start-cards">
        <section className="card">
          <h2>Run the demo</h2>
          <p>
            A tiny search agent learns to answer multi-hop questions with a search tool: a warm start on scripted demonstrations, then GRPO
            {steps ? ` for ${steps} steps` : ''}. Watch its reward, exact match and trajectories live in the Run view; stop or resume it at any time.
          </p>
          <button className="primary" data-testid="start-demo" disabled={!demo || starting} onClick={() => void runDemo()}>
            {starting ? 'Starting…' : 'Run the demo'}
          </button>
          {!demo && <p className="muted">The engine has no demo template (it offers: {templates.map((t) => t.id).join(', ') || 'none yet'}).</p>}
        </section>
        <section className="card">
          <h2>Open your environment</h2>
          <p>
            Write tools and a reward in TypeScript, try them on stored trajectories, and train on your own JSONL dataset with the “Your environment” template.
          </p>
          <button data-testid="start-editor" onClick={() => go('editor')}>
            Open the editor
          </button>
        </section>
        <section className="card">
          <h2>Your workspace</h2>
          <p>Runs, checkpoints and the database live on this machine:</p>
          <ul className="paths" data-testid="start-workspace">
            <li>
              database <code>{home}/arbor.db</code>
            </li>
            <li>
              run folders <code>{home}/runs/</code>
            </li>
            <li>
              tools, rewards, datasets <code>{home}/workspace/</code>
            </li>
          </ul>
          <p className="muted">
            Set <code>ARBOR_HOME</code> to keep it elsewhere. {runs.length ? `${runs.length} run${runs.length === 1 ? '' : 's'} so far: ` : 'No runs yet.'}
            {runs.length > 0 && (
              <button className="link" onClick={() => go('runs')}>
                see them
              </button>
            )}
          </p>
        </section>
      </div>
    </div>
  );
}
