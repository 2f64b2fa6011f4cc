/**
 * The engine protocol, defined once and checked at runtime at both ends (zod): the server
 * validates every request's params (server.ts), the client validates every result and pushed
 * event it receives (client.ts). The renderer, the CLI and the tests all use client.ts.
 *
 * Wire format (JSON over WebSocket or stdio lines; structured clone over a MessagePort):
 *   request  { id: number, method: string, params?: object }
 *   response { id, result } | { id, error: { message, code?, details? } }
 *   event    { event: string, data: object }
 * Times on the wire are Unix seconds (the store's unit, as in MLflow).
 * No Node imports here: the renderer bundles this file.
 */
import { z } from 'zod';

export const requestSchema = z.object({
  id: z.number().int(),
  method: z.string().min(1),
  params: z.unknown().optional(),
});
export type Request = z.infer<typeof requestSchema>;

/**
 * A number as it reaches a client. JSON turns NaN and ±Infinity into null (and SQLite stores
 * NaN as NULL); a MessagePort keeps them; zod's z.number() refuses both. `num` takes any
 * number; `value` also takes null and gives NaN (a metric, reward or per-token value that was
 * not a finite number); `numOrNull` keeps null where null means "no value" (series gaps).
 */
const num = z.custom<number>((v) => typeof v === 'number', 'expected a number');
const value = z.preprocess((v) => (v === null ? NaN : v), num);
const numOrNull = z.custom<number | null>((v) => v === null || typeof v === 'number', 'expected a number or null');
const metricValues = z.record(z.string(), value);
const json = z.record(z.string(), z.unknown());

// ---- shapes shared by results and events --------------------------------------------------
export const engineInfoSchema = z.object({
  version: z.string(),
  home: z.string(),
  /** Set when the workspace database could not be opened; only engine.info and workspace.open work then. */
  workspaceError: z.string().nullable(),
  pid: z.number(),
});

export const runSummarySchema = z.object({
  id: z.string(),
  name: z.string(),
  status: z.string(),
  template: z.string().optional(),
  tags: z.array(z.string()),
  createdAt: num,
  startedAt: num.nullable(),
  endedAt: num.nullable(),
  step: num,
  /** Latest value of each metric (MLflow latest_metrics). */
  metrics: metricValues,
  error: z.string().optional(),
  parentId: z.string().optional(),
  /** The project the run belongs to (runs are grouped by project, as in W&B). */
  project: z.string().optional(),
  /** The run's seed and algorithm (its config's algorithm.adv_estimator), for the runs table. */
  seed: num.nullable().optional(),
  algorithm: z.string().optional(),
});

export const checkpointSchema = z.object({
  id: z.string(),
  runId: z.string(),
  step: num,
  path: z.string(),
  createdAt: num,
  metrics: metricValues,
});

/** A model of the Hugging Face cache or a run's latest checkpoint (engine/hub/models.ts), for the model picker. */
export const modelEntrySchema = z.object({
  name: z.string(),
  label: z.string(),
  source: z.enum(['hub', 'run']),
  path: z.string(),
  revision: z.string(),
  commit: z.string().optional(),
  runId: z.string().optional(),
  checkpointId: z.string().optional(),
  step: num.optional(),
  sizeBytes: num,
  architecture: z.string().optional(),
  parameters: num.optional(),
  loadable: z.boolean(),
  refusal: z.string().optional(),
});

export const pullProgressSchema = z.object({
  repo: z.string(),
  phase: z.enum(['metadata', 'download', 'verify', 'done', 'failed', 'cancelled']),
  file: z.string().optional(),
  filesDone: num,
  files: num,
  bytes: num,
  totalBytes: num,
  transferred: num,
  /** Bytes per second over the last seconds. */
  rate: num,
  error: z.string().optional(),
});

export const runDetailSchema = runSummarySchema.extend({
  config: json,
  seed: num.nullable(),
  notes: z.string(),
  checkpoints: z.array(checkpointSchema),
  /** Steps that have stored trajectories. */
  trajectorySteps: z.array(num),
});

export const logLineSchema = z.object({ seq: num, time: num, level: z.string(), text: z.string() });
export const seriesSchema = z.object({ step: z.array(num), value: z.array(numOrNull) });

