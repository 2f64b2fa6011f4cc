// What the workbench needs from the engine, in the renderer's own terms. The wire types come
// from the protocol (engine/server/protocol.ts, shared with the engine and the CLI);
// `connection.ts` adapts the protocol client (engine/server/client.ts) to this interface:
// times become milliseconds and trajectories get the fields the views rely on. Views and
// stores only see this interface and the types below (none of them imports the protocol; eslint
// checks it), so a protocol change touches one adapter.
import type { JsonSchema } from '../lib/jsonSchema';
import type * as wire from '../../../engine/server/protocol';
import type { ConnectionState } from '../../../engine/server/client';
export type { ConnectionState };
export { EngineError } from '../../../engine/server/client';

export type RunStatus = 'queued' | 'running' | 'paused' | 'completed' | 'failed' | 'stopped' | string;

export interface Template extends Omit<wire.Template, 'schema'> {
  schema: JsonSchema;
}

/** A run; createdAt/startedAt/endedAt in milliseconds. */
export type RunSummary = wire.RunSummary;

/** A checkpoint; createdAt in milliseconds. */
export type Checkpoint = wire.Checkpoint;

export type RunDetail = wire.RunDetail;

export type Series = wire.Series;

/** A log line; time in milliseconds. */
export type LogLine = wire.LogLine;

export type TrajectorySummary = wire.TrajectorySummary;

export interface ToolCallView {
  name: string;
  args: unknown;
  result?: string;
  error?: string;
  latencyMs?: number;
  /** read from the turn's text (the trajectory was stored without call records) */
  derived?: boolean;
}

export interface TurnView extends Omit<wire.TurnDetail, 'toolCalls'> {
  toolCalls: ToolCallView[];
}

export interface TrajectoryView extends TrajectorySummary {
  rewardBreakdown: Record<string, number>;
  turnsData: TurnView[];
}

export type EnvFile = wire.Result<'env.files'>[number];

/** A run group (seed sweep or grid); createdAt/endedAt in milliseconds. */
export type RunGroupSummary = wire.RunGroupSummary;
export type Learning = wire.Learning;
export type RunGroupReport = wire.RunGroupReport;
export type RunGroupComparison = wire.RunGroupComparison;
/** Per cell, per metric: the mean over the cell's runs per step with its 95% interval. */
export type RunGroupSeries = Record<string, Record<string, wire.Band>>;

/** A file `runs.export` wrote: metrics (CSV, `count` steps) or trajectories (JSONL, `count` lines). */
export type ExportedFile = wire.Result<'runs.export'>['files'][number];

