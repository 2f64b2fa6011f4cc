// The Editor view: the workspace's environment files, the open file's text, and trying it (a tool
// with arguments, a reward on a stored trajectory, an MCP servers file's tools).
import type { ArborApi, EnvFile, TrajectorySummary, TryResult } from '../api/types';
import { patchSlice, type Get, type Set } from './state';

declare module './state' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface ArborState extends EditorSlice {}
}

export interface EditorState {
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
  tryTrajectories: TrajectorySummary[];
  /** MCP servers file open (see isMcpServersFile): the tools its servers offered on the last try. */
  mcpTools: McpToolInfo[];
  /** The MCP tool "Call tool" runs. */
  mcpTool: string;
}

export interface EditorSlice {
  editor: EditorState;
  editorActions: {
    loadTryTrajectories(runId: string): Promise<void>;
    loadEnv(): Promise<void>;
    openFile(path: string): Promise<void>;
    newFile(path: string, template: string): void;
    setSource(s: string): void;
    saveFile(): Promise<boolean>;
    setTryArgs(s: string): void;
    setTryTrajectory(id: string): void;
    tryIt(): Promise<void>;
    /** Pick an MCP tool; fills the arguments with a skeleton of its schema. */
    setMcpTool(name: string): void;
    /** Start the open file's MCP servers, list their tools (with schemas), stop them. */
    listMcpTools(): Promise<void>;
  };
}