export const toolCallSchema = z.object({
  name: z.string(),
  args: z.unknown(),
  result: z.string().optional(),
  error: z.string().optional(),
  latencyMs: num.optional(),
});

/**
 * Branching rollouts: where a sample left its parent (engine/rollout/types.ts BranchPoint). `turn` counts
 * the stored turns shared with the parent (the prompt is turn 0); `entropy`/`deltaH` are normalised by log |V|.
 */
export const branchPointSchema = z.object({ parent: num, turn: num, tokens: num, entropy: value, deltaH: value, probability: value });

/**
 * What-if replays: how a forked trajectory left its parent (engine/store ForkRecord): the stored turn
 * (0 = the prompt) and token where the parent's ids stop, the edit appended (its text and ids; an
 * observation's tool result, or the whole turn, or text appended to a model turn), the checkpoint,
 * the sampling settings, the shared prefix's length and its per-token logprob under the checkpoint.
 */
export const forkSchema = z.object({
  parent: z.string(),
  turn: num,
  token: num.nullable(),
  edit: z.object({ kind: z.enum(['observation', 'text']), text: z.string(), ids: z.array(num), replaced: z.enum(['result', 'turn', 'append']) }).nullable(),
  checkpoint: z.object({ id: z.string(), path: z.string(), step: num.optional(), runId: z.string().optional() }),
  sampling: z.object({ temperature: num, n: num, seed: num, index: num }),
  prefixTokens: num,
  prefixLogprob: z.array(value),
});

export const trajectorySummarySchema = z.object({
  id: z.string(),
  runId: z.string(),
  step: num,
  group: num,
  sample: num,
  task: z.string().optional(),
  prompt: z.string().optional(),
  reward: value,
  advantage: value.optional(),
  /** The final answer, when the outcome has one. */
  outcome: z.string().optional(),
  turns: num,
  hasError: z.boolean(),
  /** False when only the summary was kept (the run's trajectory retention setting). */
  full: z.boolean(),
  /** Everything the environment reported about the episode (answer, golds, reward components, …). */
  outcomeData: json,
  timings: z.record(z.string(), value),
  /** Null for root samples; set on samples branched from another sample of the group. */
  branch: branchPointSchema.nullable().optional(),
  /** Null for stored rollouts; set on what-if replays (replay.fork). */
  fork: forkSchema.nullable().optional(),
  /** Share of the model tokens whose gradient the clip cut, and mean log π − log π_ref over them (null when not stored). */
  clipShare: numOrNull.optional(),
  klMean: numOrNull.optional(),
  /** How training treated it: the group's reward mean/std/size (what normalised the advantage) and the loss settings. */
  signal: z
    .object({
      group: z.object({ mean: value, std: value, n: num }).optional(),
      estimator: z.string().optional(),
      normByStd: z.boolean().optional(),
      policyLoss: z.string().optional(),
      lossAggMode: z.string().optional(),
      clipLow: num.optional(),
      clipHigh: num.optional(),
      dualClip: num.nullable().optional(),
      /** algorithm.process_rewards: whether the turns' step rewards were trained on (absent in older runs). */
      processRewards: z.boolean().optional(),
      /** A flat group dynamic sampling dropped: stored as a sample so it can be opened, never trained on. */
      dropped: z.boolean().optional(),
    })
    .nullable()
    .optional(),
});

const perToken = z.array(value).nullable();
export const turnSchema = z.object({
  role: z.string(),
  text: z.string(),
  tokenIds: z.array(num),
  /** Decoded text of each token (empty when the engine could not decode them). */
  tokens: z.array(z.string()),
  logprob: perToken,
  refLogprob: perToken,
  entropy: perToken,
  advantage: perToken,
  value: perToken,
  lossMask: perToken,
  toolCalls: z.array(toolCallSchema),
  stepReward: numOrNull,
  /** What training applied per token (null when not stored): importance ratio, clip side (0; +1 upper; −1 lower; 2 dual), loss weight (aggregation), advantage's outcome and process parts. */
  ratio: perToken.optional(),
  clipped: perToken.optional(),
  lossWeight: perToken.optional(),
  advOutcome: perToken.optional(),
  advProcess: perToken.optional(),
  /** algorithm.distill: the teacher's logprob of each token (null when not stored). */
  teacherLogprob: perToken.optional(),
});

