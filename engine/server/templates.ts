/**
 * Run templates and area handlers plugged into the engine server: the agentic RL training
 * job (engine/train) writing to the workspace store, the user-code sandbox for the editor's
 * "try it", and the environment API types for Monaco.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { episodeToRecord, recordExtras, signalSettings } from '../run/store-sink';
import { JsonlSink, memoryLimitHits, teeSink } from '../run/sinks';
import type { JobContext, RunTemplate } from './runs';
import type { LoadedConfig } from '../config/experiment';
import type { EngineHost } from './host';

interface TemplateSpec {
  id: string;
  name: string;
  description: string;
  example: Record<string, unknown>;
  /** The workspace folder of a user environment's files (tools/, rewards/, envs/): enables `environment`. */
  workspace?: string;
}

/** `environment` as the launch form offers it: the format and limits; in the user template also workspace files. */
function formEnvironmentSchema(formats: [string, ...string[]], workspace: boolean) {
  const base = {
    format: z.enum(formats).default('search-r1').describe('tool-call format'),
    max_calls_per_turn: z.number().int().positive().max(16).default(2),
    tool_timeout_ms: z.number().int().positive().default(5000),
    max_observation_tokens: z.number().int().positive().default(256),
  };
  if (!workspace) return z.strictObject(base);
  return z.strictObject({
    ...base,
    tools: z.array(z.string().regex(/^tools\/.+\.ts$/, 'a workspace file tools/<name>.ts')).default([]),
    reward: z
      .string()
      .regex(/^rewards\/.+\.ts$/, 'a workspace file rewards/<name>.ts')
      .optional(),
    tasks: z
      .string()
      .regex(/^envs\/.+\.jsonl$/, 'a workspace file envs/<name>.jsonl')
      .optional(),
  });
}

/** A template's config with `environment`'s workspace files checked and made absolute (workspace: tools may read it). */
function resolveEnvironment(config: Record<string, unknown>, schema: z.ZodType, workspace?: string): Record<string, unknown> {
  const env = schema.safeParse(config.environment ?? {});
  if (!env.success) {
    const i = env.error.issues[0]!;
    throw new Error(`environment${i.path.length ? '.' + i.path.join('.') : ''}: ${i.message}`);
  }
  const e = env.data as { tools?: string[]; reward?: string; tasks?: string };
  if (!workspace) return { ...config, environment: e };
  for (const f of [...(e.tools ?? []), ...(e.reward ? [e.reward] : []), ...(e.tasks ? [e.tasks] : [])])
    if (!existsSync(join(workspace, f))) throw new Error(`environment: no file ${f} in the workspace (${workspace})`);
  return { ...config, environment: { ...e, workspace } };
}

