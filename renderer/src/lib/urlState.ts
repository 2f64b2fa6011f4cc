// The Trajectories view's place in the page URL (its hash, so the web mode's ?token= stays):
// #/trajectories?run=<id>&step=<n>&sample=<trajectory id>&channel=<c>. Reload opens the same
// trajectory on the same channel; back and forward walk the trajectories opened.
import { CHANNELS, type Channel } from './heat';

export interface TrajUrlState {
  run: string;
  step?: number;
  sample?: string;
  channel?: Channel;
}

export function parseTrajHash(hash: string): TrajUrlState | null {
  const m = /^#\/trajectories\?(.*)$/.exec(hash);
  if (!m) return null;
  const q = new URLSearchParams(m[1]);
  const run = q.get('run');
  if (!run) return null;
  const step = q.get('step');
  const channel = q.get('channel');
  return {
    run,
    ...(step !== null && Number.isInteger(Number(step)) ? { step: Number(step) } : {}),
    ...(q.get('sample') ? { sample: q.get('sample')! } : {}),
    ...(channel && (CHANNELS as readonly string[]).includes(channel) ? { channel: channel as Channel } : {}),
  };
}

export function formatTrajHash(s: TrajUrlState): string {
  const q = new URLSearchParams({ run: s.run });
  if (s.step !== undefined) q.set('step', String(s.step));
  if (s.sample) q.set('sample', s.sample);
  if (s.channel) q.set('channel', s.channel);
  return `#/trajectories?${q.toString()}`;
}

// The Run and Compare views' place in the URL: #/run?id=<run id> and #/compare?ids=<id>,<id>,…
// (reload keeps the view; back and forward walk the runs opened).
export type ViewUrlState = { view: 'run'; run: string } | { view: 'compare'; runs: string[] } | ({ view: 'trajectories' } & TrajUrlState);

export function parseViewHash(hash: string): ViewUrlState | null {
  const traj = parseTrajHash(hash);
  if (traj) return { view: 'trajectories', ...traj };
  const m = /^#\/(run|compare)\?(.*)$/.exec(hash);
  if (!m) return null;
  const q = new URLSearchParams(m[2]);
  if (m[1] === 'run') {
    const id = q.get('id');
    return id ? { view: 'run', run: id } : null;
  }
  const ids = (q.get('ids') ?? '').split(',').filter(Boolean);
  return ids.length ? { view: 'compare', runs: ids } : null;
}

export function formatRunHash(run: string): string {
  return `#/run?${new URLSearchParams({ id: run }).toString()}`;
}

export function formatCompareHash(runs: string[]): string {
  return `#/compare?ids=${runs.map(encodeURIComponent).join(',')}`;
}