export const trajectoryDetailSchema = trajectorySummarySchema.extend({ turnsData: z.array(turnSchema) });

export const templateSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().optional(),
  /** JSON schema of the config (the UI generates its form from it). */
  schema: json,
  /** A ready-to-run config. */
  example: json.optional(),
});

export const queueStateSchema = z.object({
  queue: z.array(z.object({ runId: z.string(), position: num })),
  running: z.string().nullable(),
});

export const tryResultSchema = z.object({
  ok: z.boolean(),
  value: z.unknown().optional(),
  error: z.object({ message: z.string(), path: z.string(), line: num.optional(), column: num.optional(), stack: z.string().optional() }).optional(),
  logs: z.array(z.string()),
  ms: num,
});

export const transcriptEntrySchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('assistant'), content: z.string(), tokens: num }),
  z.object({ role: z.literal('tool_call'), name: z.string(), args: z.unknown() }),
  z.object({ role: z.literal('tool'), name: z.string(), content: z.string(), error: z.string().optional() }),
]);

export const chatResultSchema = z.object({
  chatId: z.string(),
  checkpoint: z.object({ id: z.string(), path: z.string(), step: num.optional(), runId: z.string().optional() }),
  /** Seed of the world the search tool reads (multi-hop runs). */
  world: num.optional(),
  /** The dataset whose contexts the search tool reads (qa runs). */
  dataset: z.string().optional(),
  /** The tool-call format the chat ran in. */
  format: z.string().optional(),
  /** The tools the chat offered, each with its source: built-in, the run's tool file, or environment.mcp_servers. */
  tools: z.array(z.object({ name: z.string(), source: z.string() })).optional(),
  /** The prompt the model saw: the conversation rendered by the checkpoint's chat template (with the tools), and its length in tokens. */
  prompt: z.object({ text: z.string(), tokens: num }).optional(),
  transcript: z.array(transcriptEntrySchema),
  reason: z.string(),
  /** True when playground.cancel stopped the chat. */
  stopped: z.boolean().optional(),
});

/** What a playground chat streams while it runs (event `chat`, with its chatId). */
export const chatEventSchema = z.discriminatedUnion('type', [
  z.object({ chatId: z.string(), type: z.literal('token'), text: z.string() }),
  /** A model turn ended: its exact text (replaces what the tokens streamed). */
  z.object({ chatId: z.string(), type: z.literal('turn'), text: z.string(), tokens: num }),
  z.object({ chatId: z.string(), type: z.literal('tool_call'), name: z.string(), args: z.unknown() }),
  z.object({ chatId: z.string(), type: z.literal('observation'), name: z.string(), content: z.string(), error: z.string().optional() }),
  /** The episode ended; `stopped` when playground.cancel stopped it. */
  z.object({ chatId: z.string(), type: z.literal('done'), text: z.string(), reason: z.string(), stopped: z.boolean().optional() }),
  z.object({ chatId: z.string(), type: z.literal('error'), message: z.string() }),
]);

export const forkResultSchema = z.object({
  parent: z.string(),
  fork: forkSchema.omit({ prefixLogprob: true, sampling: true }).extend({ sampling: z.object({ temperature: num, n: num, seed: num }) }),
  /** The prefix the model saw (the parent's ids, then the edit's): tokens, the parent's stored logprob (null where it has none) and the checkpoint's. */
  prefix: z.object({ ids: z.array(num), tokens: z.array(z.string()), original: z.array(numOrNull), checkpoint: z.array(value) }),
  children: z.array(z.object({ id: z.string(), reward: value, answer: z.string().optional(), truncated: z.boolean(), tokenIds: z.array(num), forkAt: num })),
});

/** Retokenisation drift of one trajectory: each turn whose stored ids differ from its text re-rendered, with both sequences, and the drift the agent endpoint recorded. */
export const driftReportSchema = z.object({
  drifted: z.boolean(),
  checked: num,
  turns: z.array(
    z.object({
      turn: num,
      role: z.string(),
      stored: z.array(num),
      rendered: z.array(num),
      firstDiff: num,
      /** Drift the OpenAI-compatible endpoint recorded (an external agent's trajectory): stored = the turn as sampled, rendered = as the request rendered it. */
      endpoint: z.object({ kind: z.enum(['template', 'altered']), message: num, position: num }).optional(),
    }),
  ),
});

