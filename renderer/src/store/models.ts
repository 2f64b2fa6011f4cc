// The model picker's state (engine/hub through models.list / models.pull): the models Arbor can
// use (the Hugging Face cache and each run's latest checkpoint) and the pulls under way, with
// their progress. A cancelled pull keeps its partial file; pulling again continues from it.
import type { ArborApi, ModelEntry, PullProgressEvent } from '../api/types';
import { patchSlice, type Get, type Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends ModelsSlice {}
}

export interface PullState {
  repo: string;
  progress: PullProgressEvent | null;
  /** running, done, cancelled, or failed with `error`. */
  status: 'running' | 'done' | 'cancelled' | 'failed';
  error?: string;
}

export interface ModelsState {
  /** null until loaded (or when this engine has no model list). */
  items: ModelEntry[] | null;
  pulls: Record<string, PullState>;
}

export interface ModelsSlice {
  models: ModelsState;
  modelActions: {
    load(): Promise<void>;
    /** Pull org/name[@revision]; resolves with the name model.path takes once it is in the cache. */
    pull(repo: string): Promise<string | null>;
    cancelPull(repo: string): Promise<void>;
  };
}

export function createModelsSlice(api: ArborApi, set: Set, get: Get): ModelsSlice {
  const patch = (p: Partial<ModelsState>) => patchSlice(set, 'models', p);
  const setPull = (repo: string, p: Partial<PullState>) => {
    const pulls = get().models.pulls;
    patch({ pulls: { ...pulls, [repo]: { ...(pulls[repo] ?? { repo, progress: null, status: 'running' }), ...p } } });
  };
  const actions: ModelsSlice['modelActions'] = {
    async load() {
      if (!api.listModels) return;
      try {
        patch({ items: await api.listModels() });
      } catch (err) {
        get().connectionActions.reportError('Listing models', err);
      }
    },
    async pull(repo) {
      if (!api.pullModel) return null;
      const name = repo.trim();
      setPull(name, { status: 'running', progress: null, error: undefined });
      try {
        await api.pullModel({ repo: name }, (progress) => setPull(name, { progress }));
        setPull(name, { status: 'done' });
        await actions.load();
        return name.endsWith('@main') ? name.slice(0, -5) : name;
      } catch (err) {
        const cancelled = get().models.pulls[name]?.progress?.phase === 'cancelled';
        setPull(name, { status: cancelled ? 'cancelled' : 'failed', error: cancelled ? undefined : (err as Error).message });
        return null;
      }
    },
    async cancelPull(repo) {
      await api.cancelPull?.(repo);
    },
  };
  return { models: { items: null, pulls: {} }, modelActions: actions };
}
