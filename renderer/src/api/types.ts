// What the workbench needs from the engine, in the renderer's own terms. `connection.ts` maps
// this onto the engine protocol client (engine/server/client.ts); the views and stores only see
// this interface, so a protocol change touches one adapter.
import type { JsonSchema } from '../lib/jsonSchema';

export type RunStatus = 'queued' | 'running' | 'completed' | 'failed' | 'stopped' | string;

export interface Template {
  id: string;
  name: string;
  description?: string;
  schema: JsonSchema;
  /** a ready-to-run config (e.g. a short demo) the form starts from, when the template has one */
  example?: Record<string, unknown>;
}

export interface RunSummary {
  id: string;
  name: string;
  status: RunStatus;
  template?: string;
  tags: string[];
  createdAt: number;
  step?: number;
  /** latest value of each metric (MLflow latest_metrics) */
  metrics: Record<string, number>;
  error?: string;
}

export interface Checkpoint {
  id: string;
  runId: string;
  step: number;
  path?: string;
  createdAt?: number;
  metrics?: Record<string, number>;
}

export interface RunDetail extends RunSummary {
  config: Record<string, unknown>;
  params?: Record<string, string>;
  checkpoints: Checkpoint[];
  parentId?: string;
}

export interface Series {
  step: number[];
  value: (number | null)[];
}

export interface LogLine {
  seq: number;
  time: number;
  level: string;
  text: string;
}

export interface TrajSummary {
  id: string;
  runId: string;
  step: number;
  group: number;
  sample: number;
  task?: string;
  prompt?: string;
  reward: number;
  advantage?: number;
  outcome?: string;
  turns: number;
  hasError: boolean;
}

export interface ToolCallView {
  name: string;
  args: unknown;
  result?: string;
  error?: string;
  latencyMs?: number;
  /** read from the turn's text (the trajectory was stored without call records) */
  derived?: boolean;
}

export interface TurnView {
  role: 'model' | 'tool' | 'env' | 'user' | 'system' | string;
  text: string;
  tokenIds: number[];
  /** decoded text of each token (same length as tokenIds), for the heat map */
  tokens: string[];
  logprob?: number[] | null;
  refLogprob?: number[] | null;
  entropy?: number[] | null;
  advantage?: number[] | null;
  lossMask?: number[] | null;
  toolCalls: ToolCallView[];
  stepReward?: number | null;
}

export interface Trajectory extends TrajSummary {
  rewardBreakdown: Record<string, number>;
  turnsData: TurnView[];
}

export interface EnvFile {
  path: string;
  kind: 'tool' | 'reward' | 'env' | 'config' | string;
}

export interface TryResult {
  ok: boolean;
  value?: unknown;
  error?: { message: string; line?: number; column?: number; stack?: string };
  logs?: string[];
  ms?: number;
}

export type ChatEvent =
  | { type: 'token'; text: string }
  /** a model turn ended: its exact text (replaces what the tokens streamed) */
  | { type: 'turn'; text: string; tokens: number }
  | { type: 'tool_call'; name: string; args: unknown }
  | { type: 'observation'; name: string; content: string; error?: string }
  /** the episode ended; `stopped` when playground.cancel stopped it */
  | { type: 'done'; text?: string; reason?: string; stopped?: boolean }
  | { type: 'error'; message: string };

export interface ChatMessage {
  role: 'user' | 'assistant' | 'tool';
  content: string;
  name?: string;
}

/** Events pushed by the engine that the UI follows. */
export type EngineEvent =
  | { type: 'run'; run: RunSummary }
  | { type: 'metrics'; runId: string; step: number; values: Record<string, number> }
  | { type: 'log'; runId: string; line: LogLine }
  | { type: 'trajectories'; runId: string; step: number; count: number }
  | { type: 'checkpoint'; runId: string; checkpoint: Checkpoint };

export type ConnectionState =
  | { state: 'connecting' }
  | { state: 'open' }
  | { state: 'engine-crashed'; message: string; restarting: boolean; attempt?: number }
  | { state: 'closed'; message: string };

export interface ArborApi {
  listTemplates(): Promise<Template[]>;
  listRuns(): Promise<RunSummary[]>;
  getRun(id: string): Promise<RunDetail>;
  startRun(req: { template: string; config: Record<string, unknown>; name?: string; tags?: string[] }): Promise<{ id: string }>;
  stopRun(id: string): Promise<void>;
  resumeRun(id: string): Promise<void>;
  forkRun(id: string, opts: { checkpoint?: string; config?: Record<string, unknown>; name?: string }): Promise<{ id: string }>;
  metricSeries(runId: string, keys?: string[], maxPoints?: number): Promise<Record<string, Series>>;
  runLog(runId: string, afterSeq?: number): Promise<LogLine[]>;
  trajectorySteps(runId: string): Promise<number[]>;
  listTrajectories(q: { runId: string; step?: number; minReward?: number; maxReward?: number; errorsOnly?: boolean; task?: string }): Promise<TrajSummary[]>;
  getTrajectory(id: string): Promise<Trajectory>;
  listEnvFiles(): Promise<EnvFile[]>;
  readEnvFile(path: string): Promise<string>;
  writeEnvFile(path: string, text: string): Promise<void>;
  envTypes(): Promise<{ path: string; content: string }[]>;
  tryTool(req: { source: string; path?: string; tool?: string; args: unknown }): Promise<TryResult>;
  tryReward(req: { source: string; path?: string; trajectoryId: string }): Promise<TryResult>;
  listCheckpoints(runId?: string): Promise<Checkpoint[]>;
  /** Resolves with what the engine reports about the episode (the world or dataset its search tool read, why it ended). */
  chat(req: { checkpoint: string; messages: ChatMessage[]; tools?: string[]; chatId?: string }, onEvent: (e: ChatEvent) => void): Promise<{ world?: number; dataset?: string; reason?: string; stopped?: boolean }>;
  /** Stop a running chat (it ends with what was generated so far); false if it had already ended. */
  cancelChat(chatId: string): Promise<{ cancelled: boolean }>;
  onEvent(cb: (e: EngineEvent) => void): () => void;
  onConnection(cb: (s: ConnectionState) => void): () => void;
}

/** An error from the engine, with the readable message the UI shows. */
export class EngineError extends Error {
  constructor(message: string, readonly code?: string, readonly details?: unknown) {
    super(message);
    this.name = 'EngineError';
  }
}