/** A live rollout's state after each action (engine/playground/live.ts). */
export const liveStateSchema = z.object({
  sessionId: z.string(),
  phase: z.enum(['model', 'tool', 'done']),
  checkpoint: z.object({ id: z.string(), step: num.optional(), runId: z.string().optional() }),
  task: z.string(),
  temperature: num,
  turns: z.array(
    z.object({
      role: z.enum(['env', 'model', 'tool']),
      text: z.string(),
      ids: z.array(num),
      tokens: z.array(z.string()),
      logprob: z.array(value),
      entropy: z.array(value),
      /** Positions of the tokens the user forced. */
      forced: z.array(num),
      toolCalls: z.array(toolCallSchema).optional(),
      /** A tool turn whose result the user edited. */
      edited: z.boolean().optional(),
    }),
  ),
  /** phase model: the next token's most likely alternatives (probabilities at the session's temperature; at 0, greedy, at temperature 1). */
  next: z.array(z.object({ id: num, token: z.string(), prob: value, logprob: value })).optional(),
  /** phase tool: what the tools returned, not yet seen by the model. */
  pending: z.object({ text: z.string(), calls: z.array(toolCallSchema) }).optional(),
  result: z
    .object({
      reward: value,
      answer: z.string().optional(),
      golds: z.array(z.string()).optional(),
      truncated: z.boolean(),
      reason: z.string(),
      trajectoryId: z.string(),
    })
    .optional(),
});

export const exportResultSchema = z.object({
  files: z.array(z.object({ kind: z.enum(['metrics', 'trajectories']), path: z.string(), count: num })),
});
export const importResultSchema = z.object({ runId: z.string(), trajectories: num, steps: z.array(num) });

export const learningSchema = z.object({
  /** Steps with the learn/* figures. */
  steps: num,
  flagged: z.array(z.object({ step: num, reasons: z.array(z.string()) })),
  warnings: z.array(z.object({ step: num, message: z.string() })),
  /** Collapse and degeneration, each at the step it starts (engine/train/degeneration.ts). */
  degeneration: z.array(z.object({ kind: z.string(), step: num, metric: z.string(), before: value, value: value, message: z.string() })).default([]),
  /** Steps whose flat groups dynamic sampling dropped and that stored a sample of them (flagged `dropped`), with how many were dropped. */
  droppedSteps: z.array(z.object({ step: num, dropped: num })).default([]),
  /** Held-out results before RL (SFT alone), at the best evaluation and at the end, by metric and slice (engine/train/run-story.ts). */
  heldOut: z
    .object({
      metrics: z.array(z.string()),
      columns: z.array(z.object({ label: z.enum(['before RL', 'best', 'end']), step: num, values: z.record(z.string(), value) })),
      bestMetric: z.string(),
    })
    .nullable()
    .default(null),
  /** Seconds per phase summed over the steps: sft, rollout, score, update. */
  phaseTimes: z.record(z.string(), value).default({}),
});

// ---- run groups (seed sweeps, grids): engine/store/groups.ts, engine/stats/group-report.ts ----
export const runGroupSummarySchema = z.object({
  id: z.string(),
  name: z.string(),
  kind: z.string(),
  status: z.string(),
  configFile: z.string().nullable(),
  createdAt: num,
  endedAt: num.nullable(),
  /** Runs planned (configurations × seeds) and runs that exist. */
  planned: num,
  runs: num,
});
const statSummary = z.object({ n: num, mean: value, sd: value, min: value, max: value, lo: value, hi: value, values: z.array(value) });
export const runGroupReportSchema = z.object({
  group: z.object({ id: z.string(), name: z.string(), kind: z.string(), status: z.string(), configFile: z.string().nullable(), planned: num }),
  cells: z.array(
    z.object({
      cell: z.string(),
      overrides: z.record(z.string(), z.string()),
      runs: z.array(z.object({ id: z.string(), seed: num.nullable(), status: z.string(), metrics: metricValues })),
      missingSeeds: z.array(num),
      metrics: z.record(z.string(), statSummary),
    }),
  ),
  partial: z.boolean(),
  notes: z.array(z.string()),
});
export const runGroupComparisonSchema = z.object({
  a: z.string(),
  b: z.string(),
  cells: z.array(
    z.object({
      cellA: z.string(),
      cellB: z.string(),
      metrics: z.record(z.string(), z.object({ meanA: value, meanB: value, diff: value, lo: value, hi: value, na: num, nb: num })),
    }),
  ),
});
/** Per cell, per metric: the mean over the cell's runs at each step and its 95% t-interval (the Compare view's band). */
export const bandSchema = z.object({ step: z.array(num), mean: z.array(numOrNull), lo: z.array(numOrNull), hi: z.array(numOrNull), n: z.array(num) });
export const runGroupSeriesSchema = z.record(z.string(), z.record(z.string(), bandSchema));