async function trainingTemplate(t: TemplateSpec): Promise<RunTemplate> {
  const { experimentJsonSchema, validateLoaded } = await import('../config/experiment');
  const { workspace, ...info } = t;
  const { FORMAT_NAMES } = await import('../env/formats');
  const schema = experimentJsonSchema();
  const envSchema = formEnvironmentSchema(FORMAT_NAMES, !!workspace);
  // `environment` as the form offers it: workspace files in the user template, the format everywhere.
  const { environment: _cliEnvironment, ...properties } = schema.properties as Record<string, unknown>;
  const check = (config: Record<string, unknown>) => {
    const e = config.environment as { tools?: unknown[]; reward?: unknown; tasks?: unknown } | undefined;
    if (!workspace && e && (e.tools?.length || e.reward || e.tasks))
      throw new Error('environment: user tools, rewards and task files run from the "Your environment" template (its files live in the workspace)');
    // Relative paths (task.dataset: envs/qa.jsonl, environment files) are the workspace's.
    return validateLoaded(resolveEnvironment(config, envSchema, workspace), { checkFiles: true, baseDir: workspace, job: 'train' });
  };
  const envJson = z.toJSONSchema(envSchema, { io: 'input' }) as { properties?: Record<string, Record<string, unknown>> };
  // The user template's form lists the workspace's tool, reward and task files as they are now.
  const listed = (dir: string, ext: string) => {
    try {
      return readdirSync(join(workspace!, dir))
        .filter((f) => f.endsWith(ext))
        .sort()
        .map((f) => `${dir}/${f}`);
    } catch {
      return [];
    }
  };
  const formSchema = () => {
    if (!workspace || !envJson.properties) return { ...schema, properties: { ...properties, environment: envJson } };
    const p = envJson.properties;
    const files = { tools: listed('tools', '.ts'), reward: listed('rewards', '.ts'), tasks: listed('envs', '.jsonl') };
    const props = {
      ...p,
      tools: {
        ...p.tools,
        description: files.tools.length ? `tool files in the workspace: ${files.tools.join(', ')}` : 'no tool files in the workspace yet (tools/<name>.ts)',
      },
      reward: { ...p.reward, ...(files.reward.length ? { enum: files.reward } : {}), description: 'reward file (rewards/<name>.ts)' },
      tasks: { ...p.tasks, ...(files.tasks.length ? { enum: files.tasks } : {}), description: 'task file for task.kind custom (envs/<name>.jsonl)' },
    };
    return { ...schema, properties: { ...properties, environment: { ...envJson, properties: props } } };
  };
  return {
    ...info,
    get schema() {
      return formSchema();
    },
    validate(config) {
      check(config);
    },
    async run(ctx) {
      const { hasUserFiles } = await import('../config/experiment');
      const loaded = check(ctx.config);
      const { cfg } = loaded;
      const intro = hasUserFiles(cfg)
        ? `environment: format ${cfg.environment.format}; tools ${cfg.environment.tools.map((f) => f.slice((workspace ?? '').length + 1)).join(', ') || '(built-in)'}; reward ${cfg.environment.reward ? cfg.environment.reward.slice((workspace ?? '').length + 1) : '(built-in exact match)'}`
        : undefined;
      return trainingJob(ctx, loaded, { intro });
    },
  };
}

/**
 * Train (or resume) a validated config as a run manager job: the task session opened as training
 * opens it, metrics, trajectories, logs and checkpoints to the store; `metricsFile` also appends
 * to the run folder's metrics.jsonl (as the CLI does for its runs).
 */
async function trainingJob(ctx: JobContext, loaded: LoadedConfig, o: { intro?: string; metricsFile?: boolean } = {}): Promise<{ stopped: boolean }> {
  const { cfg } = loaded;
  const { runExperiment } = await import('../run/runner');
  const { openTaskSession, decoderFor } = await import('../run/open');
  const session = await openTaskSession(loaded);
  const decode = decoderFor(cfg, () => session);
  if (o.intro) ctx.log(o.intro);
  for (const w of session.warnings ?? []) ctx.log(`warning: ${w}`);
  const host = session.takeLogs ? { takeLogs: () => session.takeLogs!() } : undefined;
  const jsonl = o.metricsFile ? new JsonlSink(ctx.runDir) : undefined;
  ctx.log(`training ${cfg.task.kind} for ${cfg.steps} steps (${cfg.algorithm.adv_estimator}, backend ${cfg.backend})`);
  try {
    // Completed when every step ran, even if a stop arrived during the last one.
    return await runExperiment(cfg, {
      runDir: ctx.runDir,
      session,
      resume: ctx.resume,
      signal: ctx.signal,
      beforeStep: () => ctx.checkpointPause(),
      sink: {
        metrics: async (step, values) => {
          // Lines come prefixed by their source (sandbox: / mcp:).
          for (const line of host?.takeLogs() ?? []) ctx.log(line);
          ctx.metric(step, values);
          await jsonl?.metrics(step, values);
        },
        truncateAfter: async (step) => {
          ctx.truncateAfter(step);
          await jsonl?.truncateAfter(step);
        },
        trajectories: (step, episodes, advantages, extra) => {
          // Tool calls the sandbox cut off at its memory limit: the run's log says so.
          const hits = memoryLimitHits(episodes);
          if (hits.length)
            ctx.log(
              `step ${step}: ${hits.length} tool call(s) exceeded the sandbox memory limit (${[...new Set(hits.map((h) => h.name))].join(', ')}): ${hits[0]!.error}`,
              'warn',
            );
          ctx.trajectories(
            step,
            episodes.map((e) => episodeToRecord(step, e, advantages.get(e), decode, recordExtras(e, extra, signalSettings(cfg)))),
            { full: step % cfg.logging.full_trajectories_every === 0 },
          );
        },
        event: (kind, payload) => {
          if (kind === 'checkpoint' && typeof payload.step === 'number' && typeof payload.dir === 'string') ctx.checkpoint(payload.step, payload.dir);
          else {
            // The checkpoint a resume continues from gets its row even if a kill came between its folder and its row.
            if (kind === 'resumed' && typeof payload.fromStep === 'number' && typeof payload.checkpoint === 'string')
              ctx.checkpoint(payload.fromStep, payload.checkpoint);
            ctx.log(`${kind}: ${JSON.stringify(payload)}`);
          }
        },
      },
      // The SFT warm start as its own run, this run's parent (its rows also in the run folder's metrics.jsonl, as before).
      sftRun: ctx.sftRun
        ? (so) => {
            const rec = ctx.sftRun!(so);
            return rec && jsonl ? { ...rec, sink: teeSink(rec.sink, { metrics: (s, v) => jsonl.metrics(s, v), truncateAfter: () => {} }) } : rec;
          }
        : undefined,
      onPhase: (phase, total) => ctx.log(`phase ${phase} (${total})`),
    });
  } finally {
    await session.close();
  }
}

