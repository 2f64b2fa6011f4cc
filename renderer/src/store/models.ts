// The model picker's state (engine/hub through models.list / models.pull): the models Arbor can
// use (the Hugging Face cache and each run's latest checkpoint) and the pulls under way, with
// their progress. A cancelled pull keeps its partial file; pulling again continues from it.
import type { ArborApi, ModelEntry, PullProgressEvent } from '../api/types';
import type { Get, Set } from './state';

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

export interface ModelsSlice {
  /** null until loaded (or when this engine has no model list). */
  models: ModelEntry[] | null;
  pulls: Record<string, PullState>;
  loadModels(): Promise<void>;
  /** Pull org/name[@revision]; resolves with the name model.path takes once it is in the cache. */
  pullModel(repo: string): Promise<string | null>;
  cancelPull(repo: string): Promise<void>;
}

export function createModelsSlice(api: ArborApi, set: Set, get: Get): ModelsSlice {
  const setPull = (repo: string, p: Partial<PullState>) =>
    set({ pulls: { ...get().pulls, [repo]: { ...(get().pulls[repo] ?? { repo, progress: null, status: 'running' }), ...p } } });
  return {
    models: null,
    pulls: {},
    async loadModels() {
      if (!api.listModels) return;
      try {
        set({ models: await api.listModels() });
      } catch (err) {
        get().reportError('Listing models', err);
      }
    },
    async pullModel(repo) {
      if (!api.pullModel) return null;
      const name = repo.trim();
      setPull(name, { status: 'running', progress: null, error: undefined });
      try {
        await api.pullModel({ repo: name }, (progress) => setPull(name, { progress }));
        setPull(name, { status: 'done' });
        await get().loadModels();
        return name.endsWith('@main') ? name.slice(0, -5) : name;
      } catch (err) {
        const cancelled = get().pulls[name]?.progress?.phase === 'cancelled';
        setPull(name, { status: cancelled ? 'cancelled' : 'failed', error: cancelled ? undefined : (err as Error).message });
        return null;
      }
    },
    async cancelPull(repo) {
      await api.cancelPull?.(repo);
    },
  };
}