// ---- methods: params and result ----------------------------------------------------------
const id = z.object({ id: z.string().min(1) });
const runId = z.object({ runId: z.string().min(1) });
const none = z.object({}).optional();
const empty = z.null();

/** Every method with its params and its result; a method not listed here does not exist. */
export const api = {
  'engine.info': { params: none, result: engineInfoSchema },
  'workspace.open': { params: z.object({ path: z.string().min(1) }), result: engineInfoSchema },
  'templates.list': { params: none, result: z.array(templateSchema) },
  'runs.list': {
    params: z
      .object({
        status: z.string().optional(),
        tag: z.string().optional(),
        search: z.string().optional(),
        sort: z.string().optional(),
        desc: z.boolean().optional(),
        project: z.string().optional(),
      })
      .optional(),
    result: z.array(runSummarySchema),
  },
  'projects.list': { params: none, result: z.array(z.object({ name: z.string(), runs: num })) },
  'runs.get': { params: id, result: runDetailSchema },
  'runs.start': {
    params: z.object({
      template: z.string().min(1),
      config: json,
      name: z.string().optional(),
      tags: z.array(z.string()).optional(),
      project: z.string().optional(),
    }),
    result: z.object({ id: z.string() }),
  },
  'runs.stop': { params: id, result: empty },
  'runs.pause': { params: id, result: empty },
  'runs.resume': { params: id, result: empty },
  'runs.fork': {
    params: z.object({ id: z.string().min(1), checkpoint: z.string().optional(), config: json.optional(), name: z.string().optional() }),
    result: z.object({ id: z.string() }),
  },
  'runs.delete': { params: id, result: empty },
  'runs.setNotes': { params: z.object({ id: z.string().min(1), notes: z.string() }), result: empty },
  'runs.setTags': { params: z.object({ id: z.string().min(1), tags: z.array(z.string()) }), result: empty },
  'runs.log': { params: z.object({ runId: z.string().min(1), afterSeq: z.number().int().optional() }), result: z.array(logLineSchema) },
  /** Config keys whose values differ, per run id (flattened dotted keys). */
  'runs.diff': { params: z.object({ ids: z.array(z.string()).min(2) }), result: z.record(z.string(), z.record(z.string(), z.string().nullable())) },
  /** Write a run's metrics (CSV, every step) and trajectories (JSONL) next to `prefix` (default: $ARBOR_HOME/exports/<run>). */
  'runs.export': {
    params: z.object({ id: z.string().min(1), prefix: z.string().min(1).optional(), format: z.enum(['csv', 'jsonl', 'both']).optional() }),
    result: exportResultSchema,
  },
  /** Import a verl / Agent-R1 rollout dump folder ({step}.jsonl) as a run; progress as `import` events. */
  /** `dir`: a dump folder ({step}.jsonl) or one .jsonl file; `tokenizer`: the model folder that decodes agent-loop token ids. */
  'runs.importVerl': {
    params: z.object({ dir: z.string().min(1), name: z.string().optional(), tokenizer: z.string().min(1).optional() }),
    result: importResultSchema,
  },
  /** "Why didn't it learn?" (engine/train/diagnostics.ts): the run's flagged steps with their reasons and its warnings. */
  'runs.learning': { params: id, result: learningSchema },
  'groups.list': { params: none, result: z.array(runGroupSummarySchema) },
  /** A group's report; `metrics`: keys or prefixes to report (default eval/*, sft/eval/*, lift/*). */
  'groups.report': { params: z.object({ id: z.string().min(1), metrics: z.array(z.string()).optional() }), result: runGroupReportSchema },
  /** Group b − group a: difference of means per metric with its bootstrap 95% interval. */
  'groups.compare': {
    params: z.object({ a: z.string().min(1), b: z.string().min(1), metrics: z.array(z.string()).optional() }),
    result: runGroupComparisonSchema,
  },
  'groups.series': {
    params: z.object({ id: z.string().min(1), keys: z.array(z.string()).optional(), maxPoints: z.number().int().positive().max(20000).optional() }),
    result: runGroupSeriesSchema,
  },
  'metrics.series': {
    params: z.object({ runId: z.string().min(1), keys: z.array(z.string()).optional(), maxPoints: z.number().int().positive().max(20000).optional() }),
    result: z.record(z.string(), seriesSchema),
  },
  'trajectories.steps': { params: runId, result: z.array(num) },
  'trajectories.list': {
    params: z.object({
      runId: z.string().min(1),
      step: z.number().int().optional(),
      minReward: z.number().optional(),
      maxReward: z.number().optional(),
      errorsOnly: z.boolean().optional(),
      task: z.string().optional(),
    }),
    result: z.array(trajectorySummarySchema),
  },
  'trajectories.get': { params: id, result: trajectoryDetailSchema },
  'trajectories.group': {
    params: z.object({ runId: z.string().min(1), step: z.number().int(), group: z.number().int() }),
    result: z.array(trajectorySummarySchema),
  },
  'checkpoints.list': { params: z.object({ runId: z.string().optional() }).optional(), result: z.array(checkpointSchema) },
  'env.files': { params: none, result: z.array(z.object({ path: z.string(), kind: z.enum(['tool', 'reward', 'env']) })) },
  'env.read': { params: z.object({ path: z.string().min(1) }), result: z.string() },
  'env.write': { params: z.object({ path: z.string().min(1), text: z.string() }), result: empty },
  /** The user's answer to a `consent` event (engine/server/consent.ts): approve (remembered) or cancel. */
  'consent.answer': { params: z.object({ id: z.string().min(1), approve: z.boolean() }), result: z.object({ answered: z.boolean() }) },
  'env.types': { params: none, result: z.array(z.object({ path: z.string(), content: z.string() })) },
  /** The editor's try-it for MCP servers (the mcpServers layout): no tool → list the tools with schemas; a tool → one call as an episode runs it. */
  'mcp.tryTool': {
    params: z.object({ servers: z.record(z.string(), z.unknown()), tool: z.string().optional(), args: z.unknown().optional() }),
    result: tryResultSchema,
  },
  'sandbox.tryTool': {
    params: z.object({ source: z.string(), path: z.string().optional(), tool: z.string().optional(), args: z.unknown() }),
    result: tryResultSchema,
  },
  'sandbox.tryReward': { params: z.object({ source: z.string(), path: z.string().optional(), trajectoryId: z.string().min(1) }), result: tryResultSchema },
  'playground.chat': {
    params: z.object({
      checkpoint: z.string().min(1),
      messages: z.array(z.object({ role: z.string(), content: z.string(), name: z.string().optional() })),
      tools: z.array(z.string()).optional(),
      chatId: z.string().optional(),
      /** Tool-call format (search-r1, hermes, tags); default: the run's environment.format, else search-r1. */
      format: z.string().optional(),
      /** Sampling temperature (0 = greedy); default: the run's eval.temperature. */
      temperature: z.number().min(0).optional(),
    }),
    result: chatResultSchema,
  },
  /**
   * What-if replay: fork a stored trajectory at `turn` (stored index, 0 = the prompt) — at `token` of
   * a model turn, with `text` appended there, or a tool turn with its `observation` edited — and
   * sample the rest `n` times with `checkpoint` (an id or a model folder) in the run's environment.
   * The continuations are stored linked to the parent; progress as `replay` events.
   */
  'replay.fork': {
    params: z.object({
      trajectoryId: z.string().min(1),
      turn: z.number().int().min(0),
      token: z.number().int().min(0).optional(),
      observation: z.string().optional(),
      text: z.string().optional(),
      checkpoint: z.string().min(1),
      n: z.number().int().min(1).max(64),
      temperature: z.number().min(0).optional(),
      seed: z.number().int().optional(),
    }),
    result: forkResultSchema,
  },
  /** Stored what-if replays: the forks of one trajectory, or of every trajectory of a run. */
  'replay.forks': {
    params: z.object({ trajectoryId: z.string().min(1).optional(), runId: z.string().min(1).optional() }),
    result: z.array(trajectorySummarySchema),
  },
  /** Retokenisation drift: one trajectory turn by turn, or the count of drifted trajectories of a run (its task's tokenizer re-renders the text). */
  'replay.drift': {
    params: z.object({ trajectoryId: z.string().min(1).optional(), runId: z.string().min(1).optional() }),
    result: z.object({
      trajectory: driftReportSchema.optional(),
      run: z.object({ runId: z.string(), checked: num, drifted: num, ids: z.array(z.string()) }).optional(),
    }),
  },
  /** The top-k next tokens at a stored position (turn, token) under a checkpoint (default: the run's checkpoint that sampled the step). */
  'replay.topk': {
    params: z.object({
      trajectoryId: z.string().min(1),
      turn: z.number().int().min(0),
      token: z.number().int().min(0),
      k: z.number().int().min(1).max(50).optional(),
      checkpoint: z.string().min(1).optional(),
    }),
    result: z.object({
      checkpoint: z.object({ id: z.string(), step: num.optional(), exact: z.boolean() }),
      sampled: z.object({ id: num, token: z.string(), prob: value, logprob: value, rank: num }),
      alternatives: z.array(z.object({ id: num, token: z.string(), prob: value, logprob: value })),
    }),
  },
  /** A live rollout you can pause: one episode of the checkpoint's run's task (default: its first held-out question), paused before the first model token. */
  'live.start': {
    params: z.object({
      checkpoint: z.string().min(1),
      task: z.string().min(1).optional(),
      k: z.number().int().min(1).max(50).optional(),
      temperature: z.number().min(0).optional(),
      seed: z.number().int().optional(),
    }),
    result: liveStateSchema,
  },
  /**
   * One action: token (sample one), force (tokenId, or a text of one token), turn (to the end of the model turn),
   * observation (give the pending tool result to the model; text: edited), finish (to the end). A finished episode is stored (step −1).
   */
  'live.step': {
    params: z.object({
      sessionId: z.string().min(1),
      action: z.enum(['token', 'force', 'turn', 'observation', 'finish']),
      tokenId: z.number().int().min(0).optional(),
      text: z.string().optional(),
    }),
    result: liveStateSchema,
  },
  'live.close': { params: z.object({ sessionId: z.string().min(1) }), result: empty },
  /** The models Arbor can pick: the Hugging Face cache ($HF_HUB_CACHE) and each run's latest checkpoint. */
  'models.list': { params: none, result: z.array(modelEntrySchema) },
  /** `arbor pull` in the engine: progress as `pull` events; resolves when the model is in the cache. */
  'models.pull': {
    params: z.object({ repo: z.string().min(1), revision: z.string().min(1).optional(), include: z.array(z.string().min(1)).optional() }),
    result: z.object({ repo: z.string(), revision: z.string(), commit: z.string(), folder: z.string(), files: num, transferred: num }),
  },
  /** Stop a pull; its partial file stays, and the next models.pull of the repo continues from it. */
  'models.cancelPull': { params: z.object({ repo: z.string().min(1) }), result: z.object({ cancelled: z.boolean() }) },
  'playground.cancel': { params: z.object({ chatId: z.string().min(1) }), result: z.object({ cancelled: z.boolean() }) },
} as const;