/**
 * The job that resumes a run `arbor train` / `arbor sft` recorded (tag "cli"): its stored config
 * (validated as `arbor train --resume` reads a run's config.json, plugins loaded first) trained on
 * from its run folder's last checkpoint. Not a launch-form template: it only continues CLI runs.
 */
export function cliResumeJob(): RunTemplate {
  return {
    id: 'cli-resume',
    name: 'Resume a CLI run',
    schema: {},
    resumesCliRuns: true,
    async run(ctx) {
      const { loadPlugins, validateLoaded } = await import('../config/experiment');
      const { storedBaseDir } = await import('../run/run-dir');
      // Relative paths resolve against the folder recorded when the run started (or the run
      // folder), never the engine's working folder.
      const baseDir = storedBaseDir(ctx.runDir);
      await loadPlugins(ctx.config, baseDir, `run ${ctx.runId}`);
      const loaded = validateLoaded(ctx.config, { file: `run ${ctx.runId} config`, job: 'stored', baseDir });
      ctx.log(`resumed from the workbench (${ctx.runDir})`);
      return trainingJob(ctx, loaded, { metricsFile: true });
    },
  };
}

export async function builtinTemplates(home?: string): Promise<RunTemplate[]> {
  // The first-run page's "Run the demo": `arbor demo`'s SFT warm start + GRPO experiment
  // (resources/configs/demo.yaml) as a workbench run, live in the Run view.
  const demoConfig = parseYaml(readFileSync(fileURLToPath(new URL('../../resources/configs/demo.yaml', import.meta.url)), 'utf8')) as Record<string, unknown>;
  return [
    await trainingTemplate({
      id: 'multihop',
      name: 'Multi-hop search agent (SFT warm start + GRPO/PPO)',
      description: 'The built-in synthetic multi-hop world with a BM25 search tool; a tiny model trained on this machine.',
      example: { model: { init: 'tiny' }, task: { kind: 'multihop' }, steps: 20 },
    }),
    await trainingTemplate({
      id: 'qa',
      name: 'Your QA dataset (search agent)',
      description:
        'Questions from a JSONL file in the workspace (question, answers, HotpotQA-style context paragraphs, which become the search corpus); ' +
        'the same search tool, format and rewards; every fifth question held out.',
      example: {
        model: { init: 'tiny' },
        task: { kind: 'qa', dataset: home ? `${home}/workspace/envs/qa.jsonl` : 'workspace/envs/qa.jsonl' },
        steps: 20,
        sft: { warm_start: true },
      },
    }),
    ...(home
      ? [
          await trainingTemplate({
            id: 'user-env',
            name: 'Your environment (dataset + your tools and reward)',
            description:
              'A workspace dataset (envs/*.jsonl) with your own tools/ and rewards/ files, run in the sandbox for the whole run: ' +
              'a tool named "search" replaces the built-in BM25 search; the reward file scores every episode.',
            example: {
              model: { init: 'tiny' },
              task: { kind: 'qa', dataset: 'envs/qa.jsonl' },
              steps: 20,
              sft: { warm_start: true },
              environment: { tools: ['tools/search.ts'], reward: 'rewards/reward.ts' },
            },
            workspace: join(home, 'workspace'),
          }),
        ]
      : []),
    await trainingTemplate({
      id: 'demo',
      name: 'The demo: a tiny search agent (SFT warm start, then GRPO)',
      description:
        "`arbor demo`'s experiment (resources/configs/demo.yaml): the built-in multi-hop world, a tiny model, SFT on scripted expert demonstrations, then GRPO with dynamic sampling.",
      example: { ...demoConfig, sft: { ...(demoConfig.sft as object), warm_start: true } },
    }),
    cliResumeJob(),
  ];
}