export interface TryResult {
  ok: boolean;
  value?: unknown;
  error?: { message: string; line?: number; column?: number; stack?: string };
  logs?: string[];
  ms?: number;
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** What a playground chat streams (the protocol's chat event, without its chatId). */
export type ChatEvent = DistributiveOmit<wire.ChatEvent, 'chatId'>;

export interface ChatMessage {
  role: 'user' | 'assistant' | 'tool';
  content: string;
  name?: string;
}

/** Events pushed by the engine that the UI follows (the protocol's, with times in milliseconds). */
export type EngineEvent =
  | ({ type: 'run' } & wire.EventData<'run'>)
  | ({ type: 'metrics' } & wire.EventData<'metrics'>)
  | ({ type: 'log' } & wire.EventData<'log'>)
  | ({ type: 'trajectories' } & wire.EventData<'trajectories'>)
  | ({ type: 'checkpoint' } & wire.EventData<'checkpoint'>)
  | ({ type: 'queue' } & wire.EventData<'queue'>);

export type ConsentPrompt = wire.EventData<'consent'>;

// Protocol types the stores and views use as they are.
export type { DriftReport, EngineInfo, ForkResult, LiveState, ModelEntry, PullProgressEvent } from '../../../engine/server/protocol';
/** What-if replay: the request (a stored trajectory, where to cut it, what to edit) and its progress. */
export type ForkRequest = wire.Params<'replay.fork'>;
export type ForkProgress = wire.EventData<'replay'>;
/** The top-k next tokens at a stored position under a checkpoint. */
export type TopK = wire.Result<'replay.topk'>;

export interface ArborApi {
  listTemplates(): Promise<Template[]>;
  listRuns(): Promise<RunSummary[]>;
  setNotes(id: string, notes: string): Promise<void>;
  setTags(id: string, tags: string[]): Promise<void>;
  getRun(id: string): Promise<RunDetail>;
  startRun(req: { template: string; config: Record<string, unknown>; name?: string; tags?: string[]; project?: string }): Promise<{ id: string }>;
  stopRun(id: string): Promise<void>;
  resumeRun(id: string): Promise<void>;
  /** Holds a running run before its next step (resumeRun continues it, stopRun ends it). */
  pauseRun(id: string): Promise<void>;
  forkRun(id: string, opts: { checkpoint?: string; config?: Record<string, unknown>; name?: string }): Promise<{ id: string }>;
  metricSeries(runId: string, keys?: string[], maxPoints?: number): Promise<Record<string, Series>>;
  runLog(runId: string, afterSeq?: number): Promise<LogLine[]>;
  trajectorySteps(runId: string): Promise<number[]>;
  listTrajectories(q: {
    runId: string;
    step?: number;
    minReward?: number;
    maxReward?: number;
    errorsOnly?: boolean;
    task?: string;
  }): Promise<TrajectorySummary[]>;
  getTrajectory(id: string): Promise<TrajectoryView>;
  /** Every sample of one prompt at a step (summaries, unfiltered, in sample order): the branch tree's input. */
  groupTrajectories(runId: string, step: number, group: number): Promise<TrajectorySummary[]>;
  listEnvFiles(): Promise<EnvFile[]>;
  readEnvFile(path: string): Promise<string>;
  writeEnvFile(path: string, text: string): Promise<void>;
  envTypes(): Promise<{ path: string; content: string }[]>;
  tryTool(req: { source: string; path?: string; tool?: string; args: unknown }): Promise<TryResult>;
  tryReward(req: { source: string; path?: string; trajectoryId: string }): Promise<TryResult>;
  /** Start MCP servers (`mcpServers` layout), list their tools with schemas, or run one call (with `tool`), then stop them. */
  tryMcp(req: { servers: Record<string, unknown>; tool?: string; args?: unknown }): Promise<TryResult>;
  listCheckpoints(runId?: string): Promise<Checkpoint[]>;
  /** What-if replay: fork a stored trajectory and sample continuations (stored, linked to it); progress through `onProgress`. */
  forkTrajectory(req: ForkRequest, onProgress?: (e: ForkProgress) => void): Promise<wire.ForkResult>;
  /** The stored what-if replays of a trajectory. */
  listForks(trajectoryId: string): Promise<TrajectorySummary[]>;
  /** Retokenisation drift of a stored trajectory, turn by turn. */
  trajectoryDrift(trajectoryId: string): Promise<wire.DriftReport>;
  /** A live rollout you can pause (live.start / live.step / live.close). */
  liveStart(req: wire.Params<'live.start'>): Promise<wire.LiveState>;
  liveStep(req: wire.Params<'live.step'>): Promise<wire.LiveState>;
  liveClose(sessionId: string): Promise<void>;
  /** The top-k next tokens at a stored position under a checkpoint (default: the one that sampled it). */
  topK(req: wire.Params<'replay.topk'>): Promise<TopK>;
  /** "Why didn't it learn?": the run's flagged steps (with reasons) and warnings. */
  runLearning(id: string): Promise<Learning>;
  listRunGroups(): Promise<RunGroupSummary[]>;
  runGroupReport(id: string, metrics?: string[]): Promise<RunGroupReport>;
  /** Group b − group a per metric: difference of means with its bootstrap interval. */
  compareRunGroups(a: string, b: string): Promise<RunGroupComparison>;
  runGroupSeries(id: string, maxPoints?: number): Promise<RunGroupSeries>;
  /** Write the run's metrics CSV and trajectories JSONL into the workspace's exports/ folder. */
  exportRun(id: string): Promise<ExportedFile[]>;
  /** Resolves with what the engine reports about the episode (the world or dataset its search tool read, why it ended). */
  chat(
    req: { checkpoint: string; messages: ChatMessage[]; tools?: string[]; chatId?: string; format?: string; temperature?: number },
    onEvent: (e: ChatEvent) => void,
  ): Promise<{
    world?: number;
    dataset?: string;
    format?: string;
    /** The tools the chat offered, each with its source (built-in, the run's tool file, environment.mcp_servers). */
    tools?: { name: string; source: string }[];
    reason?: string;
    stopped?: boolean;
  }>;
  /** Stop a running chat (it ends with what was generated so far); false if it had already ended. */
  cancelChat(chatId: string): Promise<{ cancelled: boolean }>;
  onEvent(cb: (e: EngineEvent) => void): () => void;
  /** The engine's state: sent on every (re)connect and when the workspace changes. */
  onEngineInfo(cb: (info: wire.EngineInfo) => void): () => void;
  /** Programs waiting for the user's approval (a config's MCP servers, tool/reward files); `done` closes the dialog. */
  onConsent?(cb: (req: ConsentPrompt) => void): () => void;
  answerConsent?(id: string, approve: boolean): Promise<void>;
  /** Open (or create) another workspace database; rejects with the reason when it cannot. */
  openWorkspace(path: string): Promise<wire.EngineInfo>;
  onConnection(cb: (s: ConnectionState) => void): () => void;
  /** The model picker (engine/hub): the Hugging Face cache and the runs' latest checkpoints. */
  listModels?(): Promise<wire.ModelEntry[]>;
  /** `arbor pull` in the engine; progress as it goes; rejects when cancelled (the partial file stays for the next pull). */
  pullModel?(req: { repo: string; revision?: string }, onProgress: (p: wire.PullProgressEvent) => void): Promise<{ repo: string; folder: string }>;
  cancelPull?(repo: string): Promise<{ cancelled: boolean }>;
}