export type Method = keyof typeof api;
/** What a caller passes (optional fields may be left out). */
export type Params<M extends Method> = z.input<(typeof api)[M]['params']>;
/** What a handler returns and the client resolves with. */
export type Result<M extends Method> = z.infer<(typeof api)[M]['result']>;

// ---- pushed events -------------------------------------------------------------------------
export const events = {
  /** The engine's state; sent to every client on connect and when the workspace changes. */
  engine: engineInfoSchema,
  /** A run's status or summary changed. */
  run: z.object({ run: runSummarySchema }),
  metrics: z.object({ runId: z.string(), step: num, values: metricValues }),
  log: z.object({ runId: z.string(), line: logLineSchema }),
  /** Trajectories of a step were committed (they can be read when this arrives). */
  trajectories: z.object({ runId: z.string(), step: num, count: num }),
  checkpoint: z.object({ runId: z.string(), checkpoint: checkpointSchema }),
  /** The training queue: one run on the device, the others waiting at their positions. */
  queue: queueStateSchema,
  chat: chatEventSchema,
  /** Progress of runs.importVerl. */
  import: z.object({ dir: z.string(), file: z.string(), samples: num, filesDone: num.optional(), filesTotal: num.optional() }),
  /** Progress of replay.fork (continuations sampled so far of n). */
  replay: z.object({ trajectoryId: z.string(), done: num, total: num, phase: z.enum(['loading', 'sampling', 'scoring', 'done']) }),
  /**
   * Programs a config, environment folder or stored run would run that this workspace has not
   * approved (MCP server commands, tool/reward files, an outside workspace, an LLM judge's URL): the workbench asks
   * and answers with consent.answer. `done`: answered (or given up); close the dialog.
   */
  consent: z.object({
    id: z.string(),
    origin: z.string(),
    items: z.array(z.object({ kind: z.enum(['mcp-server', 'agent', 'tool', 'reward', 'workspace', 'plugin', 'judge']), label: z.string() })),
    done: z.boolean().optional(),
  }),
  /** Progress of models.pull. */
  pull: pullProgressSchema,
  /** Progress of runs.export (trajectories written so far of the run's total). */
  export: z.object({ runId: z.string(), done: num, total: num }),
} as const;

