// The model picker of the launch form and the playground: the models `arbor models` lists (the
// Hugging Face cache and each run's latest checkpoint), with size, architecture, parameters and
// whether Arbor loads each (or what it refuses); "Download…" pulls org/name from the Hub into the
// cache with its progress here (bytes, rate), cancellable (a later pull continues where it stopped).
import { useEffect, useState } from 'react';
import type { ModelEntry } from '../api/types';
import { useArbor, useArborStore } from '../store/react';

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(n < 10 ? 2 : 1)} ${units[i]}`;
}

const params = (n?: number) =>
  n === undefined ? '' : n >= 1e9 ? `${(n / 1e9).toFixed(2)}B` : n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : `${(n / 1e3).toFixed(1)}K`;

function describe(m: ModelEntry): string {
  return [m.architecture, params(m.parameters) && `${params(m.parameters)} params`, formatBytes(m.sizeBytes), m.loadable ? '' : `refused: ${m.refusal}`]
    .filter(Boolean)
    .join(' · ');
}

/** `value`: the chosen model's name (what model.path or the playground takes); `onPick` with the entry chosen. */
export function ModelPicker({ value, onPick, testId = 'model-picker' }: { value?: string; onPick: (m: ModelEntry) => void; testId?: string }) {
  const models = useArbor((s) => s.models.items);
  const pulls = useArbor((s) => s.models.pulls);
  const loadModels = useArbor((s) => s.modelActions.load);
  const pullModel = useArbor((s) => s.modelActions.pull);
  const cancelPull = useArbor((s) => s.modelActions.cancelPull);
  const store = useArborStore();
  const [downloading, setDownloading] = useState(false);
  const [repo, setRepo] = useState('');
  useEffect(() => {
    void loadModels();
  }, [loadModels]);
  if (models === null) return null;
  const chosen = models.find((m) => m.name === value || m.checkpointId === value);
  const key = repo.trim().includes('@') ? repo.trim() : `${repo.trim()}@main`;
  const pull = pulls[repo.trim()];
  const p = pull?.progress;
  const pct = p && p.totalBytes > 0 ? Math.min(100, (100 * p.bytes) / p.totalBytes) : 0;
  const start = async () => {
    const name = await pullModel(repo.trim());
    // The entry the pull produced, from the list reloaded after it.
    const m = name ? store.getState().models.items?.find((x) => x.name === name) : undefined;
    if (m) onPick(m);
  };
  return (
    <div className="model-picker" data-testid={testId}>
      <div className="toolbar">
        <label htmlFor={`${testId}-select`}>model</label>
        <select
          id={`${testId}-select`}
          value={chosen?.name ?? ''}
          onChange={(e) => {
            const m = models.find((x) => x.name === e.target.value);
            if (m) onPick(m);
          }}
          data-testid={`${testId}-select`}
        >
          <option value="">{models.length ? '(pick a model)' : '(no models: download one)'}</option>
          {models.map((m) => (
            <option key={`${m.source}:${m.name}`} value={m.name} disabled={!m.loadable} title={m.refusal ?? m.path}>
              {m.source === 'hub' ? m.label : `run ${m.label}`} — {describe(m)}
            </option>
          ))}
        </select>
        <button onClick={() => setDownloading((d) => !d)} data-testid={`${testId}-download`}>
          Download…
        </button>
        <button onClick={() => void loadModels()} title="list the cache again">
          Refresh
        </button>
      </div>
      {chosen ? (
        <div className="muted" data-testid={`${testId}-chosen`}>
          {chosen.label}: {describe(chosen)}
        </div>
      ) : null}
      {downloading ? (
        <div className="toolbar" data-testid={`${testId}-pull`}>
          <input
            value={repo}
            onChange={(e) => setRepo(e.target.value)}
            placeholder="org/name or org/name@revision"
            aria-label="Hugging Face model id"
            data-testid={`${testId}-repo`}
          />
          {pull?.status === 'running' ? (
            <button onClick={() => void cancelPull(key)} data-testid={`${testId}-cancel`}>
              Cancel
            </button>
          ) : (
            <button
              className="primary"
              disabled={!/^[^/\s]+\/[^/\s]+$/.test(repo.trim().split('@')[0] ?? '')}
              onClick={() => void start()}
              data-testid={`${testId}-pull-start`}
            >
              {pull?.status === 'cancelled' || pull?.status === 'failed' ? 'Resume' : 'Pull'}
            </button>
          )}
          {pull ? (
            <span data-testid={`${testId}-progress`} className={pull.status === 'failed' ? 'error-msg' : 'muted'}>
              {pull.status === 'failed'
                ? pull.error
                : p
                  ? `${p.phase}${p.file ? ` ${p.file}` : ''}: ${formatBytes(p.bytes)} of ${formatBytes(p.totalBytes)} (${pct.toFixed(0)}%), ${formatBytes(p.rate)}/s, files ${p.filesDone}/${p.files}`
                  : 'asking the Hub…'}
              {pull.status === 'cancelled' ? ' — cancelled; Resume continues where it stopped' : ''}
            </span>
          ) : null}
          {pull?.status === 'running' && p ? <progress max={100} value={pct} data-testid={`${testId}-bar`} /> : null}
        </div>
      ) : null}
    </div>
  );
}