export async function registerAreaHandlers(engine: EngineHost): Promise<void> {
  // The editor's type definitions for 'arbor/env' (kept in step with engine/env by a typecheck).
  const typesFile = fileURLToPath(new URL('../../resources/types/arbor-env.d.ts', import.meta.url));
  engine.on('env.types', () => [{ path: 'node_modules/@types/arbor-env/index.d.ts', content: readFileSync(typesFile, 'utf8') }]);

  // "Try it": user tools and rewards in the sandbox (engine/env/sandbox.ts).
  const sb = await import('../env/sandbox');
  // As training runs it: argument validation, the training call limits, ctx.episode, and
  // ctx.readFile over the workspace folder (where the user template's files live).
  const home = engine.opts.home;
  engine.on('sandbox.tryTool', (p: { source: string; path?: string; tool?: string; args: unknown }) =>
    sb.tryTool({ ...p, workspace: home ? join(home, 'workspace') : undefined }),
  );
  // "Try it" for MCP servers: started for the try, relative cwd against the workspace folder.
  engine.on('mcp.tryTool', async (p: { servers: unknown; tool?: string; args?: unknown }) =>
    (await import('../env/mcp/try')).tryMcp(p, {
      baseDir: existsSync(join(engine.opts.home, 'workspace')) ? join(engine.opts.home, 'workspace') : engine.opts.home,
    }),
  );
  engine.on('sandbox.tryReward', (p: { source: string; path?: string; trajectoryId: string }) => {
    const t = engine.store!.getTrajectory(p.trajectoryId);
    const o = t.outcomeData as {
      answer?: string;
      golds?: string[];
      formatOk?: boolean;
      toolCalls?: number;
      toolErrors?: number;
      gts?: unknown;
      meta?: unknown;
    };
    const golds = o.golds ?? (typeof o.gts === 'string' ? [o.gts] : Array.isArray(o.gts) ? (o.gts as string[]) : []);
    // The episode as training hands it to the reward: the task (with its meta), every model turn with its calls.
    const meta = (o.meta ?? {}) as Record<string, unknown>;
    const history = t.turnsData
      .filter((u) => u.role === 'model')
      .map((u) => {
        const calls = (u.toolCalls as { name?: string; args?: unknown; result?: string; error?: string }[]).map((c) => ({
          name: String(c.name ?? ''),
          args: c.args,
          result: String(c.result ?? ''),
          success: !c.error,
          ...(c.error ? { error: String(c.error) } : {}),
        }));
        return { text: u.text, calls, errors: [] as string[] };
      });
    const calls = history.flatMap((h) => h.calls);
    const summary = {
      task: { id: t.task ?? 'task', prompt: typeof meta.question === 'string' ? meta.question : t.prompt, answers: golds, meta },
      history,
      answer: o.answer,
      golds,
      turns: history.map((h) => h.text),
      formatOk: o.formatOk ?? true,
      toolCalls: o.toolCalls ?? calls.length,
      toolErrors: o.toolErrors ?? calls.filter((c) => !c.success).length,
      retrieved: calls.filter((c) => c.success).map((c) => c.result),
      supporting: [],
    };
    return sb.tryReward({ source: p.source, path: p.path, summary });
  });
}