export type EngineEventName = keyof typeof events;
export type EventData<E extends EngineEventName> = z.infer<(typeof events)[E]>;
/** A pushed event as it travels. */
export type EventMessage = { [E in EngineEventName]: { event: E; data: EventData<E> } }[EngineEventName];

export interface ProtocolError {
  message: string;
  code?: string;
  details?: unknown;
}

export type RunSummary = z.infer<typeof runSummarySchema>;
export type RunDetail = z.infer<typeof runDetailSchema>;
export type Checkpoint = z.infer<typeof checkpointSchema>;
export type LogLine = z.infer<typeof logLineSchema>;
export type Series = z.infer<typeof seriesSchema>;
export type TrajectorySummary = z.infer<typeof trajectorySummarySchema>;
export type Fork = z.infer<typeof forkSchema>;
export type ForkResult = z.infer<typeof forkResultSchema>;
export type DriftReport = z.infer<typeof driftReportSchema>;
export type LiveState = z.infer<typeof liveStateSchema>;
export type TrajectoryDetail = z.infer<typeof trajectoryDetailSchema>;
export type TurnDetail = z.infer<typeof turnSchema>;
export type ToolCallDetail = z.infer<typeof toolCallSchema>;
export type Template = z.infer<typeof templateSchema>;
export type TryResult = z.infer<typeof tryResultSchema>;
export type ChatResult = z.infer<typeof chatResultSchema>;
export type ChatEvent = z.infer<typeof chatEventSchema>;
export type TranscriptEntry = z.infer<typeof transcriptEntrySchema>;
export type QueueState = z.infer<typeof queueStateSchema>;
export type EngineInfo = z.infer<typeof engineInfoSchema>;
export type RunGroupSummary = z.infer<typeof runGroupSummarySchema>;
export type RunGroupReport = z.infer<typeof runGroupReportSchema>;
export type RunGroupComparison = z.infer<typeof runGroupComparisonSchema>;
export type Band = z.infer<typeof bandSchema>;
export type Learning = z.infer<typeof learningSchema>;
export type ModelEntry = z.infer<typeof modelEntrySchema>;
export type PullProgressEvent = z.infer<typeof pullProgressSchema>;

export function isMethod(m: string): m is Method {
  return Object.prototype.hasOwnProperty.call(api, m);
}
export function isEventName(e: string): e is EngineEventName {
  return Object.prototype.hasOwnProperty.call(events, e);
}

/** "a.b: message; c: message" — names the field that failed. */
export function describeIssues(error: z.ZodError, root: string): string {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : root}: ${i.message}`).join('; ');
}
