import type { ArborApi, EnvFile, TrajSummary, TryResult } from '../api/types';
import type { Get, Set } from './index';

export interface EditorSlice {
  envFiles: EnvFile[];
  envTypes: { path: string; content: string }[];
  filePath: string | null;
  /** text in the editor */
  source: string;
  /** text last saved to the workspace */
  savedSource: string;
  tryArgs: string;
  tryTrajectoryId: string;
  tryResult: TryResult | null;
  trying: boolean;
  /** stored trajectories offered to score a reward on (latest step of the chosen run) */
  tryRunId: string;
  tryTrajectories: TrajSummary[];
  loadTryTrajectories(runId: string): Promise<void>;
  loadEnv(): Promise<void>;
  openFile(path: string): Promise<void>;
  newFile(path: string, template: string): void;
  setSource(s: string): void;
  saveFile(): Promise<boolean>;
  setTryArgs(s: string): void;
  setTryTrajectory(id: string): void;
  tryIt(): Promise<void>;
}

export function fileKind(path: string, files: EnvFile[]): string {
  return files.find((f) => f.path === path)?.kind ?? (/reward/i.test(path) ? 'reward' : /tool/i.test(path) ? 'tool' : 'env');
}

export function createEditorSlice(api: ArborApi, set: Set, get: Get): EditorSlice {
  return {
    envFiles: [],
    envTypes: [],
    filePath: null,
    source: '',
    savedSource: '',
    tryArgs: '{}',
    tryTrajectoryId: '',
    tryResult: null,
    trying: false,
    tryRunId: '',
    tryTrajectories: [],
    async loadTryTrajectories(runId) {
      set({ tryRunId: runId, tryTrajectories: [] });
      if (!runId) return;
      try {
        const steps = await api.trajectorySteps(runId);
        const step = steps[steps.length - 1];
        const list = step == null ? [] : await api.listTrajectories({ runId, step });
        list.sort((a, b) => a.group - b.group || a.sample - b.sample);
        if (get().tryRunId !== runId) return;
        set({ tryTrajectories: list, tryTrajectoryId: list[0]?.id ?? get().tryTrajectoryId });
      } catch (err) {
        get().reportError(`Loading trajectories of run ${runId}`, err);
      }
    },
    async loadEnv() {
      // Files and type definitions load independently: an engine without env.types still lists files.
      await Promise.all([
        api.listEnvFiles().then((envFiles) => set({ envFiles }), (err) => get().reportError('Listing workspace files', err)),
        api.envTypes().then((envTypes) => set({ envTypes }), (err) => get().reportError('Loading the type definitions for the editor', err)),
      ]);
    },
    async openFile(path) {
      try {
        const text = await api.readEnvFile(path);
        set({ filePath: path, source: text, savedSource: text, tryResult: null });
      } catch (err) {
        get().reportError(`Opening ${path}`, err);
      }
    },
    newFile(path, template) {
      set({ filePath: path, source: template, savedSource: '', tryResult: null });
    },
    setSource: (source) => set({ source }),
    async saveFile() {
      const { filePath, source } = get();
      if (!filePath) return false;
      try {
        await api.writeEnvFile(filePath, source);
        set({ savedSource: source });
        set({ envFiles: await api.listEnvFiles() });
        return true;
      } catch (err) {
        get().reportError(`Saving ${filePath}`, err);
        return false;
      }
    },
    setTryArgs: (tryArgs) => set({ tryArgs }),
    setTryTrajectory: (tryTrajectoryId) => set({ tryTrajectoryId }),
    async tryIt() {
      const s = get();
      if (!s.filePath) return;
      set({ trying: true, tryResult: null });
      try {
        let result: TryResult;
        if (fileKind(s.filePath, s.envFiles) === 'reward') {
          if (!s.tryTrajectoryId) throw new Error('Pick a stored trajectory to score the reward on.');
          result = await api.tryReward({ source: s.source, path: s.filePath, trajectoryId: s.tryTrajectoryId });
        } else {
          let args: unknown;
          try {
            args = JSON.parse(s.tryArgs || '{}');
          } catch (err) {
            throw new Error(`Tool arguments are not valid JSON: ${(err as Error).message}`);
          }
          result = await api.tryTool({ source: s.source, path: s.filePath, args });
        }
        set({ tryResult: result });
      } catch (err) {
        set({ tryResult: { ok: false, error: { message: err instanceof Error ? err.message : String(err) } } });
      } finally {
        set({ trying: false });
      }
    },
  };
}