export interface McpToolInfo {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * An MCP servers file: a .json workspace file holding `{ "mcpServers": { name: { command, args,
 * env, cwd, tools, timeout_ms } } }` (the layout environment.mcp_servers reads). Judged on the
 * editor's text, so a new file is tried before it is saved.
 */
export function isMcpServersFile(path: string | null, source: string): boolean {
  if (!path || !/\.json$/i.test(path)) return false;
  try {
    const j = JSON.parse(source) as unknown;
    return !!j && typeof j === 'object' && 'mcpServers' in j;
  } catch {
    return /"mcpServers"\s*:/.test(source); // still an MCP file while its JSON is being edited
  }
}

/** The `mcpServers` map of the editor's text, or an error naming what is wrong with it. */
export function mcpServersOf(path: string, source: string): Record<string, unknown> {
  let j: unknown;
  try {
    j = JSON.parse(source);
  } catch (err) {
    throw new Error(`${path} is not valid JSON: ${(err as Error).message}`);
  }
  const servers = (j as { mcpServers?: unknown }).mcpServers;
  if (!servers || typeof servers !== 'object' || Array.isArray(servers))
    throw new Error(`${path}: mcpServers must be an object of servers ({ "name": { "command": …, "args": […] } })`);
  return servers as Record<string, unknown>;
}

/** Arguments skeleton for a JSON schema's properties (required ones, or all when none is required). */
export function argsSkeleton(schema: Record<string, unknown>): string {
  const props = (schema.properties ?? {}) as Record<string, { type?: string; default?: unknown }>;
  const required = Array.isArray(schema.required) ? (schema.required as string[]) : Object.keys(props);
  const blank: Record<string, unknown> = { number: 0, integer: 0, boolean: false, array: [], object: {}, string: '' };
  return JSON.stringify(Object.fromEntries(required.filter((k) => k in props).map((k) => [k, props[k]!.default ?? blank[props[k]!.type ?? 'string'] ?? null])));
}

/** Tools from an mcp.tryTool result's value (`{ tools, result? }`). */
function toolsOf(value: unknown): McpToolInfo[] | undefined {
  const tools = (value as { tools?: unknown } | undefined)?.tools;
  return Array.isArray(tools) ? (tools as McpToolInfo[]) : undefined;
}

export function fileKind(path: string, files: EnvFile[]): string {
  return files.find((f) => f.path === path)?.kind ?? (/reward/i.test(path) ? 'reward' : /tool/i.test(path) ? 'tool' : 'env');
}

/** The tool arguments typed in the editor's try panel, parsed. */
function parseToolArgs(text: string): unknown {
  try {
    return JSON.parse(text || '{}');
  } catch (err) {
    throw new Error(`Tool arguments are not valid JSON: ${(err as Error).message}`);
  }
}

export function createEditorSlice(api: ArborApi, set: Set, get: Get): EditorSlice {
  const patch = (p: Partial<EditorState>) => patchSlice(set, 'editor', p);
  const report = (context: string, err: unknown) => get().connectionActions.reportError(context, err);
  const failed = (err: unknown): TryResult => ({ ok: false, error: { message: err instanceof Error ? err.message : String(err) } });
  const actions: EditorSlice['editorActions'] = {
    setMcpTool(name) {
      const t = get().editor.mcpTools.find((x) => x.name === name);
      patch({ mcpTool: name, ...(t ? { tryArgs: argsSkeleton(t.parameters) } : {}) });
    },
    async listMcpTools() {
      const s = get().editor;
      if (!s.filePath) return;
      patch({ trying: true, tryResult: null });
      try {
        const result = await api.tryMcp({ servers: mcpServersOf(s.filePath, s.source) });
        const tools = toolsOf(result.value);
        if (tools) {
          patch({ mcpTools: tools });
          if (!tools.some((t) => t.name === get().editor.mcpTool) && tools[0]) actions.setMcpTool(tools[0].name);
        }
        patch({ tryResult: result });
      } catch (err) {
        patch({ tryResult: failed(err) });
      } finally {
        patch({ trying: false });
      }
    },
    async loadTryTrajectories(runId) {
      patch({ tryRunId: runId, tryTrajectories: [] });
      if (!runId) return;
      try {
        const steps = await api.trajectorySteps(runId);
        const step = steps[steps.length - 1];
        const list = step == null ? [] : await api.listTrajectories({ runId, step });
        list.sort((a, b) => a.group - b.group || a.sample - b.sample);
        if (get().editor.tryRunId !== runId) return;
        patch({ tryTrajectories: list, tryTrajectoryId: list[0]?.id ?? get().editor.tryTrajectoryId });
      } catch (err) {
        report(`Loading trajectories of run ${runId}`, err);
      }
    },
    async loadEnv() {
      // Files and type definitions load independently: an engine without env.types still lists files.
      await Promise.all([
        api.listEnvFiles().then(
          (envFiles) => patch({ envFiles }),
          (err) => report('Listing workspace files', err),
        ),
        api.envTypes().then(
          (envTypes) => patch({ envTypes }),
          (err) => report('Loading the type definitions for the editor', err),
        ),
      ]);
    },
    async openFile(path) {
      try {
        const text = await api.readEnvFile(path);
        patch({ filePath: path, source: text, savedSource: text, tryResult: null, mcpTools: [], mcpTool: '' });
      } catch (err) {
        report(`Opening ${path}`, err);
      }
    },
    newFile(path, template) {
      patch({ filePath: path, source: template, savedSource: '', tryResult: null, mcpTools: [], mcpTool: '' });
    },
    setSource: (source) => patch({ source }),
    async saveFile() {
      const { filePath, source } = get().editor;
      if (!filePath) return false;
      try {
        await api.writeEnvFile(filePath, source);
        patch({ savedSource: source });
        patch({ envFiles: await api.listEnvFiles() });
        return true;
      } catch (err) {
        report(`Saving ${filePath}`, err);
        return false;
      }
    },
    setTryArgs: (tryArgs) => patch({ tryArgs }),
    setTryTrajectory: (tryTrajectoryId) => patch({ tryTrajectoryId }),
    async tryIt() {
      const s = get().editor;
      if (!s.filePath) return;
      patch({ trying: true, tryResult: null });
      try {
        let result: TryResult;
        if (isMcpServersFile(s.filePath, s.source)) {
          if (!s.mcpTool) throw new Error("List the servers' tools and pick one to call.");
          const args = parseToolArgs(s.tryArgs);
          result = await api.tryMcp({ servers: mcpServersOf(s.filePath, s.source), tool: s.mcpTool, args });
          const tools = toolsOf(result.value);
          if (tools) patch({ mcpTools: tools });
        } else if (fileKind(s.filePath, s.envFiles) === 'reward') {
          if (!s.tryTrajectoryId) throw new Error('Pick a stored trajectory to score the reward on.');
          result = await api.tryReward({ source: s.source, path: s.filePath, trajectoryId: s.tryTrajectoryId });
        } else {
          result = await api.tryTool({ source: s.source, path: s.filePath, args: parseToolArgs(s.tryArgs) });
        }
        patch({ tryResult: result });
      } catch (err) {
        patch({ tryResult: failed(err) });
      } finally {
        patch({ trying: false });
      }
    },
  };
  return {
    editor: {
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
      mcpTools: [],
      mcpTool: '',
    },
    editorActions: actions,
  };
}
